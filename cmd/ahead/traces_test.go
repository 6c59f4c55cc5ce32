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
	ss := runImport(t, "anthropic", in, out, "1 file: 1 session, 1 call, 4 messages")
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
	if code, out, _ := runCLI(t, "traces", "--help"); code != 0 || !strings.Contains(out, "--from anthropic") || !strings.Contains(out, "-skip-bad") {
		t.Errorf("traces --help: exit %d, want 0 and the help with the flags\n%s", code, out)
	}
}

// TestTracesImportWrongFormat is issue 27's silent wrong import: a file
// read in the wrong format has no calls; the import fails, naming the
// format it read and the one the file looks like, and writes nothing.
func TestTracesImportWrongFormat(t *testing.T) {
	dir := t.TempDir()
	anthropic := filepath.Join(dir, "claude.json")
	os.WriteFile(anthropic, []byte(`[{"role":"user","content":"Where is order #W7?"},
 {"role":"assistant","content":[{"type":"tool_use","id":"tu1","name":"get_order","input":{"order_id":"#W7"}}]},
 {"role":"user","content":[{"type":"tool_result","tool_use_id":"tu1","content":"shipped"}]}]`), 0o644)
	openai := filepath.Join(dir, "gpt.json")
	os.WriteFile(openai, []byte(`[{"role":"user","content":"Where is order #W7?"},
 {"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"get_order","arguments":"{\"order_id\":\"#W7\"}"}}]},
 {"role":"tool","tool_call_id":"c1","content":"shipped"}]`), 0o644)
	responses := filepath.Join(dir, "resp.json")
	os.WriteFile(responses, []byte(`[{"type":"message","role":"user","content":[{"type":"input_text","text":"Where is order #W7?"}]},
 {"type":"function_call","call_id":"c1","name":"get_order","arguments":"{\"order_id\":\"#W7\"}"},
 {"type":"function_call_output","call_id":"c1","output":"shipped"}]`), 0o644)
	for _, tc := range []struct{ from, in, looks string }{
		{"openai", anthropic, "anthropic"},
		{"responses", anthropic, "anthropic"},
		{"anthropic", openai, "openai"},
		{"anthropic", responses, "responses"},
	} {
		out := filepath.Join(dir, "out.jsonl")
		code, _, errOut := runCLI(t, "traces", "import", "--from", tc.from, "-o", out, tc.in)
		if code != 1 || !strings.Contains(errOut, "--from "+tc.from) || !strings.Contains(errOut, "looks like "+tc.looks) || !strings.Contains(errOut, "--from "+tc.looks) {
			t.Errorf("--from %s on a %s file: exit %d, stderr %q; want 1, naming both formats", tc.from, tc.looks, code, errOut)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("--from %s on a %s file wrote %s", tc.from, tc.looks, out)
		}
	}
	// The right format still reads.
	runImport(t, "openai", openai, filepath.Join(dir, "ok.jsonl"), "1 call")
	runImport(t, "openai", responses, filepath.Join(dir, "ok2.jsonl"), "1 call")

	// A file with no calls in any format: still an error, nothing to mine.
	chat := filepath.Join(dir, "chat.json")
	os.WriteFile(chat, []byte(`[{"role":"user","content":"hi"},{"role":"assistant","content":"hello"}]`), 0o644)
	if code, _, errOut := runCLI(t, "traces", "import", "--from", "openai", "-o", filepath.Join(dir, "none.jsonl"), chat); code != 1 || !strings.Contains(errOut, "no tool calls found in 1 file read as --from openai") {
		t.Errorf("a file without calls: exit %d, stderr %q", code, errOut)
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
