package mcpproxy

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// listenClient is a Go SDK client of 2026-07-28 over HTTP, in the run its
// Ahead-Session header names, that reports the notifications it receives
// and the acknowledgements of its listens.
type listenClient struct {
	cs      *mcp.ClientSession
	changed chan string // "tools", or the URI of a resource update
	acks    chan mcp.NotificationSubscriptions
}

func newListenClient(t *testing.T, url, run string) *listenClient {
	t.Helper()
	lc := &listenClient{changed: make(chan string, 16), acks: make(chan mcp.NotificationSubscriptions, 16)}
	hc := &http.Client{Transport: headerTransport{base: http.DefaultTransport, headers: map[string]string{SessionHeader: run}}}
	c := mcp.NewClient(&mcp.Implementation{Name: "agent-" + run, Version: "2"}, &mcp.ClientOptions{
		Logger: slog.New(slog.DiscardHandler),
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			lc.changed <- "tools"
		},
		ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			lc.changed <- req.Params.URI
		},
	})
	c.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if p, ok := req.GetParams().(*mcp.SubscriptionsAcknowledgedParams); ok && method == "notifications/subscriptions/acknowledged" {
				lc.acks <- p.Notifications
			}
			return next(ctx, method, req)
		}
	})
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc},
		&mcp.ClientSessionOptions{ProtocolVersion: newEraVersion})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	lc.cs = cs
	return lc
}

// next returns the next notification the client received.
func (lc *listenClient) next(t *testing.T, what string) string {
	t.Helper()
	select {
	case got := <-lc.changed:
		return got
	case <-time.After(30 * time.Second):
		t.Fatalf("no notification (%s) within 30 s", what)
		return ""
	}
}

// ack waits for the acknowledgement of a listen.
func (lc *listenClient) ack(t *testing.T) mcp.NotificationSubscriptions {
	t.Helper()
	select {
	case got := <-lc.acks:
		return got
	case <-time.After(30 * time.Second):
		t.Fatal("a listen was not acknowledged within 30 s")
		return mcp.NotificationSubscriptions{}
	}
}

// TestNewEraListen: 2026-07-28 clients over HTTP, each in its own run,
// open subscriptions/listen (the Go SDK client does on connecting, for the
// list changes the discovered capabilities offer, and for each resource it
// subscribes to): each receives its own upstream's list changes and
// resource updates, stamped with its listen's id, and never another
// run's; a run with a listen open is not reaped as idle.
func TestNewEraListen(t *testing.T) {
	r := newRig(t, rigOptions{})
	front := httptest.NewServer(r.proxy.Handler())
	t.Cleanup(front.Close)

	upstreamOf := func(connect func()) *mcp.Server {
		r.up.mu.Lock()
		n := len(r.up.servers)
		r.up.mu.Unlock()
		connect()
		r.up.mu.Lock()
		defer r.up.mu.Unlock()
		if len(r.up.servers) != n+1 {
			t.Fatalf("connecting a run made %d upstream connections, want 1", len(r.up.servers)-n)
		}
		return r.up.servers[n]
	}
	var a, b *listenClient
	upA := upstreamOf(func() { a = newListenClient(t, front.URL, "run-a") })
	upB := upstreamOf(func() { b = newListenClient(t, front.URL, "run-b") })
	caps := a.cs.InitializeResult().Capabilities
	if caps.Tools == nil || !caps.Tools.ListChanged || caps.Resources == nil || !caps.Resources.Subscribe || caps.Logging != nil {
		t.Fatalf("server/discover capabilities %+v: want list changes and subscriptions offered, no logging", caps)
	}
	for _, lc := range []*listenClient{a, b} {
		if got := lc.ack(t); !got.ToolsListChanged {
			t.Fatalf("the connecting listen was acknowledged with %+v, want tools list changes", got)
		}
	}
	if err := a.cs.Subscribe(t.Context(), &mcp.SubscribeParams{URI: "test://motd"}); err != nil {
		t.Fatal(err)
	}
	if got := a.ack(t); len(got.ResourceSubscriptions) != 1 || got.ResourceSubscriptions[0] != "test://motd" {
		t.Fatalf("a's resource listen was acknowledged with %+v", got)
	}

	// b's upstream changes its tools: b is told, a is not.
	upB.AddTool(&mcp.Tool{Name: "new-in-b", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{}, nil
		})
	if got := b.next(t, "b's tools"); got != "tools" {
		t.Fatalf("b received %q, want its tools list change", got)
	}
	// a's upstream updates the resource a subscribed to (b did not), then
	// changes its tools: a receives exactly those two, in order (b's
	// change, had it leaked, would have come first on a's stream).
	if err := upA.ResourceUpdated(t.Context(), &mcp.ResourceUpdatedNotificationParams{URI: "test://motd"}); err != nil {
		t.Fatal(err)
	}
	if got := a.next(t, "a's resource"); got != "test://motd" {
		t.Fatalf("a received %q, want the update of test://motd", got)
	}
	upA.AddTool(&mcp.Tool{Name: "new-in-a", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{}, nil
		})
	if got := a.next(t, "a's tools"); got != "tools" {
		t.Fatalf("a received %q, want its tools list change", got)
	}
	tools, err := a.cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, x := range tools.Tools {
		names = append(names, x.Name)
	}
	if !slices.Contains(names, "new-in-a") || slices.Contains(names, "new-in-b") {
		t.Errorf("a lists %q after its change: want new-in-a, not b's new-in-b", names)
	}
	select {
	case got := <-b.changed:
		t.Errorf("b received a's notification %q", got)
	default:
	}

	// A run whose listen is open is busy: the reaper keeps it.
	r.clock.Add(time.Hour)
	r.proxy.reapIdle()
	r.proxy.mu.Lock()
	_, kept := r.proxy.byID["run-a"]
	r.proxy.mu.Unlock()
	if !kept {
		t.Error("a run with an open listen was reaped as idle")
	}
}

