package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ahead-dev/ahead/trace"
)

// TestTracesImportAnthropic imports an Anthropic request log and checks
// that the trace holds its calls and its conversation, in the order a
// live session would have made them known.
func TestTracesImportAnthropic(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "claude.jsonl")
	os.WriteFile(in, []byte(`{"id":"a1","system":"You are a support agent.","messages":[
 {"role":"user","content":"Where is order #W7?"},
 {"role":"assistant","content":[{"type":"text","text":"Looking it up."},{"type":"tool_use","id":"tu1","name":"get_order","input":{"order_id":"#W7"}}]},
 {"role":"user","content":[{"type":"tool_result","tool_use_id":"tu1","content":[{"type":"text","text":"{\"status\": \"shipped\"}"}]}]},
 {"role":"assistant","content":"It has shipped."}]}`), 0o644)
	out := filepath.Join(dir, "out.jsonl")
	ss := runImport(t, "anthropic", in, out, "1 sessions, 1 calls, 4 messages")
	if len(ss) != 1 || ss[0].ID != "a1" {
		t.Fatalf("sessions: %+v", ss)
	}
	var got []string
	for ev := range trace.Known(ss[0]) {
		if ev.IsMessage() {
			got = append(got, ev.Role+": "+ev.Content)
		} else {
			got = append(got, "call "+ev.Tool+string(ev.Args)+" → "+ev.Output)
		}
	}
	want := []string{
		"system: You are a support agent.",
		"user: Where is order #W7?",
		`call get_order{"order_id":"#W7"} → {"status": "shipped"}`,
		"assistant: Looking it up.",
		"assistant: It has shipped.",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("known order:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if code, out, _ := runCLI(t, "traces", "--help"); code != 0 || !strings.Contains(out, "--from anthropic") {
		t.Errorf("traces --help: exit %d\n%s", code, out)
	}
}

// runImport imports in (of format from) into out, checks that the summary
// mentions summary, and returns the sessions of out.
func runImport(t *testing.T, from, in, out, summary string) []trace.Session {
	t.Helper()
	code, stdout, errOut := runCLI(t, "traces", "import", "--from", from, "-o", out, in)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(stdout, summary) {
		t.Errorf("summary: %q, want it to mention %q", stdout, summary)
	}
	ss, err := trace.Collect(trace.NewReader(nil).Events(out))
	if err != nil {
		t.Fatal(err)
	}
	return ss
}
