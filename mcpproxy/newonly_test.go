package mcpproxy

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ahead-dev/ahead/engine"
	"github.com/ahead-dev/ahead/policy"
)

// newOnlyEnv makes the test binary an MCP server on stdio that speaks only
// 2026-07-28 (see TestMain); its value is a file each process appends a
// line to when it starts.
const newOnlyEnv = "AHEAD_TEST_NEW_ONLY_SERVER"

// serveNewOnly is the server of newOnlyEnv: a Go SDK server limited to
// 2026-07-28 that refuses the initialize handshake, as a server of the new
// revision only does (the SDK's own restriction still answers it).
func serveNewOnly(starts string) int {
	if f, err := os.OpenFile(starts, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
		fmt.Fprintln(f, os.Getpid())
		f.Close()
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "newonly", Version: "1"}, &mcp.ServerOptions{
		Logger:                    slog.New(slog.DiscardHandler),
		SupportedProtocolVersions: []string{revisionStateless},
	})
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "initialize" {
				data, _ := json.Marshal(mcp.UnsupportedProtocolVersionData{Supported: []string{revisionStateless},
					Requested: req.GetParams().(*mcp.InitializeParams).ProtocolVersion})
				return nil, &jsonrpc.Error{Code: mcp.CodeUnsupportedProtocolVersion, Message: "unsupported protocol version", Data: data}
			}
			return next(ctx, method, req)
		}
	})
	ro := &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: new(false)}
	mcp.AddTool(srv, &mcp.Tool{Name: "list", Annotations: ro},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			return nil, map[string]any{"files": []string{"a.txt"}}, nil
		})
	// read says who asked: the agent's identity rides on each request.
	mcp.AddTool(srv, &mcp.Tool{Name: "read", Annotations: ro},
		func(ctx context.Context, req *mcp.CallToolRequest, a nameArgs) (*mcp.CallToolResult, any, error) {
			who := "?"
			if ci := req.ClientInfo(); ci != nil {
				who = ci.Name
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: a.Name + " for " + who}}}, nil, nil
		})
	// confirm asks the user (input_required) before it answers.
	mcp.AddTool(srv, &mcp.Tool{Name: "confirm"},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			if _, ok := req.Params.InputResponses["ok"].(*mcp.ElicitResult); !ok {
				return &mcp.CallToolResult{RequestState: "st", InputRequests: mcp.InputRequestMap{
					"ok": &mcp.ElicitParams{Message: "really?", RequestedSchema: map[string]any{"type": "object"}},
				}}, nil, nil
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "confirmed"}}}, nil, nil
		})
	if err := srv.Run(context.Background(), &mcp.StdioTransport{}); err != nil && !strings.Contains(err.Error(), "EOF") {
		fmt.Fprintln(os.Stderr, "new-only server:", err)
		return 1
	}
	return 0
}

// TestNewOnlyStdioUpstream: a stdio upstream that speaks only 2026-07-28
// refuses the handshake an older agent's revision needs; ahead reaches it
// with 2026-07-28 instead, each call carrying the agent's identity, its
// speculation working as with any upstream and the upstream's requests
// for input put to the agent the old way; the next session asks for
// 2026-07-28 at once (one process, not two).
func TestNewOnlyStdioUpstream(t *testing.T) {
	starts := t.TempDir() + "/starts"
	p, err := New(&Options{
		Upstreams: []Upstream{{Name: "newonly", Command: os.Args[0], Args: []string{"-test.run=^$"},
			Env: map[string]string{newOnlyEnv: starts}, TrustAnnotations: true}},
		Logger: slog.New(slog.DiscardHandler),
		Stderr: io.Discard,
	})
	if err != nil {
		t.Fatal(err)
	}
	eng := engine.New(&engine.Options{Backends: p.Backends(), Route: p.Route, Predictor: readAfterList, Policy: &policy.Policy{},
		Logger: slog.New(slog.DiscardHandler)})
	p.Attach(eng)
	t.Cleanup(func() {
		p.Close()
		eng.Close()
	})
	processes := func() int {
		b, _ := os.ReadFile(starts)
		return strings.Count(string(b), "\n")
	}

	var elicited atomic.Int32
	a := serveAgentAt(t, p, "agent-a", agentProtocol, &elicited)
	if got := a.InitializeResult().ProtocolVersion; got != agentProtocol {
		t.Errorf("the agent speaks %s, want %s", got, agentProtocol)
	}
	if n := processes(); n != 2 {
		t.Errorf("the first session started %d processes, want 2 (the handshake refused, then 2026-07-28)", n)
	}
	if ups := p.Upstreams(); ups[0].Revision != revisionStateless {
		t.Errorf("upstream reached with %q, want %s", ups[0].Revision, revisionStateless)
	}
	if _, err := a.ListTools(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	call(t, a, "list", map[string]any{})
	res, src := call(t, a, "read", map[string]any{"name": "a.txt"})
	if text(res) != "a.txt for agent-a" || (src != "reused" && src != "promoted") {
		t.Errorf("the predicted read = %q (%s), want a.txt for agent-a, reused or promoted", text(res), src)
	}
	res, _ = call(t, a, "confirm", map[string]any{})
	if text(res) != "confirmed" || res.NeedsInput() || elicited.Load() != 1 {
		t.Errorf("confirm = %q (needs input %v), agent asked %d times; want confirmed after asking once", text(res), res.NeedsInput(), elicited.Load())
	}

	b := serveAgentAt(t, p, "agent-b", agentProtocol, nil)
	if res, _ := call(t, b, "read", map[string]any{"name": "b.txt"}); text(res) != "b.txt for agent-b" {
		t.Errorf("second session's read = %q, want b.txt for agent-b", text(res))
	}
	if n := processes(); n != 3 {
		t.Errorf("%d processes for two sessions, want 3: the second asks for 2026-07-28 at once", n)
	}
}
