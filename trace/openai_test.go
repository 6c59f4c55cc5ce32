package trace

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

type brief struct {
	Session, Tool, Args, Output, CallID string
	Seq, Step                           int
	Status                              Status
}

// briefs are the calls of evs; the golden tests check messages.
func briefs(evs []Event) []brief {
	var out []brief
	for _, ev := range evs {
		if !ev.IsCall() {
			continue
		}
		out = append(out, brief{ev.Session, ev.Tool, string(ev.Args), ev.Output, ev.CallID, ev.Seq, ev.Step, ev.Status})
	}
	return out
}

func TestImportOpenAI(t *testing.T) {
	tests := []struct {
		name  string
		data  string
		want  []brief
		stats ImportStats
	}{
		{
			name: "array of messages, paired by id, parallel calls",
			data: `[
 {"role":"system","content":"be useful"},
 {"role":"user","content":"hi"},
 {"role":"assistant","content":null,"tool_calls":[
   {"id":"c1","type":"function","function":{"name":"get_user","arguments":"{\"id\": 7}"}},
   {"id":"c2","type":"function","function":{"name":"get_order","arguments":"{}"}}]},
 {"role":"tool","tool_call_id":"c2","content":"order"},
 {"role":"tool","tool_call_id":"c1","content":[{"type":"text","text":"user"},{"type":"text","text":"7"}]},
 {"role":"assistant","tool_calls":[{"id":"c3","function":{"name":"cancel","arguments":"{\"x\":1}"}}]},
 {"role":"tool","tool_call_id":"c3","content":"Error: not allowed"}
]`,
			want: []brief{
				{"f", "get_user", `{"id":7}`, "user\n7", "c1", 0, 1, StatusOK},
				{"f", "get_order", `{}`, "order", "c2", 1, 1, StatusOK},
				{"f", "cancel", `{"x":1}`, "Error: not allowed", "c3", 2, 2, StatusError},
			},
			stats: ImportStats{Sessions: 1, Calls: 3, Messages: 2},
		},
		{
			name: "repeated ids pair by position",
			data: `{"role":"assistant","tool_calls":[{"id":"call_0","function":{"name":"a","arguments":"{}"}},{"id":"call_0","function":{"name":"b","arguments":"{}"}}]}
{"role":"tool","tool_call_id":"call_0","content":"ra"}
{"role":"tool","tool_call_id":"call_0","content":"rb"}
{"role":"assistant","tool_calls":[{"id":"call_0","function":{"name":"c","arguments":"{}"}}]}
{"role":"tool","tool_call_id":"call_0","content":"rc","is_error":true}
`,
			want: []brief{
				{"f", "a", `{}`, "ra", "call_0", 0, 1, StatusOK},
				{"f", "b", `{}`, "rb", "call_0", 1, 1, StatusOK},
				{"f", "c", `{}`, "rc", "call_0", 2, 2, StatusError},
			},
			stats: ImportStats{Sessions: 1, Calls: 3},
		},
		{
			name: "missing ids, unanswered call, orphan result",
			data: `[{"role":"assistant","tool_calls":[{"function":{"name":"a","arguments":{"k":"v"}}},{"function":{"name":"b","arguments":""}}]},
{"role":"tool","content":"ra"},
{"role":"tool","tool_call_id":"zz","content":"rb"},
{"role":"tool","content":"orphan"}]`,
			want: []brief{
				{"f", "a", `{"k":"v"}`, "ra", "", 0, 1, StatusOK},
				{"f", "b", ``, "rb", "", 1, 1, StatusOK},
			},
			stats: ImportStats{Sessions: 1, Calls: 2, Orphans: 1},
		},
		{
			name: "conversations per line with ids, legacy function calls",
			data: `{"id":"conv-1","messages":[{"role":"assistant","function_call":{"name":"f","arguments":"{\"a\":1}"}},{"role":"function","name":"f","content":"done"}]}
{"messages":[{"role":"assistant","tool_calls":[{"id":"x","function":{"name":"g","arguments":"{}"}}]}]}
{"messages":[{"role":"assistant","tool_calls":[{"id":"y","function":{"name":"h","arguments":"{}"}}]},{"role":"tool","tool_call_id":"y","content":"ok"}]}`,
			want: []brief{
				{"conv-1", "f", `{"a":1}`, "done", "", 0, 1, StatusOK},
				{"f/2", "h", `{}`, "ok", "y", 0, 1, StatusOK},
			},
			stats: ImportStats{Sessions: 2, Calls: 2, Unanswered: 1},
		},
		{
			name: "responses API items",
			data: `[{"type":"message","role":"user","content":"x"},
{"type":"function_call","call_id":"a","name":"s","arguments":"{\"q\":\"1\"}"},
{"type":"function_call","call_id":"b","name":"s","arguments":"{\"q\":\"2\"}"},
{"type":"function_call_output","call_id":"b","output":"two"},
{"type":"function_call_output","call_id":"a","output":"one"}]`,
			want: []brief{
				{"f", "s", `{"q":"1"}`, "one", "a", 0, 1, StatusOK},
				{"f", "s", `{"q":"2"}`, "two", "b", 1, 1, StatusOK},
			},
			stats: ImportStats{Sessions: 1, Calls: 2, Messages: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stats ImportStats
			evs, err := ImportOpenAI("f", []byte(tt.data), nil, &stats)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, briefs(evs)); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if stats != tt.stats {
				t.Errorf("stats = %+v, want %+v", stats, tt.stats)
			}
		})
	}
}

