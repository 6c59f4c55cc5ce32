package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
)

const (
	benchTrace  = "../../bench/testdata/tiny.jsonl"
	benchPolicy = "../../bench/testdata/policy.yaml"
)

// runCmd runs the ahead command line on synctest's clock.
func runCmd(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	synctest.Test(t, func(t *testing.T) {
		code = run(t.Context(), &env{stdout: &out, stderr: &errb}, args)
	})
	return code, out.String(), errb.String()
}

func TestBenchJSONAndPlot(t *testing.T) {
	plot := filepath.Join(t.TempDir(), "out.svg")
	code, stdout, stderr := runCmd(t, "bench", "--mine-from", benchTrace, "--allow-overlap",
		"--policy", benchPolicy, "--tool-latency", "lognormal:600ms:1500ms", "--time-scale", "0.01",
		"--json", "--plot", plot, benchTrace)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rep struct {
		Lossless   bool                       `json:"lossless"`
		Mismatches int                        `json:"mismatches"`
		Modes      map[string]json.RawMessage `json:"modes"`
		Config     struct {
			Sessions     int `json:"sessions"`
			MineSessions int `json:"mine_sessions"`
		} `json:"config"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, stdout)
	}
	if !rep.Lossless || rep.Mismatches != 0 || len(rep.Modes) != 7 || rep.Config.Sessions != 6 || rep.Config.MineSessions != 6 {
		t.Errorf("report: lossless %v, %d mismatches, %d modes, config %+v", rep.Lossless, rep.Mismatches, len(rep.Modes), rep.Config)
	}
	if !strings.Contains(stderr, "mined") {
		t.Errorf("stderr does not report the mining: %s", stderr)
	}
	svg, err := os.ReadFile(plot)
	if err != nil || !bytes.HasPrefix(svg, []byte("<svg ")) {
		t.Errorf("plot: %v, %.40q", err, svg)
	}
}

// TestBenchSplit replays the test part and mines the training part of the
// same file: no overlap, so no --allow-overlap needed.
func TestBenchSplit(t *testing.T) {
	code, stdout, stderr := runCmd(t, "bench", "--mine-from", benchTrace, "--holdout", "0.5", "--part", "test",
		"--policy", benchPolicy, "--modes", "serial,ahead,oracle", benchTrace)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"hidden stall ratio", "ahead", "oracle"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("no %q in the table:\n%s", want, stdout)
		}
	}
}

func TestBenchWithoutPatterns(t *testing.T) {
	code, stdout, stderr := runCmd(t, "bench", "--modes", "serial,aa", benchTrace)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	// Without a policy nothing is speculated: stderr and the report say so.
	if !strings.Contains(stderr, "ahead bench: no policy: nothing is speculated") || !strings.Contains(stdout, "warning: no policy") || !strings.Contains(stdout, "A/A noise") {
		t.Errorf("stderr %q, stdout:\n%s", stderr, stdout)
	}
	// Nor with a policy that allows nothing, also in the JSON report.
	denyAll := filepath.Join(t.TempDir(), "deny.yaml")
	os.WriteFile(denyAll, []byte("speculation_policy:\n  default: {allow: false}\n"), 0o644)
	code, stdout, stderr = runCmd(t, "bench", "--modes", "serial", "--policy", denyAll, "--json", benchTrace)
	if code != 0 || !strings.Contains(stderr, "the policy allows none of the") || !strings.Contains(stdout, `"warnings": [`) {
		t.Errorf("deny-all policy: exit %d, stderr %q, stdout:\n%s", code, stderr, stdout)
	}
	// Without patterns the default modes skip ahead.
	code, stdout, stderr = runCmd(t, "bench", "--policy", benchPolicy, benchTrace)
	if code != 0 || strings.Contains(stdout, "  ahead ") || !strings.Contains(stderr, "ahead mode is skipped") {
		t.Errorf("exit %d, stderr %q, stdout:\n%s", code, stderr, stdout)
	}
}

func TestBenchUsageErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"bench"}, "no trace files"},
		{[]string{"bench", "--tool-latency", "fast", benchTrace}, "--tool-latency"},
		{[]string{"bench", "--arrival", "poisson:-1", benchTrace}, "--arrival"},
		{[]string{"bench", "--modes", "serial,turbo", benchTrace}, "--modes"},
		{[]string{"bench", "--time-scale", "0", benchTrace}, "--time-scale"},
		{[]string{"bench", "--concurrency", "0", benchTrace}, "--concurrency"},
		{[]string{"bench", "--patterns", "p.json", "--mine-from", benchTrace, benchTrace}, "not both"},
		{[]string{"bench", "--mine-from", benchTrace, benchTrace}, "--allow-overlap"},
		{[]string{"bench", "--modes", "ahead", benchTrace}, "needs --patterns or --mine-from"},
	}
	for _, tt := range tests {
		code, _, stderr := runCmd(t, tt.args...)
		if code != 2 || !strings.Contains(stderr, tt.want) {
			t.Errorf("ahead %s: exit %d, stderr %q; want an error containing %q", strings.Join(tt.args, " "), code, stderr, tt.want)
		}
	}
	// A bad policy names the file.
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(bad, []byte("speculation_policy:\n  tools: [x]\n"), 0o644)
	if code, _, stderr := runCmd(t, "bench", "--policy", bad, benchTrace); code != 1 || !strings.Contains(stderr, "bad.yaml:2") {
		t.Errorf("bad policy: exit %d, stderr %q", code, stderr)
	}
}
