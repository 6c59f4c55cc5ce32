package trace

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func gz(t *testing.T, s string) string {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write([]byte(s))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func readAll(t *testing.T, r *Reader, paths ...string) ([]Event, error) {
	t.Helper()
	var out []Event
	for ev, err := range r.Events(paths...) {
		if err != nil {
			return out, err
		}
		out = append(out, ev)
	}
	return out, nil
}

const (
	line0 = `{"session":"s","seq":0,"step":1,"tool":"get","args":{"id":1},"status":"ok","output":"{\"a\": [1, 2]}","llm_ms":12.5,"extra":{"ignored":true}}`
	line1 = `{"session":"s","seq":1,"step":2,"tool":"put","args":null,"status":"error","output":null}`
)

func TestReadEvents(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "a.jsonl", line0+"\n\n"+line1+"\n")
	got, err := readAll(t, NewReader(nil), p)
	if err != nil {
		t.Fatal(err)
	}
	llm := 12.5
	want := []Event{
		{Session: "s", Seq: 0, Step: 1, Tool: "get", Args: json.RawMessage(`{"id":1}`), Status: StatusOK, Output: `{"a": [1, 2]}`, LLMMS: &llm,
			Extra: map[string]json.RawMessage{"extra": json.RawMessage(`{"ignored":true}`)}},
		{Session: "s", Seq: 1, Step: 2, Tool: "put", Status: StatusError},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestReadOutputNotAString(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "a.jsonl", `{"session":"s","seq":0,"tool":"t","status":"ok","output":{"x": 1}}`+"\n")
	got, err := readAll(t, NewReader(nil), p)
	if err != nil {
		t.Fatal(err)
	}
	if got[0].Output != `{"x": 1}` {
		t.Errorf("output = %q, want the JSON text kept", got[0].Output)
	}
}

func TestReadMalformed(t *testing.T) {
	tests := []struct {
		name, line, field string
	}{
		{"not json", `{"session":`, ""},
		{"no session", `{"seq":0,"tool":"t","status":"ok"}`, "session"},
		{"no seq", `{"session":"s","tool":"t","status":"ok"}`, "seq"},
		{"negative seq", `{"session":"s","seq":-1,"tool":"t","status":"ok"}`, "seq"},
		{"seq not int", `{"session":"s","seq":"x","tool":"t","status":"ok"}`, "seq"},
		{"no tool", `{"session":"s","seq":0,"status":"ok"}`, "tool"},
		{"bad status", `{"session":"s","seq":0,"tool":"t","status":"done"}`, "status"},
		{"no status", `{"session":"s","seq":0,"tool":"t"}`, "status"},
		{"args array", `{"session":"s","seq":0,"tool":"t","status":"ok","args":[1]}`, "args"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			p := writeFile(t, dir, "a.jsonl", line0+"\n"+tt.line+"\n"+line1+"\n")
			got, err := readAll(t, NewReader(nil), p)
			le, ok := errors.AsType[*LineError](err)
			if !ok {
				t.Fatalf("error = %v, want a *LineError", err)
			}
			if !errors.Is(err, ErrMalformed) {
				t.Errorf("error %v does not wrap ErrMalformed", err)
			}
			if le.File != p || le.Line != 2 || le.Field != tt.field {
				t.Errorf("error at %s:%d field %q, want %s:2 field %q", le.File, le.Line, le.Field, p, tt.field)
			}
			if !strings.HasPrefix(err.Error(), p+":2: ") {
				t.Errorf("message %q does not start with file:line", err)
			}
			if len(got) != 1 {
				t.Errorf("got %d events before the error, want 1", len(got))
			}

			r := NewReader(&ReadOptions{SkipBad: true})
			got, err = readAll(t, r, p)
			if err != nil {
				t.Fatalf("with SkipBad: %v", err)
			}
			if len(got) != 2 || r.Stats().Bad != 1 {
				t.Errorf("with SkipBad: %d events, %d bad; want 2 and 1", len(got), r.Stats().Bad)
			}
		})
	}
}