// TestNewEraListenTypeScript: the TypeScript SDK v2 client, pinned to
// 2026-07-28, listens (client.listen) in its run: ahead acknowledges the
// tool list changes and the resource it asked for, and the client's
// handlers get its own upstream's list change and resource update.
func TestNewEraListenTypeScript(t *testing.T) {
	node, _ := testdeps(t)
	script, err := filepath.Abs(filepath.Join("testdata", "tslisten.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	client, err := filepath.Abs(filepath.Join("..", "testdeps", "node_modules", "@modelcontextprotocol", "client", "dist", "index.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	r := newRig(t, rigOptions{})
	front := httptest.NewServer(r.proxy.Handler())
	t.Cleanup(front.Close)

	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script, front.URL, "ts-run", "test://motd")
	cmd.Env = append(os.Environ(), "MCP_CLIENT=file://"+client)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(stdout)
	next := func(what string) string {
		t.Helper()
		if !lines.Scan() {
			t.Fatalf("the TypeScript client ended before %s: %v", what, cmd.Wait())
		}
		return lines.Text()
	}
	ack := next("the acknowledgement")
	var agreed mcp.NotificationSubscriptions
	if err := json.Unmarshal([]byte(strings.TrimPrefix(ack, "ack ")), &agreed); err != nil ||
		!agreed.ToolsListChanged || !slices.Equal(agreed.ResourceSubscriptions, []string{"test://motd"}) {
		t.Fatalf("listen acknowledged %q, want tools list changes and test://motd", ack)
	}
	r.proxy.mu.Lock()
	run := r.proxy.byID["ts-run"]
	r.proxy.mu.Unlock()
	if run == nil {
		t.Fatal("no session for the run ts-run")
	}
	// The run's own upstream connection is the newest.
	r.up.mu.Lock()
	up := r.up.servers[len(r.up.servers)-1]
	r.up.mu.Unlock()
	if err := up.ResourceUpdated(t.Context(), &mcp.ResourceUpdatedNotificationParams{URI: "test://motd"}); err != nil {
		t.Fatal(err)
	}
	if got := next("the resource update"); got != "updated test://motd" {
		t.Errorf("the client got %q, want the update of test://motd", got)
	}
	up.AddTool(&mcp.Tool{Name: "new", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{}, nil
		})
	if got := next("the tools list change"); got != "tools" {
		t.Errorf("the client got %q, want the tools list change", got)
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Errorf("the TypeScript client: %v", err)
	}
}

// TestNewEraListenHub: runs in front of a stateless upstream share its one
// connection (the hub): a resource update reaches the run whose listen
// subscribed to it, not the other; a tools list change reaches both (the
// upstream's tools changed for everyone). Subscribing waits for the
// upstream's own acknowledgement, so no update sent after it is missed.
func TestNewEraListenHub(t *testing.T) {
	up := &statelessServer{}
	p, _ := statelessRig(t, up.start(t))
	front := httptest.NewServer(p.Handler())
	t.Cleanup(front.Close)
	a := newListenClient(t, front.URL, "run-a")
	b := newListenClient(t, front.URL, "run-b")
	for _, lc := range []*listenClient{a, b} {
		if got := lc.ack(t); !got.ToolsListChanged {
			t.Fatalf("the connecting listen was acknowledged with %+v, want tools list changes", got)
		}
	}
	if err := a.cs.Subscribe(t.Context(), &mcp.SubscribeParams{URI: "test://motd"}); err != nil {
		t.Fatal(err)
	}
	if got := a.ack(t); !slices.Equal(got.ResourceSubscriptions, []string{"test://motd"}) {
		t.Fatalf("a's resource listen was acknowledged with %+v", got)
	}
	if ups := p.Upstreams(); !ups[0].Shared || ups[0].Connections != 1 {
		t.Fatalf("upstream %+v, want one shared connection", ups[0])
	}
	if err := up.srv.ResourceUpdated(t.Context(), &mcp.ResourceUpdatedNotificationParams{URI: "test://motd"}); err != nil {
		t.Fatal(err)
	}
	if got := a.next(t, "a's resource"); got != "test://motd" {
		t.Fatalf("a received %q, want the update of test://motd", got)
	}
	up.srv.AddTool(&mcp.Tool{Name: "new", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{}, nil
		})
	// b's first notification is the list change: the resource update,
	// had it leaked, would have come first on b's stream.
	for name, lc := range map[string]*listenClient{"a": a, "b": b} {
		if got := lc.next(t, name+"'s tools"); got != "tools" {
			t.Errorf("%s received %q, want the tools list change", name, got)
		}
	}
}

// TestNewEraLogging: a 2026-07-28 run asks for a call's log messages by
// putting a level in its _meta; the upstream's messages for the call reach
// the call's own stream at that level, and a call that asked none gets
// none.
func TestNewEraLogging(t *testing.T) {
	r := newRig(t, rigOptions{})
	front := httptest.NewServer(r.proxy.Handler())
	t.Cleanup(front.Close)
	logs := make(chan string, 16)
	hc := &http.Client{Transport: headerTransport{base: http.DefaultTransport, headers: map[string]string{SessionHeader: "run-log"}}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "2"}, &mcp.ClientOptions{
		Logger: slog.New(slog.DiscardHandler),
		LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
			logs <- fmt.Sprintf("%s %v", req.Params.Level, req.Params.Data)
		},
	}).Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: front.URL, HTTPClient: hc},
		&mcp.ClientSessionOptions{ProtocolVersion: newEraVersion})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	if ups := r.proxy.Upstreams(); ups[0].Revision != newEraVersion {
		t.Fatalf("the run's upstream connection speaks %q, want %s", ups[0].Revision, newEraVersion)
	}
	slow := func(level mcp.LoggingLevel) {
		t.Helper()
		meta := mcp.Meta{}
		if level != "" {
			meta[mcp.MetaKeyLogLevel] = level
		}
		if res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Meta: meta, Name: "slow", Arguments: map[string]any{}}); err != nil || res.IsError {
			t.Fatalf("slow (log level %q): %v, %v", level, res, err)
		}
	}
	slow("")        // asks no log messages
	slow("warning") // the upstream logs at info: below what was asked
	slow("info")
	select {
	case got := <-logs:
		if got != "info slow started" {
			t.Errorf("the first log message the run received is %q, want only the call at info's: info slow started", got)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the call that asked for info got no log message within 30 s")
	}
}
