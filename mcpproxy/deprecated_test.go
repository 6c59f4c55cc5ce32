package mcpproxy

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestDeprecatedOlderClientHTTP: what 2026-07-28 deprecates (roots,
// sampling, logging) still passes through ahead's /mcp for a 2025-11-25
// client, on the endpoint that serves 2026-07-28 runs too, with a real
// upstream over streamable HTTP that uses all three: it samples the agent's
// model, lists the agent's roots (and hears when they change), and logs at
// the level the agent set.
func TestDeprecatedOlderClientHTTP(t *testing.T) {
	rootsChanged := make(chan struct{}, 4)
	up := mcp.NewServer(&mcp.Implementation{Name: "old-upstream", Version: "1"}, &mcp.ServerOptions{
		Logger: slog.New(slog.DiscardHandler),
		RootsListChangedHandler: func(context.Context, *mcp.RootsListChangedRequest) {
			rootsChanged <- struct{}{}
		},
	})
	mcp.AddTool(up, &mcp.Tool{Name: "ask", Description: "samples, lists roots, logs"},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			msg, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 5,
				Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "hi"}}}})
			if err != nil {
				return nil, nil, fmt.Errorf("sampling: %w", err)
			}
			roots, err := req.Session.ListRoots(ctx, nil)
			if err != nil {
				return nil, nil, fmt.Errorf("roots: %w", err)
			}
			var rs []string
			for _, r := range roots.Roots {
				rs = append(rs, r.URI)
			}
			slices.Sort(rs)
			// Sent only at or above the level the agent set (info).
			req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "debug", Data: "not sent"})
			req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "warning", Data: fmt.Sprintf("%d roots", len(rs))})
			return nil, map[string]any{"sampled": msg.Content.(*mcp.TextContent).Text, "roots": rs}, nil
		})
	upSrv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up },
		&mcp.StreamableHTTPOptions{Logger: slog.New(slog.DiscardHandler)}))
	t.Cleanup(upSrv.Close)
	p := benchProxy(t, Upstream{Name: "old", URL: upSrv.URL})
	front := httptest.NewServer(p.Handler())
	t.Cleanup(front.Close)

	logs := make(chan string, 8)
	c := mcp.NewClient(&mcp.Implementation{Name: "older-agent", Version: "1"}, &mcp.ClientOptions{
		Logger: slog.New(slog.DiscardHandler),
		CreateMessageHandler: func(ctx context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			return &mcp.CreateMessageResult{Role: "assistant", Model: "m", Content: &mcp.TextContent{Text: "sampled!"}}, nil
		},
		LoggingMessageHandler: func(ctx context.Context, req *mcp.LoggingMessageRequest) {
			logs <- fmt.Sprintf("%s %v", req.Params.Level, req.Params.Data)
		},
	})
	c.AddRoots(&mcp.Root{URI: "file:///work", Name: "work"})
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: front.URL}, &mcp.ClientSessionOptions{ProtocolVersion: agentProtocol})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	if v := cs.InitializeResult().ProtocolVersion; v != agentProtocol {
		t.Fatalf("the older client negotiated %q, want %s", v, agentProtocol)
	}
	if caps := cs.InitializeResult().Capabilities; caps == nil || caps.Logging == nil {
		t.Errorf("capabilities %+v: want the upstream's logging offered to an older client", caps)
	}
	// A 2026-07-28 run on the same endpoint at the same time.
	run := newEraClient(t, front.URL, newEraVersion, http.Header{SessionHeader: {"new-run"}})
	if v := run.InitializeResult().ProtocolVersion; v != newEraVersion {
		t.Fatalf("the run on the same endpoint negotiated %q", v)
	}

	if err := cs.SetLoggingLevel(t.Context(), &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
		t.Fatalf("logging/setLevel: %v", err)
	}
	ask := func(wantRoots ...string) {
		t.Helper()
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "ask", Arguments: map[string]any{}})
		if err != nil || res.IsError {
			t.Fatalf("ask: %v %v", err, res)
		}
		want := map[string]any{"sampled": "sampled!", "roots": wantRoots}
		if d := cmp.Diff(wire(t, want), wire(t, res.StructuredContent)); d != "" {
			t.Errorf("sampling and roots through ahead (-want +got):\n%s", d)
		}
		// The log message may be handled after the result it preceded;
		// the debug one is never sent.
		select {
		case got := <-logs:
			if want := fmt.Sprintf("warning %d roots", len(wantRoots)); got != want {
				t.Errorf("log = %q, want %q", got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no log message from the upstream")
		}
	}
	ask("file:///work")

	// The agent's roots change: the upstream hears it, and lists them anew.
	c.AddRoots(&mcp.Root{URI: "file:///other", Name: "other"})
	select {
	case <-rootsChanged:
	case <-time.After(10 * time.Second):
		t.Fatal("the upstream never heard that the agent's roots changed")
	}
	ask("file:///other", "file:///work")
	if len(logs) != 0 {
		t.Errorf("extra log messages: %d (the debug one passed the agent's level?)", len(logs))
	}
	// The run is served beside it, and offered none of the deprecated.
	if res, err := run.CallTool(t.Context(), &mcp.CallToolParams{Name: "ask", Arguments: map[string]any{}}); err != nil {
		t.Fatal(err)
	} else if !res.IsError || !strings.Contains(text(res), "sampling") {
		t.Errorf("a 2026-07-28 run's ask = %q, want an error: a run has no channel for sampling", text(res))
	}
}
