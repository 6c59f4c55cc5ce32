package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServeHearsTheConversation is the conversation end to end: ahead mine
// learns from traces with messages (a synthetic library desk, no real
// person's data) and writes the conversation model into the pool; ahead
// serve hears a user's message over HTTP, speculates the session's first
// call from what the user said (a member id it never saw), and the agent's
// call is then served by that speculation.
func TestServeHearsTheConversation(t *testing.T) {
	dir := t.TempDir()
	pool := filepath.Join(dir, "pool.json")
	var out strings.Builder
	if code := run(t.Context(), &env{stdout: &out, stderr: &out}, []string{"mine", "-o", pool, "testdata/library-conv.jsonl"}); code != 0 {
		t.Fatalf("ahead mine: exit %d\n%s", code, out.String())
	}
	raw, err := os.ReadFile(pool)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), `"conversation":`) {
		t.Fatal("the pool has no conversation model")
	}

	tools := newCountingTools(t, func(_ string, body []byte) string {
		var args map[string]string
		json.Unmarshal(body, &args)
		return fmt.Sprintf(`{"member_id": %q, "loans": []}`, args["member_id"])
	})
	count := tools.count
	cfg := filepath.Join(dir, "ahead.yaml")
	if err := os.WriteFile(cfg, []byte(`
patterns: {pool: ./pool.json, learn: false}
backends: {library: {http: {url: "`+tools.URL+`/tools/{tool}"}}}
speculation_policy:
  tools:
    lookup_member: {allow: true}
    get_loan: {allow: true}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startAheadServe(t, "--config", cfg, "--listen", "127.0.0.1:0")

	resp, err := http.Post(s.url+"/v1/sessions/desk-1/messages", "application/json",
		strings.NewReader(`{"role": "user", "content": "Hello, I am Wendy. I would like to renew a book loan. My member id is wendy_okafor_5150."}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("POST messages: %d, want 204", resp.StatusCode)
	}
	const want = `/tools/lookup_member{"member_id":"wendy_okafor_5150"}`
	waitFor(t, "the first call to be speculated from the message", func() bool { return count(want) == 1 })
	a := call(t, s.url, "desk-1", `{"tool": "lookup_member", "args": {"member_id": "wendy_okafor_5150"}}`)
	if a.Code != 200 || (a.Source != "reused" && a.Source != "promoted") {
		t.Errorf("the agent's first call: %d %s, want reused or promoted", a.Code, a.Source)
	}
	if n := count(want); n != 1 {
		t.Errorf("lookup_member ran %d times, want once", n)
	}
}
