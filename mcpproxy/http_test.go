package mcpproxy

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ahead-dev/ahead/engine"
)

// TestHTTPBothSides: ahead over streamable HTTP in front of a streamable
// HTTP upstream. Each agent session gets its own upstream session (state
// stays apart), the predicted read is reused, and a session the agent ends
// is cleaned up: its upstream session closes.
func TestHTTPBothSides(t *testing.T) {
	ts := &testServer{}
	upstream := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server {
		// A new server (with fresh files) per upstream session.
		ts.mu.Lock()
		defer ts.mu.Unlock()
		st := &files{data: map[string]string{"a.txt": "alpha", "b.txt": "beta"}, reads: map[string]int{}}
		ts.state = append(ts.state, st)
		srv := ts.newServer(st)
		ts.servers = append(ts.servers, srv)
		return srv
	}, &mcp.StreamableHTTPOptions{Logger: slog.New(slog.DiscardHandler)}))
	t.Cleanup(upstream.Close)

	p, err := New(&Options{
		Upstreams:    []Upstream{{Name: "fs", URL: upstream.URL, Headers: map[string]string{"X-Test": "1"}, TrustAnnotations: true}},
		Logger:       slog.New(slog.DiscardHandler),
		Stderr:       io.Discard,
		ReapInterval: 10 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	tools, err := p.TrustedTools(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	eng := engine.New(&engine.Options{Backends: p.Backends(), Route: p.Route, Policy: AnnotationPolicy(nil, tools),
		Predictor: readAfterList, Logger: slog.New(slog.DiscardHandler)})
	p.Attach(eng)
	front := httptest.NewServer(p.Handler())
	t.Cleanup(func() {
		front.Close()
		p.Close()
		eng.Close()
	})

	connect := func() *mcp.ClientSession {
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil).
			Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: front.URL}, &mcp.ClientSessionOptions{ProtocolVersion: agentProtocol})
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
	a, b := connect(), connect()
	call(t, a, "write", map[string]any{"name": "b.txt", "text": "only in a"})
	if res, _ := call(t, b, "read", map[string]any{"name": "b.txt"}); text(res) != "beta" {
		t.Errorf("b sees a's write: %q", text(res))
	}
	call(t, a, "list", map[string]any{})
	res, src := call(t, a, "read", map[string]any{"name": "a.txt"})
	if text(res) != "alpha" || (src != "reused" && src != "promoted") {
		t.Errorf("predicted read over HTTP = %q (%s), want alpha, reused or promoted", text(res), src)
	}

	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		p.mu.Lock()
		n := len(p.sessions)
		p.mu.Unlock()
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d proxy sessions after the agent left, want 1", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if res, _ := call(t, b, "read", map[string]any{"name": "a.txt"}); text(res) != "alpha" {
		t.Errorf("the remaining session broke: %q", text(res))
	}
	b.Close()
}
