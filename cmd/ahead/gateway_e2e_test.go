package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestServeGatewayStreamTimeDispatch is the model side end to end through
// ahead serve: an agent streams a chat completion through ahead's gateway;
// the model's turn calls a safe read, then an unsafe write. The read starts
// while the model is still streaming (the upstream holds the rest of its
// stream until the read's backend has been asked), the agent's call is
// then served by it, the write runs only when the agent calls it, and the
// agent reads exactly the bytes the upstream sent.
func TestServeGatewayStreamTimeDispatch(t *testing.T) {
	readStarted := make(chan struct{})
	var once sync.Once
	tools := newCountingTools(t, func(path string, _ []byte) string {
		if path == "/tools/lookup" {
			once.Do(func() { close(readStarted) })
		}
		return fmt.Sprintf(`{"done": %q}`, path)
	})
	count := tools.count

	chunk := func(delta string) string {
		return `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":` + delta + `,"finish_reason":null}]}` + "\n\n"
	}
	head := chunk(`{"role":"assistant","tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"lookup","arguments":""}}]}`) +
		chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"id\": \"42\"}"}}]}`) +
		chunk(`{"tool_calls":[{"index":1,"id":"call_2","type":"function","function":{"name":"delete","arguments":"{\"id\":"}}]}`)
	tail := chunk(`{"tool_calls":[{"index":1,"function":{"arguments":" \"42\"}"}}]}`) +
		`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}` + "\n\n" +
		"data: [DONE]\n\n"
	var upstreamAuth string
	model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" {
			http.Error(w, "unexpected path "+r.URL.Path, http.StatusNotFound)
			return
		}
		upstreamAuth = r.Header.Get("Authorization")
		if r.Header.Get("Ahead-Session") != "" {
			http.Error(w, "Ahead-Session reached the upstream", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, head)
		w.(http.Flusher).Flush()
		select {
		case <-readStarted: // the read runs while the model still streams
		case <-time.After(10 * time.Second): // a guard for a broken test, not a timing
		}
		io.WriteString(w, tail)
	}))
	defer model.Close()

	dir := t.TempDir()
	cfg := filepath.Join(dir, "ahead.yaml")
	// The stream alone predicts here (patterns: none): the built-in
	// default would read the record again after the write, which is what
	// a fresh install does, not what this test is about.
	if err := os.WriteFile(cfg, []byte(`
llm: {openai: {base_url: "`+model.URL+`/v1"}}
patterns: none
backends: {svc: {http: {url: "`+tools.URL+`/tools/{tool}"}, tools: [lookup, delete]}}
speculation_policy:
  tools:
    lookup: {allow: true, reads: id}
    delete: {writes: id}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startAheadServe(t, "--config", cfg, "--listen", "127.0.0.1:0")

	req, _ := http.NewRequestWithContext(context.Background(), "POST", s.url+"/v1/chat/completions",
		strings.NewReader(`{"model":"m","stream":true,"messages":[{"role":"user","content":"delete record 42 after looking it up"}]}`))
	req.Header.Set("Authorization", "Bearer sk-agent")
	req.Header.Set("Ahead-Session", "agent-1")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-readStarted:
	default:
		t.Fatal("the stream ended before the read was speculated")
	}
	if !bytes.Equal(got, []byte(head+tail)) {
		t.Errorf("the agent read %q, want the upstream's bytes %q", got, head+tail)
	}
	if upstreamAuth != "Bearer sk-agent" {
		t.Errorf("upstream saw Authorization %q, want the agent's own", upstreamAuth)
	}
	if n := count(`/tools/delete{"id":"42"}`); n != 0 {
		t.Fatalf("the unsafe write ran %d times before the agent called it", n)
	}
	a := call(t, s.url, "agent-1", `{"tool": "lookup", "args": {"id": "42"}}`)
	if a.Code != 200 || (a.Source != "reused" && a.Source != "promoted") {
		t.Errorf("the agent's read: %d %s, want reused or promoted", a.Code, a.Source)
	}
	b := call(t, s.url, "agent-1", `{"tool": "delete", "args": {"id": "42"}}`)
	if b.Code != 200 || b.Source != "executed" {
		t.Errorf("the agent's write: %d %s, want executed", b.Code, b.Source)
	}
	if n, m := count(`/tools/lookup{"id":"42"}`), count(`/tools/delete{"id":"42"}`); n != 1 || m != 1 {
		t.Errorf("lookup ran %d times and delete %d, want once each", n, m)
	}
}
