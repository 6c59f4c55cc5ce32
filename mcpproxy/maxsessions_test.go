package mcpproxy

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestMaxSessions: over MaxSessions, a new run takes the place of the
// least recently used idle one (whose upstream state is gone when it comes
// back); a held run, and an older client's protocol session, never give
// way, and when no session can, the new run is refused with an error that
// names the bound.
func TestMaxSessions(t *testing.T) {
	r := newRig(t, rigOptions{maxSessions: 2})
	front := httptest.NewServer(r.proxy.Handler())
	t.Cleanup(front.Close)
	run := func(name string) *mcp.ClientSession {
		return newEraClient(t, front.URL, newEraVersion, http.Header{SessionHeader: {name}})
	}
	// refused: a run over the bound cannot even discover the server.
	refused := func(name string) error {
		hc := &http.Client{Transport: headerTransport{base: http.DefaultTransport, headers: map[string]string{SessionHeader: name}}}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "2"}, nil).
			Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: front.URL, HTTPClient: hc}, &mcp.ClientSessionOptions{ProtocolVersion: newEraVersion})
		if err == nil {
			cs.Close()
		}
		return err
	}
	held := func() []string {
		r.proxy.mu.Lock()
		defer r.proxy.mu.Unlock()
		var ids []string
		for id := range r.proxy.byID {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		return ids
	}

	// Each step a second apart: a tie in use would let either run give
	// way (the map's order), as 1 run in 4 under -race found.
	r1 := run("r1")
	r.clock.Add(time.Second)
	r2 := run("r2")
	r.clock.Add(time.Second)
	r3 := run("r3") // r1 gives way
	r.clock.Add(time.Second)
	call(t, r1, "write", map[string]any{"name": "c.txt", "text": "r1's"}) // r2 gives way
	r.clock.Add(time.Second)
	call(t, r2, "list", map[string]any{}) // r3 gives way
	r.clock.Add(time.Second)
	if got := held(); !slices.Equal(got, []string{"r1", "r2"}) {
		t.Fatalf("sessions %q, want [r1 r2]", got)
	}
	call(t, r3, "list", map[string]any{}) // r1 is the least recently used
	if got := held(); !slices.Equal(got, []string{"r2", "r3"}) {
		t.Fatalf("after a third run: sessions %q, want [r2 r3]", got)
	}
	r.clock.Add(time.Second)
	// r1 comes back in a fresh upstream session (r2, the least recently
	// used now, gives way): its write is gone with its old one.
	if res, _ := call(t, r1, "read", map[string]any{"name": "c.txt"}); !res.IsError {
		t.Errorf("r1 after its eviction reads %q, want an error (a fresh upstream state)", text(res))
	}
	if got := held(); !slices.Equal(got, []string{"r1", "r3"}) {
		t.Fatalf("after r1 came back: sessions %q, want [r1 r3]", got)
	}

	// Held runs (a request or call being served) never give way.
	_, rel1, err := r.proxy.holdSession("r1")
	if err != nil {
		t.Fatal(err)
	}
	_, rel3, err := r.proxy.holdSession("r3")
	if err != nil {
		t.Fatal(err)
	}
	if err := refused("r4"); err == nil || !strings.Contains(err.Error(), "max_mcp_sessions") {
		t.Errorf("a run over the bound while every run is held: %v, want an error naming max_mcp_sessions", err)
	}
	rel1()
	rel3()
	if res, _ := call(t, run("r5"), "list", map[string]any{}); res.IsError {
		t.Errorf("a run once one is idle again: %q", text(res))
	}

	// An older client's session never gives way: two of them fill the
	// bound, and a run is refused.
	r.clock.Add(time.Second)
	old1, old2 := newEraClient(t, front.URL, agentProtocol, nil), newEraClient(t, front.URL, agentProtocol, nil)
	call(t, old1, "list", map[string]any{})
	call(t, old2, "list", map[string]any{})
	if err := refused("r6"); err == nil || !strings.Contains(err.Error(), "max_mcp_sessions") {
		t.Errorf("a run while older clients hold every session: %v, want an error naming max_mcp_sessions", err)
	}
	if res, _ := call(t, old1, "read", map[string]any{"name": "a.txt"}); text(res) != "alpha" {
		t.Errorf("an older client at the bound reads %q, want alpha", text(res))
	}
}
