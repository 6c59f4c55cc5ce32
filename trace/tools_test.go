package trace

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestToolsLines(t *testing.T) {
	in := `{"kind":"tools","session":"s","seq":0,"from":"mcp","tools":[{"name":"read_file","description":"Read a file.","input_schema":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}},{"name":"list"}],"ts":"2026-01-01T00:00:00Z"}
{"session":"s","seq":0,"step":1,"tool":"list","args":{},"status":"ok","output":"x"}
{"kind":"tools","session":"s","seq":1,"from":"openai","tools":[]}
`
	var evs []Event
	for ev, err := range NewReader(nil).Read("t.jsonl", strings.NewReader(in)) {
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	if len(evs) != 3 || evs[0].Kind != KindTools || evs[0].IsCall() || evs[0].IsMessage() || evs[0].From != FromMCP || !evs[1].IsCall() {
		t.Fatalf("read %+v", evs)
	}
	want := []ToolDef{
		{Name: "read_file", Description: "Read a file.", InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)},
		{Name: "list"},
	}
	if diff := cmp.Diff(want, evs[0].Tools); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}
	if evs[2].Tools == nil || len(evs[2].Tools) != 0 {
		t.Errorf("an empty declaration read as %#v, want an empty list", evs[2].Tools)
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
	sessions, err := Collect(NewReader(nil).Read("t.jsonl", strings.NewReader(in)))
	if err != nil {
		t.Fatal(err)
	}
	if n, m, d := len(sessions[0].Events), len(sessions[0].Messages), len(sessions[0].Tools); n != 1 || m != 0 || d != 2 || sessions[0].Tools[1].Seq != 1 {
		t.Errorf("Collect kept %d calls, %d messages and %d lines of tools, want 1, 0 and 2", n, m, d)
	}
	for _, tc := range []struct{ line, field string }{
		{`{"kind":"tools","session":"s","seq":0}`, "tools"},
		{`{"kind":"tools","session":"s","seq":0,"tools":{"name":"x"}}`, "tools"},
		{`{"kind":"tools","session":"s","seq":0,"tools":[{"description":"no name"}]}`, "tools"},
		{`{"kind":"tools","session":"s","seq":0,"tools":[{"name":"x","input_schema":[1]}]}`, "tools"},
	} {
		_, err := Collect(NewReader(nil).Read("t.jsonl", strings.NewReader(tc.line+"\n")))
		le, ok := errors.AsType[*LineError](err)
		if !ok || le.Field != tc.field || le.Line != 1 {
			t.Errorf("%s: err = %v, want a line error on field %s", tc.line, err, tc.field)
		}
	}
}

// TestToolsLineOnACallIsKept: a call line with a "tools" key (not a field
// of calls) keeps it in Extra, as every unknown key.
func TestToolsKeyOnACallIsKept(t *testing.T) {
	in := `{"session":"s","seq":0,"step":0,"tool":"t","args":null,"status":"ok","output":"","tools":[1],"from":"x"}` + "\n"
	for ev, err := range NewReader(nil).Read("t.jsonl", strings.NewReader(in)) {
		if err != nil {
			t.Fatal(err)
		}
		if string(ev.Extra["tools"]) != "[1]" || string(ev.Extra["from"]) != `"x"` || ev.Tools != nil {
			t.Errorf("read %+v, want tools and from in Extra", ev)
		}
	}
}

func TestBoundTools(t *testing.T) {
	long := strings.Repeat("é", MaxToolDescription) // 2 bytes each
	big := `{"type":"object","description":"` + strings.Repeat("x", MaxToolSchema) + `"}`
	var defs []ToolDef
	defs = append(defs,
		ToolDef{Name: "a", Description: long, InputSchema: json.RawMessage("{\n \"type\": \"object\"\n}")},
		ToolDef{Name: "a", Description: "second of the name"},
		ToolDef{Name: ""},
		ToolDef{Name: strings.Repeat("n", MaxToolName+1)},
		ToolDef{Name: "big", InputSchema: json.RawMessage(big)},
		ToolDef{Name: "list", InputSchema: json.RawMessage(`[1]`)},
	)
	for i := range MaxTools + 5 {
		defs = append(defs, ToolDef{Name: "t" + strings.Repeat("x", i%3) + string(rune('a'+i%26)) + string(rune('a'+i/26))})
	}
	got := BoundTools(defs)
	if len(got) != MaxTools {
		t.Fatalf("%d tools kept, want %d", len(got), MaxTools)
	}
	if d := got[0]; d.Name != "a" || len(d.Description) > MaxToolDescription || !strings.HasPrefix(long, d.Description) || string(d.InputSchema) != `{"type":"object"}` {
		t.Errorf("first tool bounded to %q (%d bytes), schema %s", d.Name, len(d.Description), d.InputSchema)
	}
	if got[1].Name != "big" || got[1].InputSchema != nil || got[2].Name != "list" || got[2].InputSchema != nil {
		t.Errorf("schemas too big or not objects kept: %+v %+v", got[1], got[2])
	}
	if string(defs[0].InputSchema) == `{"type":"object"}` {
		t.Error("BoundTools modified its input")
	}
	if ToolsDigest(got) == ToolsDigest(got[1:]) || ToolsDigest(got) != ToolsDigest(BoundTools(defs)) {
		t.Error("ToolsDigest does not tell declarations apart, or is not stable")
	}
}
