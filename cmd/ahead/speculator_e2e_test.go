package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestServeSpeculator is the fast-model speculator end to end through
// ahead serve: a user message arrives over HTTP, the think window opens,
// ahead asks a scripted OpenAI-compatible model for its guesses; it
// guesses a safe read and an unsafe delete. The read runs and serves the
// agent's call; the delete never runs until the agent calls it.
func TestServeSpeculator(t *testing.T) {
	tools := newCountingTools(t, func(path string, _ []byte) string { return fmt.Sprintf(`{"done": %q}`, path) })
	count := tools.count
	var mu sync.Mutex // protects asked
	var asked []string
	model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		asked = append(asked, r.URL.Path+" "+string(body))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"x","object":"chat.completion","created":1,"model":"small","choices":[{"index":0,"finish_reason":"tool_calls",
"message":{"role":"assistant","content":null,"tool_calls":[
 {"id":"a","type":"function","function":{"name":"lookup","arguments":"{\"id\": \"7\"}"}},
 {"id":"b","type":"function","function":{"name":"delete","arguments":"{\"id\": \"7\"}"}}]}}],
"usage":{"prompt_tokens":50,"completion_tokens":10,"total_tokens":60}}`)
	}))
	defer model.Close()

	dir := t.TempDir()
	cfg := filepath.Join(dir, "ahead.yaml")
	if err := os.WriteFile(cfg, []byte(`
speculator: {base_url: "`+model.URL+`/v1", model: small}
backends: {svc: {http: {url: "`+tools.URL+`/tools/{tool}"}, tools: [lookup, delete]}}
speculation_policy:
  tools:
    lookup: {allow: true, reads: id}
    delete: {writes: id}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startAheadServe(t, "--config", cfg, "--listen", "127.0.0.1:0")
	if !strings.Contains(s.logText(), "are sent to "+model.URL+"/v1") {
		t.Errorf("the start-up log does not say where conversation text goes:\n%s", s.logText())
	}
	resp, err := http.Post(s.url+"/v1/sessions/u1/messages", "application/json", strings.NewReader(`{"role": "user", "content": "please look up item 7 and then delete it"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	const read = `/tools/lookup{"id":"7"}`
	waitFor(t, "the speculator's guessed read to run", func() bool { return count(read) == 1 })
	mu.Lock()
	if len(asked) != 1 || !strings.HasPrefix(asked[0], "/v1/chat/completions ") || !strings.Contains(asked[0], "item 7") {
		t.Errorf("the model was asked %q, want one chat completion with the user's words", asked)
	}
	mu.Unlock()
	if n := count(`/tools/delete{"id":"7"}`); n != 0 {
		t.Fatalf("the unsafe guess ran %d times", n)
	}
	a := call(t, s.url, "u1", `{"tool": "lookup", "args": {"id": "7"}}`)
	if a.Code != 200 || (a.Source != "reused" && a.Source != "promoted") {
		t.Errorf("the agent's read: %d %s, want reused or promoted", a.Code, a.Source)
	}
	var st struct {
		Origins map[string]struct{ Started, Reused, Promoted int64 } `json:"origins"`
	}
	if err := json.Unmarshal([]byte(getText(t, s.url+"/v1/stats")), &st); err != nil {
		t.Fatal(err)
	}
	if o := st.Origins["speculator"]; o.Started != 1 || o.Reused+o.Promoted != 1 {
		t.Errorf("/v1/stats origins %+v, want the speculator's one read started and claimed", st.Origins)
	}
	if count(read) != 1 {
		t.Errorf("lookup ran %d times, want once", count(read))
	}
}
