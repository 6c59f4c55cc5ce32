package server

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ahead-dev/ahead/config"
	"github.com/ahead-dev/ahead/mcpproxy"
	"github.com/ahead-dev/ahead/trace"
)

type pathArgs struct {
	Path string `json:"path"`
}

// fsUpstream is an in-memory MCP upstream with one read-only, closed-world
// tool, list_directory. Each connection gets its own server session, closed
// when the test ends.
func fsUpstream(t *testing.T) mcpproxy.Upstream {
	s := mcp.NewServer(&mcp.Implementation{Name: "fakefs", Version: "1"}, nil)
	ro := &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: new(false)}
	mcp.AddTool(s, &mcp.Tool{Name: "list_directory", Annotations: ro}, func(_ context.Context, _ *mcp.CallToolRequest, a pathArgs) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "[FILE] " + a.Path + "/README.md"}}}, nil, nil
	})
	return mcpproxy.Upstream{Name: "fs", Transport: func() (mcp.Transport, error) {
		ct, st := mcp.NewInMemoryTransports()
		ss, err := s.Connect(context.Background(), st, nil)
		if err != nil {
			return nil, err
		}
		t.Cleanup(func() { ss.Close() })
		return ct, nil
	}}
}

// TestServeMCP serves one agent session over a pair of pipes, as ahead
// mcp does over stdio: a call goes through the engine to the upstream and
// is recorded; when the agent hangs up, ServeMCP returns cleanly with the
// summary.
func TestServeMCP(t *testing.T) {
	dir := t.TempDir()
	cfg := &config.Config{
		Upstreams:        []mcpproxy.Upstream{fsUpstream(t)},
		TrustAnnotations: true,
		Traces:           &config.Traces{Dir: dir, Prefix: "mcp"},
	}
	agentIn, serverOut := io.Pipe()
	serverIn, agentOut := io.Pipe()
	var summary bytes.Buffer
	done := make(chan error, 1)
	go func() { // owned: joined below
		err := ServeMCP(t.Context(), cfg, serverIn, serverOut, &Options{Summary: &summary})
		serverOut.Close() // what ahead mcp's exit does to stdout
		done <- err
	}()

	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, &mcp.ClientOptions{Logger: slog.New(slog.DiscardHandler)}).
		Connect(t.Context(), &mcp.IOTransport{Reader: agentIn, Writer: agentOut}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "list_directory", Arguments: map[string]any{"path": "/src"}})
	if err != nil {
		t.Fatal(err)
	}
	a, _ := res.Meta["ahead"].(map[string]any)
	if len(res.Content) != 1 || res.Content[0].(*mcp.TextContent).Text != "[FILE] /src/README.md" || a["source"] != "executed" {
		t.Errorf("call through ServeMCP: %+v (meta %v), want the upstream's answer, executed", res.Content, res.Meta)
	}
	cs.Close() // the agent hangs up: the server's input ends
	if err := <-done; err != nil {
		t.Errorf("ServeMCP after the agent hung up: %v, want nil", err)
	}
	if !strings.Contains(summary.String(), "1 tool call") {
		t.Errorf("summary %q does not count the call", summary.String())
	}
	files, err := os.ReadDir(dir)
	if err != nil || len(files) != 1 || !strings.HasPrefix(files[0].Name(), "mcp") {
		t.Errorf("trace files %v (%v), want one named with the prefix mcp", files, err)
	}
	var calls []string
	for ev, err := range trace.NewReader(nil).Events(dir) {
		if err != nil {
			t.Fatal(err)
		}
		calls = append(calls, ev.Tool+string(ev.Args))
	}
	if len(calls) != 1 || calls[0] != `list_directory{"path":"/src"}` {
		t.Errorf("recorded %q, want the one call", calls)
	}
}