func TestReadTornLastLine(t *testing.T) {
	full := line0 + "\n" + line1 + "\n"
	torn := line0 + "\n" + line1[:30]
	tests := []struct {
		name    string
		content string
		events  int
		torn    int
	}{
		{"plain torn", torn, 1, 1},
		{"complete without newline", line0 + "\n" + line1, 2, 0},
		{"gzip torn line", gz(t, torn), 1, 1},
		{"gzip cut short", gz(t, full)[:len(gz(t, full))-12], 2, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			p := writeFile(t, dir, "a.jsonl.gz", tt.content)
			r := NewReader(nil)
			got, err := readAll(t, r, p)
			if err != nil {
				t.Fatalf("a torn last line must not be fatal: %v", err)
			}
			if len(got) != tt.events || r.Stats().Torn != tt.torn {
				t.Errorf("%d events, %d torn; want %d and %d", len(got), r.Stats().Torn, tt.events, tt.torn)
			}
		})
	}
}

func TestReadTornLineInTheMiddleIsAnError(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "a.jsonl", line0[:30]+"\n"+line1+"\n")
	if _, err := readAll(t, NewReader(nil), p); !errors.Is(err, ErrMalformed) {
		t.Errorf("error = %v, want ErrMalformed", err)
	}
}

func TestReadHugeLine(t *testing.T) {
	big := strings.Repeat("x", 3<<20)
	line := `{"session":"s","seq":0,"tool":"t","status":"ok","output":"` + big + `"}`
	dir := t.TempDir()
	p := writeFile(t, dir, "a.jsonl", line+"\n")
	got, err := readAll(t, NewReader(nil), p)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Output != big {
		t.Errorf("huge output not read whole")
	}
}

func TestFilesExpandsDirectories(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "b/2.jsonl", line0+"\n")
	writeFile(t, dir, "a.jsonl.gz", gz(t, line1+"\n"))
	writeFile(t, dir, "a.sessions.jsonl", `{"session":"s"}`+"\n")
	writeFile(t, dir, "notes.txt", "x")
	got, err := Files(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(dir, "a.jsonl.gz"), filepath.Join(dir, "b/2.jsonl")}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Files (-want +got):\n%s", diff)
	}
	evs, err := readAll(t, NewReader(nil), dir)
	if err != nil || len(evs) != 2 {
		t.Errorf("read %d events, err %v; want 2", len(evs), err)
	}
	if _, err := Files(filepath.Join(dir, "missing")); err == nil {
		t.Error("a missing path is not an error")
	}
}

