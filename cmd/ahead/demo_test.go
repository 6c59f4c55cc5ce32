package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"testing/synctest"
)

// TestDemo runs the demo as users do, in a synctest bubble: the engine and
// the agents run on a fake clock, so the demo's replay takes no real time
// and its timing is exact.
//
// The plot is written only where --plot says, and nothing is left in the
// temporary folder (issue 27); a legend explains the modes and columns.
func TestDemo(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	plot := filepath.Join(t.TempDir(), "demo.svg")
	var stdout, stderr bytes.Buffer
	synctest.Test(t, func(t *testing.T) {
		e := &env{stdout: &stdout, stderr: &stderr}
		if code := run(t.Context(), e, []string{"demo", "--plot", plot}); code != 0 {
			t.Fatalf("ahead demo exited %d: %s", code, stderr.String())
		}
	})
	out := stdout.String()
	t.Log("\n" + out)
	for _, want := range []string{"serial", "ahead", "oracle", "orion", "specfaas", "all_wrong", "aa", "hidden stall ratio", "lossless            yes",
		"\nmodes\n", "  orion      baseline after ORION", "  aa         serial run again", "\ncolumns\n", "  tool              total tool time spent"} {
		if !strings.Contains(out, want) {
			t.Errorf("the demo's output has no %q", want)
		}
	}
	verdict := regexp.MustCompile(`(?m)^tool stall hidden: (\d+)% of what an oracle hides; sessions (\d+)% faster; lossless \(0 mismatches\)$`)
	m := verdict.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no verdict line in the demo's output")
	}
	if m[1] == "0" || m[2] == "0" {
		t.Errorf("the demo hid nothing: %s", m[0])
	}
	if !strings.Contains(out, "plot: "+plot+"\n") {
		t.Error("no plot path in the demo's output")
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("the demo left %d files in the temporary folder", len(left))
	}
	svg, err := os.ReadFile(plot)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(svg, []byte("<svg ")) || !bytes.HasSuffix(svg, []byte("</svg>\n")) {
		t.Errorf("the plot is not an SVG document")
	}
}

func TestDemoArgs(t *testing.T) {
	var stdout, stderr bytes.Buffer
	e := &env{stdout: &stdout, stderr: &stderr}
	if code := run(t.Context(), e, []string{"demo", "extra"}); code != 2 {
		t.Errorf("ahead demo extra exited %d, want 2", code)
	}
	if code := run(t.Context(), e, []string{"demo", "--help"}); code != 0 || !strings.Contains(stdout.String(), "Usage: ahead demo") {
		t.Errorf("ahead demo --help exited %d: %s", code, stdout.String())
	}
}
