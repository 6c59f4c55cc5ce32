package gateway

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// heardNew runs a request body through a session's history and returns the
// new messages that would be heard.
func heardNew(h *histories, session string, a api, body string) []string {
	msgs, appendOnly, ok := requestMessages(a, []byte(body))
	if !ok {
		return []string{"unparsed"}
	}
	var out []string
	for _, i := range h.update(session, msgs, appendOnly) {
		if msgs[i].role != "" && msgs[i].text != "" {
			out = append(out, msgs[i].role+": "+msgs[i].text)
		}
	}
	return out
}

func TestHistoryHearsOnlyNewMessages(t *testing.T) {
	type turn struct {
		body string
		want []string
	}
	for _, tc := range []struct {
		name  string
		api   api
		turns []turn
	}{
		{"chat resends the history", apiChat, []turn{
			{`{"messages":[{"role":"system","content":"S"},{"role":"user","content":"U1"}]}`, []string{"system: S", "user: U1"}},
			{`{"messages":[{"role":"system","content":"S"},{"role":"user","content":"U1"}]}`, nil}, // a retry
			{`{"messages":[{"role":"system","content":"S"},{"role":"user","content":"U1"},` +
				`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"t","arguments":"{}"}}]},` +
				`{"role":"tool","tool_call_id":"c1","content":"result text"},{"role":"user","content":[{"type":"text","text":"U2"}]}]}`,
				[]string{"user: U2"}},
		}},
		{"an edited history starts over without repeating", apiChat, []turn{
			{`{"messages":[{"role":"system","content":"S"},{"role":"user","content":"U1"},{"role":"assistant","content":"A1"},{"role":"user","content":"U2"}]}`,
				[]string{"system: S", "user: U1", "assistant: A1", "user: U2"}},
			// The agent compacted U1 and A1 into a summary.
			{`{"messages":[{"role":"system","content":"S"},{"role":"user","content":"summary"},{"role":"user","content":"U2"},{"role":"user","content":"U3"}]}`,
				[]string{"user: summary", "user: U3"}},
			// A repeated text is heard as often as it is new.
			{`{"messages":[{"role":"system","content":"S"},{"role":"user","content":"summary"},{"role":"user","content":"U2"},{"role":"user","content":"U3"},{"role":"user","content":"U3"}]}`,
				[]string{"user: U3"}},
		}},
		{"anthropic cache markers move without changing digests", apiMessages, []turn{
			{`{"system":[{"type":"text","text":"S","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":[{"type":"text","text":"U1","cache_control":{"type":"ephemeral"}}]}]}`,
				[]string{"system: S", "user: U1"}},
			{`{"system":[{"type":"text","text":"S","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":[{"type":"text","text":"U1"}]},` +
				`{"role":"assistant","content":[{"type":"text","text":"A1"},{"type":"tool_use","id":"tu1","name":"t","input":{}}]},` +
				`{"role":"user","content":[{"type":"tool_result","tool_use_id":"tu1","content":"result text","cache_control":{"type":"ephemeral"}}]}]}`,
				[]string{"assistant: A1"}},
		}},
		{"responses with previous_response_id appends", apiResponses, []turn{
			{`{"instructions":"S","input":"U1"}`, []string{"system: S", "user: U1"}},
			{`{"instructions":"S","previous_response_id":"r1","input":[{"type":"function_call_output","call_id":"c1","output":"x"},{"role":"user","content":[{"type":"input_text","text":"U2"}]}]}`,
				[]string{"user: U2"}},
			{`{"instructions":"S2","previous_response_id":"r2","input":[{"role":"user","content":"U3"}]}`, []string{"system: S2", "user: U3"}},
		}},
		{"unparseable body", apiChat, []turn{{`{"messages":`, []string{"unparsed"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHistories(10)
			for i, tr := range tc.turns {
				if diff := cmp.Diff(tr.want, heardNew(h, "s", tc.api, tr.body)); diff != "" {
					t.Errorf("turn %d: heard (-want +got):\n%s", i, diff)
				}
			}
		})
	}
}

func TestHistoriesBounded(t *testing.T) {
	h := newHistories(2)
	body := `{"messages":[{"role":"user","content":"U"}]}`
	for _, s := range []string{"a", "b", "a", "c"} { // b is least recently heard when c comes
		heardNew(h, s, apiChat, body)
	}
	if got := heardNew(h, "a", apiChat, body); got != nil {
		t.Errorf("a was forgotten (heard %v again)", got)
	}
	if got := heardNew(h, "b", apiChat, body); len(got) != 1 {
		t.Errorf("b was kept beyond MaxSessions (heard %v)", got)
	}
}

func TestLinker(t *testing.T) {
	l := NewLinker(3)
	l.Remember("s1", "call_1", "read", []byte(`{"b":1,"a":2}`), time.Time{})
	l.Remember("s2", "call_2", "read", []byte(`{"a":3}`), time.Time{})
	if s, ok := l.Session("read", []byte(`{"a":2, "b":1}`)); !ok || s != "s1" {
		t.Errorf("Session = %q, %v; want s1 (same call key)", s, ok)
	}
	if _, ok := l.Session("read", []byte(`{"a":2.0,"b":1}`)); ok {
		t.Error("a different number spelling matched: keys are exact")
	}
	l.Remember("s2", "call_3", "read", []byte(`{"a":2,"b":1}`), time.Time{})
	if s, ok := l.Session("read", []byte(`{"a":2,"b":1}`)); ok {
		t.Errorf("Session = %q while two sessions emitted the call, want none", s)
	}
	if s, ok := l.SessionOfID("call_2"); !ok || s != "s2" {
		t.Errorf("SessionOfID = %q, %v; want s2", s, ok)
	}
	l.Remember("s3", "call_4", "list", nil, time.Time{}) // evicts call_1
	if s, ok := l.Session("read", []byte(`{"a":2,"b":1}`)); !ok || s != "s2" {
		t.Errorf("after eviction Session = %q, %v; want s2 alone", s, ok)
	}
	l.Forget("s2")
	if _, ok := l.SessionOfID("call_2"); ok {
		t.Error("a forgotten session still links")
	}
	if s, ok := l.Session("list", []byte(`{}`)); !ok || s != "s3" {
		t.Errorf("Session(list) = %q, %v; want s3", s, ok)
	}
}

// TestConversationByResults: a request without Ahead-Session continues the
// one session whose model emitted the calls whose results it returns, in
// each API's shape; results of two sessions' calls, or of none, start a new
// session.
func TestConversationByResults(t *testing.T) {
	l := NewLinker(0)
	l.Remember("llm-a", "c1", "t", []byte(`{}`), time.Time{})
	l.Remember("llm-a", "c2", "t", []byte(`{"n":2}`), time.Time{})
	l.Remember("llm-b", "c3", "t", []byte(`{"n":3}`), time.Time{})
	g := &Gateway{opts: Options{Linker: l}}
	for _, tc := range []struct {
		name string
		api  api
		body string
		want string // "" for a new session
	}{
		{"chat", apiChat, `{"messages":[{"role":"user","content":"U"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"t","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"r"}]}`, "llm-a"},
		{"responses", apiResponses, `{"previous_response_id":"resp_1","input":[{"type":"function_call_output","call_id":"c2","output":"r"}]}`, "llm-a"},
		{"anthropic", apiMessages, `{"messages":[{"role":"user","content":"U"},{"role":"assistant","content":[{"type":"tool_use","id":"c3","name":"t","input":{"n":3}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"c3","content":"r"}]}]}`, "llm-b"},
		{"results of two sessions", apiChat, `{"messages":[{"role":"tool","tool_call_id":"c1","content":"r"},{"role":"tool","tool_call_id":"c3","content":"r"}]}`, ""},
		{"a first request", apiChat, `{"messages":[{"role":"user","content":"U"}]}`, ""},
		{"unknown ids", apiMessages, `{"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"x9","content":"r"}]}]}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msgs, _, ok := requestMessages(tc.api, []byte(tc.body))
			if !ok {
				t.Fatal("unparsed")
			}
			got := g.conversation(msgs)
			if tc.want != "" && got != tc.want {
				t.Errorf("session %q, want %q", got, tc.want)
			}
			if tc.want == "" && (got == "llm-a" || got == "llm-b" || len(got) != len(autoPrefix)+24) {
				t.Errorf("session %q, want a new one", got)
			}
		})
	}
}
