package server

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ahead-dev/ahead/config"
	"github.com/ahead-dev/ahead/engine"
	"github.com/ahead-dev/ahead/fleet"
	"github.com/ahead-dev/ahead/mcpproxy"
	"github.com/ahead-dev/ahead/policy"
	"github.com/ahead-dev/ahead/predict"
)

// TestFleetSharesMCPResults: a speculative result of an MCP upstream's tool
// marked shared, run on replica A, reaches an agent of replica B (ahead mcp,
// over its own MCP session) whole, as the upstream answered it: content,
// structured content and _meta, reused from the fleet's results bucket
// without running the tool again.
func TestFleetSharesMCPResults(t *testing.T) {
	hub, err := fleet.Join(t.Context(), &fleet.Options{Name: "mr", Replica: "hub", Logger: slog.New(slog.DiscardHandler),
		Embedded: &fleet.Embedded{Listen: "127.0.0.1:0", Dir: t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	defer hub.Close()
	var runs atomic.Int64
	srv := mcp.NewServer(&mcp.Implementation{Name: "lookup", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "lookup", InputSchema: map[string]any{"type": "object"}}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var a struct{ Q string }
		json.Unmarshal(req.Params.Arguments, &a)
		n := runs.Add(1)
		return &mcp.CallToolResult{
			Meta:              mcp.Meta{"run": n},
			Content:           []mcp.Content{&mcp.TextContent{Text: "found " + a.Q}, &mcp.ImageContent{Data: []byte{1, 2}, MIMEType: "image/png"}},
			StructuredContent: map[string]any{"q": a.Q, "hits": 3},
		}, nil
	})
	up := mcpproxy.Upstream{Name: "lk", Transport: func() (mcp.Transport, error) {
		ct, st := mcp.NewInMemoryTransports()
		ss, err := srv.Connect(context.Background(), st, nil)
		if err != nil {
			return nil, err
		}
		t.Cleanup(func() { ss.Close() })
		return ct, nil
	}}
	cfg := func() *config.Config {
		return &config.Config{
			Upstreams: []mcpproxy.Upstream{up},
			Policy:    &policy.Policy{Tools: map[string]policy.Tool{"lookup": {Allow: true, Shared: true}}},
			Fleet:     &config.Fleet{URL: hub.URL(), Name: "mr", FenceTimeout: 2 * time.Second},
		}
	}
	a, err := Open(t.Context(), cfg(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.fleet.Ready(t.Context()); err != nil {
		t.Fatal(err)
	}
	// A speculates the call for a session of its own.
	a.Engine().Offer("a-1", engine.NextCall, []predict.Prediction{{Tool: "lookup", Args: json.RawMessage(`{"q":"x"}`), P: 1}})
	waitShared(t, a.fleet)

	agentIn, serverOut := io.Pipe()
	serverIn, agentOut := io.Pipe()
	done := make(chan error, 1)
	go func() { // owned: joined below
		err := ServeMCP(t.Context(), cfg(), serverIn, serverOut, nil)
		serverOut.Close()
		done <- err
	}()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, &mcp.ClientOptions{Logger: slog.New(slog.DiscardHandler)}).
		Connect(t.Context(), &mcp.IOTransport{Reader: agentIn, Writer: agentOut}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "lookup", Arguments: map[string]any{"q": "x"}})
	cs.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if src := res.Meta["ahead"].(map[string]any)["source"]; src != "reused" {
		t.Errorf("B's call was %v, want reused from A's shared result", src)
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("the upstream ran lookup %d times, want once (A's speculation)", n)
	}
	got, _ := json.Marshal(res)
	var body map[string]any
	json.Unmarshal(got, &body)
	delete(body["_meta"].(map[string]any), "ahead")
	want := map[string]any{
		"_meta":             map[string]any{"run": 1.0, "io.modelcontextprotocol/serverInfo": map[string]any{"name": "lookup", "version": "1"}},
		"resultType":        "complete",
		"content":           []any{map[string]any{"type": "text", "text": "found x"}, map[string]any{"type": "image", "data": "AQI=", "mimeType": "image/png"}},
		"structuredContent": map[string]any{"q": "x", "hits": 3.0},
	}
	if diff := cmp.Diff(want, body); diff != "" {
		t.Errorf("B's agent received another result than the upstream's (-want +got):\n%s", diff)
	}
}

// waitShared waits until f has put a result in the fleet's bucket (the
// put is sent in the background: no other signal).
func waitShared(t *testing.T, f *fleet.Fleet) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for f.Stats().SharedPuts == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no result shared: %+v", f.Stats())
		}
		time.Sleep(time.Millisecond)
	}
}
