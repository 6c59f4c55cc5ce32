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

// TestServeFreshInstall is issue 24 item 6: `ahead serve` with no pool
// configured predicts from the built-in default and learns as it goes.
// A tool seen called once (in the first session) is then called, in the
// next session, with the order id its user said in the HTTP API's
// messages: the call is served ahead. With the opt-out (patterns: none)
// nothing is speculated and the same call executes. Nothing is written
// to disk without a pool file.
func TestServeFreshInstall(t *testing.T) {
	for _, tc := range []struct {
		name, patterns string
		fresh          bool
	}{
		{"no pool", "", true},
		{"patterns none", "patterns: none\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tools := newCountingTools(t, func(_ string, body []byte) string {
				var args map[string]string
				json.Unmarshal(body, &args)
				return fmt.Sprintf(`{"order_id": %q, "status": "pending"}`, args["order_id"])
			})
			dir := t.TempDir()
			cfg := filepath.Join(dir, "ahead.yaml")
			if err := os.WriteFile(cfg, []byte(tc.patterns+`backends: {shop: {http: {url: "`+tools.URL+`/tools/{tool}"}}}
speculation_policy:
  tools:
    get_order: {allow: true}
`), 0o600); err != nil {
				t.Fatal(err)
			}
			s := startAheadServe(t, "--config", cfg, "--listen", "127.0.0.1:0")
			say := func(session, text string) {
				t.Helper()
				resp, err := http.Post(s.url+"/v1/sessions/"+session+"/messages", "application/json",
					strings.NewReader(`{"role": "user", "content": `+fmt.Sprintf("%q", text)+`}`))
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusNoContent {
					t.Fatalf("POST messages: %d, want 204", resp.StatusCode)
				}
			}

			// The first session: the tool is seen once.
			say("desk-1", "hello, please look up my order W1234567 thanks")
			if a := call(t, s.url, "desk-1", `{"tool": "get_order", "args": {"order_id": "W1234567"}}`); a.Code != 200 || a.Source != "executed" {
				t.Fatalf("the first session's call: %+v, want executed", a)
			}
			// The predictor sees a result after it is returned, in each
			// session's order but not across sessions: a call of the same
			// session waits for what the one before it predicted, so that
			// the tool has been seen before the second session speaks
			// (under load the second session's message was heard first).
			if a := call(t, s.url, "desk-1", `{"tool": "get_order", "args": {"order_id": "W1234567"}}`); a.Code != 200 {
				t.Fatalf("the first session's second call: %+v", a)
			}
			// The second: its user says another order id.
			say("desk-2", "hi, where is my order W7654321 please")
			const want = `/tools/get_order{"order_id":"W7654321"}`
			if tc.fresh {
				waitFor(t, "the call to be speculated from the message", func() bool { return tools.count(want) == 1 })
			}
			a := call(t, s.url, "desk-2", `{"tool": "get_order", "args": {"order_id": "W7654321"}}`)
			served := a.Source == "reused" || a.Source == "promoted"
			if a.Code != 200 || served != tc.fresh {
				t.Errorf("the second session's call: %d %s, want served ahead: %v", a.Code, a.Source, tc.fresh)
			}
			if n := tools.count(want); n != 1 {
				t.Errorf("get_order ran %d times, want once", n)
			}
			var st struct {
				Started int `json:"speculative_started"`
			}
			if err := json.Unmarshal([]byte(getText(t, s.url+"/v1/stats")), &st); err != nil {
				t.Fatal(err)
			}
			if (st.Started > 0) != tc.fresh {
				t.Errorf("%d speculative executions, want some: %v", st.Started, tc.fresh)
			}
			s.cancel()
			if code := <-s.code; code != 0 {
				t.Errorf("exit %d, want 0:\n%s", code, s.logText())
			}
			s.code <- 0 // for the cleanup
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			if len(entries) != 1 {
				t.Errorf("the folder holds %d files after the run, want only ahead.yaml: nothing is written without a pool", len(entries))
			}
		})
	}
}