func TestImportOpenAIErrors(t *testing.T) {
	tests := []struct {
		name, data string
		line       int
		field      string
	}{
		{"bad json", "{\"role\":\"user\"}\n{\"role\":", 2, ""},
		{"neither message nor conversation", `{"foo":1}`, 1, ""},
		{"bad arguments", "{\"role\":\"user\"}\n{\"role\":\"assistant\",\"tool_calls\":[{\"id\":\"1\",\"function\":{\"name\":\"a\",\"arguments\":\"[1]\"}}]}", 2, "messages[1].tool_calls[0].function"},
		{"no function name", `[{"role":"assistant","tool_calls":[{"id":"1","function":{"arguments":"{}"}}]}]`, 1, "messages[0].tool_calls[0].function"},
		{"messages not an array", `{"messages":{}}`, 1, "messages"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ImportOpenAI("f.jsonl", []byte(tt.data), nil, nil)
			le, ok := errors.AsType[*LineError](err)
			if !ok {
				t.Fatalf("error = %v, want a *LineError", err)
			}
			if le.File != "f.jsonl" || le.Line != tt.line || le.Field != tt.field {
				t.Errorf("error at %s:%d %q, want f.jsonl:%d %q (%v)", le.File, le.Line, le.Field, tt.line, tt.field, err)
			}
		})
	}
	// SkipBad drops the call and counts it.
	var stats ImportStats
	evs, err := ImportOpenAI("f", []byte(`[{"role":"assistant","tool_calls":[{"id":"1","function":{"name":"a","arguments":"nope"}}]},{"role":"tool","tool_call_id":"1","content":"x"}]`), &ImportOptions{SkipBad: true}, &stats)
	if err != nil || len(evs) != 0 || stats.Bad != 1 || stats.Orphans != 1 {
		t.Errorf("SkipBad: %d events, stats %+v, err %v", len(evs), stats, err)
	}
}

// FuzzImportOpenAI checks that no input crashes the importer and that
// what it produces is a valid trace.
func FuzzImportOpenAI(f *testing.F) {
	for _, name := range []string{"openai-chat.jsonl", "responses.json"} {
		if data, err := os.ReadFile(filepath.Join("testdata", "import", name)); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte(`[{"role":"assistant","tool_calls":[{"id":"1","function":{"name":"a","arguments":"{\"x\":1}"}}]},{"role":"tool","tool_call_id":"1","content":"r"}]`))
	f.Add([]byte(`{"messages":[{"role":"assistant","function_call":{"name":"f","arguments":"{}"}},{"role":"function","name":"f","content":[{"text":"a"},"b"]}]}`))
	f.Add([]byte(`{"type":"function_call","call_id":"a","name":"s","arguments":"{}"}` + "\n" + `{"type":"function_call_output","call_id":"a","output":"x"}`))
	f.Add([]byte(`[[{"role":"tool"}]]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		evs, err := ImportOpenAI("fuzz", data, &ImportOptions{SkipBad: true}, nil)
		if err != nil {
			return
		}
		checkImported(t, evs)
	})
}