func TestCollect(t *testing.T) {
	in := []Event{
		{Session: "b", Seq: 1}, {Session: "a", Seq: 2}, {Session: "b", Seq: 0}, {Session: "a", Seq: 0}, {Session: "a", Seq: 1},
	}
	got, err := Collect(stream(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []Session{
		{ID: "b", Events: []Event{{Session: "b", Seq: 0}, {Session: "b", Seq: 1}}},
		{ID: "a", Events: []Event{{Session: "a", Seq: 0}, {Session: "a", Seq: 1}, {Session: "a", Seq: 2}}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Collect (-want +got):\n%s", diff)
	}
}

// FuzzRead checks that no input crashes the reader, that every event it
// accepts is valid, and that writing the events back reads the same: once
// written, a trace is a fixed point of reading and writing, unknown fields
// and kinds included.
func FuzzRead(f *testing.F) {
	f.Add([]byte(line0 + "\n" + line1 + "\n"))
	f.Add([]byte(line0 + "\n" + line1[:20]))
	f.Add([]byte(`{"session":"s","seq":0,"tool":"t","status":"ok","args":{"a":"\u00e9"},"output":{"k":[1,2]}}`))
	f.Add([]byte("\n\n{}\n"))
	f.Add([]byte(gzHeaderless()))
	f.Add([]byte(`{"session":"s","kind":"message","role":"user","content":"hi","seq":0,"note":1,"tool":"x"}` + "\n" + `{"session":"s","kind":"k","seq":0,"a":[1]}`))
	f.Add([]byte(`{"session":"s","seq":0,"tool":"t","status":"ok","x":{"y":"<&>"},"Role":"r","SEQ":1}`))
	f.Add([]byte(`{"kind":"tools","session":"s","seq":0,"from":"mcp","tools":[{"name":"r","description":"<d>","input_schema":{"type":"object"}}],"x":1}` + "\n" + `{"kind":"tools","session":"s","seq":1,"tools":null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := NewReader(&ReadOptions{SkipBad: true})
		var evs []Event
		for ev, err := range r.Read("fuzz", bytes.NewReader(data)) {
			if err != nil {
				return // an I/O-level error (e.g. a corrupt gzip header) is fine
			}
			valid := ev.Session != "" && ev.Seq >= 0
			switch {
			case ev.IsCall():
				valid = valid && ev.Tool != "" && (ev.Status == StatusOK || ev.Status == StatusError)
			case ev.IsMessage():
				valid = valid && (ev.Role == RoleSystem || ev.Role == RoleUser || ev.Role == RoleAssistant)
			case ev.Kind == KindTools:
				valid = valid && ev.Tools != nil && !slices.ContainsFunc(ev.Tools, func(d ToolDef) bool { return d.Name == "" })
			}
			if !valid {
				t.Fatalf("invalid event accepted: %+v", ev)
			}
			evs = append(evs, ev)
		}
		once := encodeAll(t, evs)
		again := roundTrip(t, evs)
		if len(again) != len(evs) {
			t.Fatalf("round trip: %d events, want %d", len(again), len(evs))
		}
		for i := range evs {
			a, b := evs[i], again[i]
			if a.Kind != b.Kind || a.Session != b.Session || a.Seq != b.Seq || a.Tool != b.Tool || a.Output != b.Output || a.Status != b.Status ||
				a.Role != b.Role || a.Content != b.Content || len(a.Extra) != len(b.Extra) || len(a.Tools) != len(b.Tools) || a.From != b.From {
				t.Fatalf("round trip changed event %d: %+v → %+v", i, a, b)
			}
		}
		if twice := encodeAll(t, again); twice != once {
			t.Fatalf("writing what was written and read changed it:\n%s\n%s", once, twice)
		}
	})
}

func encodeAll(t *testing.T, evs []Event) string {
	t.Helper()
	var buf bytes.Buffer
	for _, ev := range evs {
		if err := EncodeLine(&buf, ev); err != nil {
			t.Fatalf("encoding %+v: %v", ev, err)
		}
	}
	return buf.String()
}

// stream yields evs without error.
func stream(evs []Event) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		for _, ev := range evs {
			if !yield(ev, nil) {
				return
			}
		}
	}
}

// roundTrip writes evs with EncodeLine and reads them back.
func roundTrip(t *testing.T, evs []Event) []Event {
	t.Helper()
	var again []Event
	for ev, err := range NewReader(nil).Read("again", strings.NewReader(encodeAll(t, evs))) {
		if err != nil {
			t.Fatalf("reading back: %v", err)
		}
		again = append(again, ev)
	}
	return again
}

func gzHeaderless() string { return "\x1f\x8bnot really gzip" }

func TestMessageLines(t *testing.T) {
	in := `{"session":"s","kind":"message","role":"system","content":"be kind","seq":0}
{"session":"s","kind":"message","role":"user","content":"my id is u_1","seq":0,"ts":"2026-01-01T00:00:00Z"}
{"session":"s","seq":0,"step":1,"tool":"get","args":{"id":"u_1"},"status":"ok","output":"x"}
{"session":"s","kind":"message","role":"assistant","content":"found you","seq":1,"step":1}
{"session":"s","kind":"stream_call","seq":1,"tool":"put"}
`
	sessions, err := Collect(NewReader(nil).Read("conv.jsonl", strings.NewReader(in)))
	if err != nil {
		t.Fatal(err)
	}
	if len(sessions) != 1 || len(sessions[0].Events) != 1 || len(sessions[0].Messages) != 3 {
		t.Fatalf("got %+v, want 1 session with 1 call and 3 messages", sessions)
	}
	m := sessions[0].Messages
	if m[0].Role != RoleSystem || m[1].Content != "my id is u_1" || m[2].Step != 1 || m[2].Seq != 1 {
		t.Errorf("messages = %+v", m)
	}
	var buf bytes.Buffer
	for _, ev := range m {
		if err := EncodeLine(&buf, ev); err != nil {
			t.Fatal(err)
		}
	}
	want := `{"kind":"message","session":"s","seq":0,"role":"system","content":"be kind"}
{"kind":"message","session":"s","seq":0,"role":"user","content":"my id is u_1","ts":"2026-01-01T00:00:00Z"}
{"kind":"message","session":"s","seq":1,"step":1,"role":"assistant","content":"found you"}
`
	if buf.String() != want {
		t.Errorf("encoded:\n%s\nwant:\n%s", buf.String(), want)
	}
}

func TestMessageLineErrors(t *testing.T) {
	for _, tc := range []struct{ line, field string }{
		{`{"session":"s","kind":"message","seq":0,"content":"x"}`, "role"},
		{`{"session":"s","kind":"message","seq":0,"role":"tool","content":"x"}`, "role"},
		{`{"session":"s","kind":"message","seq":0,"role":"user"}`, "content"},
		{`{"session":"s","kind":"message","role":"user","content":"x"}`, "seq"},
	} {
		_, err := Collect(NewReader(nil).Read("m.jsonl", strings.NewReader(tc.line+"\n")))
		le, ok := errors.AsType[*LineError](err)
		if !ok || le.Field != tc.field || le.Line != 1 {
			t.Errorf("%s: err = %v, want a line error on field %s", tc.line, err, tc.field)
		}
	}
}

// TestSpeculativeLinesAreNotCalls checks that ahead's records of its own
// speculative executions never reach mining as agent calls, with or
// without a kind (recordings made before kinds existed).
func TestSpeculativeLinesAreNotCalls(t *testing.T) {
	in := `{"session":"s","seq":0,"tool":"a","args":{},"status":"ok","output":"x"}
{"kind":"speculative","session":"s","seq":1,"tool":"b","args":{},"status":"ok","output":"y","speculative":true,"outcome":"wasted","origin":"pattern"}
{"session":"s","seq":1,"tool":"c","args":{},"status":"ok","output":"z","speculative":true,"outcome":"reused"}
{"session":"s","seq":1,"tool":"b","args":{},"status":"ok","output":"y"}
`
	var kinds []string
	for ev, err := range NewReader(nil).Read("rec.jsonl", strings.NewReader(in)) {
		if err != nil {
			t.Fatal(err)
		}
		kinds = append(kinds, ev.Kind+":"+ev.Tool)
	}
	if got, want := strings.Join(kinds, " "), ":a speculative:b speculative:c :b"; got != want {
		t.Errorf("kinds %s, want %s", got, want)
	}
	sessions, err := Collect(NewReader(nil).Read("rec.jsonl", strings.NewReader(in)))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(sessions[0].Events); n != 2 {
		t.Errorf("Collect kept %d calls, want the agent's 2", n)
	}
}

// TestEmittedLines: a call the model emitted is a line of its own kind,
// read and written back as it was, never one of the session's calls.
func TestEmittedLines(t *testing.T) {
	in := `{"kind":"emitted","session":"s","seq":0,"step":1,"tool":"get","args":{"id":"u_1"},"call_id":"call_1","ts":"2026-01-01T00:00:00Z"}
{"session":"s","seq":0,"step":1,"tool":"get","args":{"id":"u_1"},"status":"ok","output":"x"}
{"kind":"emitted","session":"s","seq":1,"step":2,"tool":"put","args":{}}
`
	var evs []Event
	for ev, err := range NewReader(nil).Read("e.jsonl", strings.NewReader(in)) {
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	if len(evs) != 3 || evs[0].Kind != KindEmitted || evs[0].IsCall() || evs[0].CallID != "call_1" || string(evs[0].Args) != `{"id":"u_1"}` || !evs[1].IsCall() {
		t.Fatalf("read %+v", evs)
	}
	var buf bytes.Buffer
	for _, ev := range evs {
		if err := EncodeLine(&buf, ev); err != nil {
			t.Fatal(err)
		}
	}
	if buf.String() != in {
		t.Errorf("written back:\n%s\nwant:\n%s", buf.String(), in)
	}
	sessions, err := Collect(NewReader(nil).Read("e.jsonl", strings.NewReader(in)))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(sessions[0].Events); n != 1 {
		t.Errorf("Collect kept %d calls, want the agent's 1", n)
	}
	for _, tc := range []struct{ line, field string }{
		{`{"kind":"emitted","session":"s","seq":0,"args":{}}`, "tool"},
		{`{"kind":"emitted","session":"s","seq":0,"tool":"get","args":[1]}`, "args"},
		{`{"kind":"emitted","session":"s","seq":0,"tool":"get"}`, "args"},
	} {
		_, err := Collect(NewReader(nil).Read("e.jsonl", strings.NewReader(tc.line+"\n")))
		le, ok := errors.AsType[*LineError](err)
		if !ok || le.Field != tc.field {
			t.Errorf("%s: err = %v, want a line error on field %s", tc.line, err, tc.field)
		}
	}
}
