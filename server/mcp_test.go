package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ahead-dev/ahead/config"
	"github.com/ahead-dev/ahead/httpapi"
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
	declared := 0
	for ev, err := range trace.NewReader(nil).Events(dir) {
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case ev.IsCall():
			calls = append(calls, ev.Tool+string(ev.Args))
		case ev.Kind == trace.KindTools:
			declared++ // the upstream's tools, listed to route the call
		}
	}
	if len(calls) != 1 || calls[0] != `list_directory{"path":"/src"}` {
		t.Errorf("recorded %q, want the one call", calls)
	}
	if declared != 1 {
		t.Errorf("recorded %d lines of declared tools, want 1", declared)
	}
}

// TestHTTPAPICallsMCPTool calls an MCP upstream's tool through the HTTP
// API under a session name no MCP client has (issue 27): the session gets
// its own upstream connection, reused by its next call and closed when the
// session ends; a tool no upstream lists is 404 and gets no stats entry.
func TestHTTPAPICallsMCPTool(t *testing.T) {
	up := fsUpstream(t)
	conns := make(chan *mcp.ServerSession, 4)
	srv := mcp.NewServer(&mcp.Implementation{Name: "fakefs", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "list_directory"}, func(_ context.Context, _ *mcp.CallToolRequest, a pathArgs) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "[FILE] " + a.Path + "/README.md"}}}, nil, nil
	})
	up.Transport = func() (mcp.Transport, error) {
		ct, st := mcp.NewInMemoryTransports()
		ss, err := srv.Connect(context.Background(), st, nil)
		if err != nil {
			return nil, err
		}
		t.Cleanup(func() { ss.Close() })
		conns <- ss
		return ct, nil
	}
	cfg, err := (&config.Loader{Dir: t.TempDir()}).Parse("a.yaml", []byte("listen: 127.0.0.1:0\nmcpServers: {fs: {command: unused}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Upstreams = []mcpproxy.Upstream{up}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	addr := make(chan string, 1)
	done := make(chan error, 1)
	go func() { // owned: joined below
		done <- Run(ctx, cfg, &Options{Logger: slog.New(addrHandler{addr})})
	}()
	var url string
	select {
	case url = <-addr:
	case err := <-done:
		t.Fatalf("Run returned before listening: %v", err)
	}
	do := func(method, path, body string) (int, string) {
		req, _ := http.NewRequestWithContext(t.Context(), method, url+path, strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	for i, path := range []string{"/src", "/doc"} {
		code, body := do("POST", "/v1/sessions/run-1/calls", `{"tool": "list_directory", "args": {"path": "`+path+`"}}`)
		if code != http.StatusOK || !strings.Contains(body, `[FILE] `+path+`/README.md`) {
			t.Fatalf("call %d of an MCP tool through the HTTP API: %d %s, want 200 and the upstream's answer", i, code, body)
		}
	}
	ss := <-conns
	if len(conns) != 0 {
		t.Errorf("%d upstream connections for one session, want 1 (reused)", 1+len(conns))
	}
	if code, body := do("POST", "/v1/sessions/run-1/calls", `{"tool": "no_such_tool", "args": {}}`); code != http.StatusNotFound {
		t.Errorf("a tool no upstream lists: %d %s, want 404", code, body)
	}
	_, body := do("GET", "/v1/stats", "")
	if strings.Contains(body, "no_such_tool") || !strings.Contains(body, "list_directory") {
		t.Errorf("/v1/stats = %s, want list_directory and no entry for the unknown tool", body)
	}
	// The revision each upstream is reached with: a session without an
	// MCP client asks for the newest, and a transport upstream keeps a
	// connection per session whatever it speaks.
	var st httpapi.Stats
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatal(err)
	}
	want := []httpapi.UpstreamStats{{Name: "fs", Revision: "2026-07-28", Connections: 1}}
	if diff := cmp.Diff(want, st.Upstreams); diff != "" {
		t.Errorf("/v1/stats mcp_upstreams (-want +got):\n%s", diff)
	}
	if code, body := do("DELETE", "/v1/sessions/run-1", ""); code != http.StatusNoContent {
		t.Errorf("DELETE: %d %s", code, body)
	}
	// The session's end closes its upstream connection: the upstream's
	// side of it ends (Wait returns, with the closed pipe) while Run goes
	// on.
	ss.Wait()
	if code, _ := do("GET", "/healthz", ""); code != http.StatusOK {
		t.Errorf("healthz after DELETE: %d", code)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
}

// TestMCPMaxBody: /mcp bounds request bodies by max_body like the tool API
// (issue 23: it took the SDK's 4 MiB whatever max_body said). With
// max_body 5MiB, an initialize of 4.5 MiB is served; 6 MiB, declared or
// chunked, is refused with 413, a declared one with a JSON-RPC error.
func TestMCPMaxBody(t *testing.T) {
	cfg, err := (&config.Loader{Dir: t.TempDir()}).Parse("a.yaml", []byte("listen: 127.0.0.1:0\nmax_body: 5MiB\nmcpServers: {fs: {command: unused}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Upstreams = []mcpproxy.Upstream{fsUpstream(t)}
	url := startRun(t, cfg)
	const init = `"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	padded := func(n int) string { return "{" + strings.Repeat(" ", n-len(init)-1) + init }
	post := func(body io.Reader, length int64) (int, string) {
		req, err := http.NewRequestWithContext(t.Context(), "POST", url+"/mcp", body)
		if err != nil {
			t.Fatal(err)
		}
		req.ContentLength = length
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	ok := padded(9 << 19)
	if code, body := post(strings.NewReader(ok), int64(len(ok))); code != http.StatusOK || !strings.Contains(body, `"protocolVersion"`) {
		t.Errorf("an initialize of 4.5 MiB under max_body 5MiB: %d %.200s, want 200 and the server's answer", code, body)
	}
	// Refused bodies are sent over a connection of the test's own, and
	// only as far as the server reads them: a client still writing what
	// the server will not read may see the connection reset before it
	// reads the answer.
	raw := func(head string, body []byte) (int, string) {
		c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(time.Minute)) // a bound for a broken test
		io.WriteString(c, "POST /mcp HTTP/1.1\r\nHost: "+c.RemoteAddr().String()+"\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"+head+"\r\n")
		c.Write(body)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := raw("Content-Length: 6291456\r\n", []byte("{"))
	if code != http.StatusRequestEntityTooLarge || !strings.Contains(body, `"error":{"code":-32600`) || !strings.Contains(body, "max_body (5242880 bytes)") {
		t.Errorf("a declared 6 MiB body: %d %.300s, want 413 and a JSON-RPC error naming max_body", code, body)
	}
	// Chunked, the length unknown: one chunk 64 KiB over the limit.
	chunk := padded(5<<20 + 64<<10)
	code, body = raw("Transfer-Encoding: chunked\r\n", fmt.Appendf(nil, "%x\r\n%s\r\n0\r\n\r\n", len(chunk), chunk))
	if code != http.StatusRequestEntityTooLarge || !strings.Contains(body, "5242880") {
		t.Errorf("a chunked body over 5 MiB: %d %.300s, want 413 naming the limit", code, body)
	}
}
