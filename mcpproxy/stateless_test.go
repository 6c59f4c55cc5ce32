package mcpproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ahead-dev/ahead/engine"
	"github.com/ahead-dev/ahead/predict"
	"github.com/ahead-dev/ahead/trace"
)

// statelessServer is an upstream of MCP 2026-07-28 over streamable HTTP
// in stateless mode (no sessions): it counts the methods it is sent, the
// requests that name a session, and who calls its tools.
type statelessServer struct {
	srv      *mcp.Server
	mu       sync.Mutex
	methods  map[string]int
	withID   int      // requests carrying Mcp-Session-Id
	clients  []string // clientInfo name of each tools/call
	asked    int      // confirm calls without the user's answer
	answered []string // the answers confirm calls carried
}

func (u *statelessServer) count(method string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.methods[method]
}

func (u *statelessServer) start(t *testing.T) string {
	srv := mcp.NewServer(&mcp.Implementation{Name: "stateless", Version: "2"}, &mcp.ServerOptions{Logger: slog.New(slog.DiscardHandler),
		SubscribeHandler:   func(context.Context, *mcp.SubscribeRequest) error { return nil },
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
	})
	u.srv = srv
	srv.AddResource(&mcp.Resource{URI: "test://motd", Name: "motd"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "be kind"}}}, nil
		})
	ro := &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: new(false)}
	note := func(req *mcp.CallToolRequest) {
		u.mu.Lock()
		defer u.mu.Unlock()
		if ci := req.ClientInfo(); ci != nil {
			u.clients = append(u.clients, ci.Name)
		}
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "list", Annotations: ro},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			note(req)
			return nil, map[string]any{"files": []string{"a.txt"}}, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "read", Annotations: ro},
		func(ctx context.Context, req *mcp.CallToolRequest, a nameArgs) (*mcp.CallToolResult, any, error) {
			note(req)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "text of " + a.Name}}}, nil, nil
		})
	// confirm asks the user (2026-07-28's input_required) before it
	// answers, and answers a retry that carries the user's answer.
	mcp.AddTool(srv, &mcp.Tool{Name: "confirm", Annotations: ro},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			note(req)
			u.mu.Lock()
			defer u.mu.Unlock()
			resp, ok := req.Params.InputResponses["ok"].(*mcp.ElicitResult)
			if !ok {
				u.asked++
				return &mcp.CallToolResult{RequestState: "st", InputRequests: mcp.InputRequestMap{
					"ok": &mcp.ElicitParams{Message: "really?", RequestedSchema: map[string]any{"type": "object"}},
				}}, nil, nil
			}
			u.answered = append(u.answered, resp.Action+" "+req.Params.RequestState)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "confirmed"}}}, nil, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{Stateless: true, Logger: slog.New(slog.DiscardHandler)})
	u.methods = map[string]int{}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var msg struct {
			Method string `json:"method"`
		}
		_ = json.Unmarshal(body, &msg)
		u.mu.Lock()
		if msg.Method != "" {
			u.methods[msg.Method]++
		}
		if r.Header.Get("Mcp-Session-Id") != "" {
			u.withID++
		}
		u.mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	return hs.URL
}

// afterList predicts, after list, a read of its first file and a confirm.
var afterList = predict.Func(func(ev trace.Event) []predict.Prediction {
	if ev.Tool != "list" {
		return nil
	}
	return []predict.Prediction{
		{Tool: "read", Args: json.RawMessage(`{"name":"a.txt"}`), P: 0.9},
		{Tool: "confirm", Args: json.RawMessage(`{}`), P: 0.9},
	}
})

// statelessRig is a proxy and engine in front of a stateless upstream,
// with agents connecting over in-memory transports.
func statelessRig(t *testing.T, url string) (*Proxy, *engine.Engine) {
	t.Helper()
	p, err := New(&Options{
		Upstreams: []Upstream{{Name: "sl", URL: url, TrustAnnotations: true}},
		Logger:    slog.New(slog.DiscardHandler),
		Stderr:    io.Discard,
	})
	if err != nil {
		t.Fatal(err)
	}
	tools, err := p.TrustedTools(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	eng := engine.New(&engine.Options{Backends: p.Backends(), Route: p.Route, Policy: AnnotationPolicy(nil, tools),
		Predictor: afterList, Logger: slog.New(slog.DiscardHandler)})
	p.Attach(eng)
	t.Cleanup(func() {
		p.Close()
		eng.Close()
	})
	return p, eng
}

// serveAgent connects an agent (MCP 2025-11-25, as most agents speak
// today) to p; its client answers no input requests itself.
func serveAgent(t *testing.T, p *Proxy, name string) *mcp.ClientSession {
	t.Helper()
	return serveAgentAt(t, p, name, agentProtocol, nil)
}

// serveAgentAt connects an agent of MCP revision version to p; elicited,
// if set, counts the elicitations it answers (accepting).
func serveAgentAt(t *testing.T, p *Proxy, name, version string, elicited *atomic.Int32) *mcp.ClientSession {
	t.Helper()
	ct, st := mcp.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Serve(ctx, st) }()
	c := mcp.NewClient(&mcp.Implementation{Name: name, Version: "1"}, &mcp.ClientOptions{
		Logger:         slog.New(slog.DiscardHandler),
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			if elicited != nil {
				elicited.Add(1)
			}
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{}}, nil
		},
	})
	cs, err := c.Connect(t.Context(), ct, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.Close()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return cs
}

// TestStatelessUpstreamOneConnection: an upstream of 2026-07-28 over HTTP
// is reached with that revision, through one connection for every agent
// session (discovered once, never initialized, no session id), each call
// naming its own agent; speculation works through it as through any.
func TestStatelessUpstreamOneConnection(t *testing.T) {
	up := &statelessServer{}
	p, _ := statelessRig(t, up.start(t))
	agents := []string{"agent-a", "agent-b", "agent-c"}
	var sessions []*mcp.ClientSession
	for _, name := range agents {
		sessions = append(sessions, serveAgent(t, p, name))
	}
	for i, cs := range sessions {
		call(t, cs, "list", map[string]any{})
		res, src := call(t, cs, "read", map[string]any{"name": "a.txt"})
		if text(res) != "text of a.txt" || (src != "reused" && src != "promoted") {
			t.Errorf("%s: predicted read = %q (%s), want its text, reused or promoted", agents[i], text(res), src)
		}
	}
	if n, m := up.count("server/discover"), up.count("initialize"); n != 1 || m != 0 {
		t.Errorf("upstream discovered %d times, initialized %d times; want 1 and 0 (one connection for %d sessions)", n, m, len(agents))
	}
	up.mu.Lock()
	withID, clients := up.withID, up.clients
	up.mu.Unlock()
	if withID != 0 {
		t.Errorf("%d requests named a session, want none", withID)
	}
	seen := map[string]bool{}
	for _, c := range clients {
		seen[c] = true
	}
	for _, name := range agents {
		if !seen[name] {
			t.Errorf("no call named agent %q (saw %v): the shared connection must say whose each call is", name, clients)
		}
	}
	want := []UpstreamState{{Name: "sl", Revision: "2026-07-28", Shared: true, Connections: 1}}
	if diff := cmp.Diff(want, p.Upstreams()); diff != "" {
		t.Errorf("Upstreams() (-want +got):\n%s", diff)
	}
}

// TestSessionUpstreamPerSession: an upstream that keeps sessions (a
// stateful streamable HTTP server, at most 2025-11-25) is reached as
// before: the agent's revision, a connection of its own per session.
func TestSessionUpstreamPerSession(t *testing.T) {
	ts := &testServer{}
	upstream := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server {
		ts.mu.Lock()
		defer ts.mu.Unlock()
		st := &files{data: map[string]string{"a.txt": "alpha"}, reads: map[string]int{}}
		ts.state = append(ts.state, st)
		return ts.newServer(st)
	}, &mcp.StreamableHTTPOptions{Logger: slog.New(slog.DiscardHandler)}))
	t.Cleanup(upstream.Close)
	p, _ := statelessRig(t, upstream.URL)
	a, b := serveAgent(t, p, "agent-a"), serveAgent(t, p, "agent-b")
	call(t, a, "write", map[string]any{"name": "a.txt", "text": "only in a"})
	if res, _ := call(t, b, "read", map[string]any{"name": "a.txt"}); text(res) != "alpha" {
		t.Errorf("b sees a's write: %q", text(res))
	}
	// The discovery, then one connection per session.
	want := []UpstreamState{{Name: "sl", Revision: agentProtocol, Shared: false, Connections: 3}}
	if diff := cmp.Diff(want, p.Upstreams()); diff != "" {
		t.Errorf("Upstreams() (-want +got):\n%s", diff)
	}
}

// TestInputRequiredNeverReused: a speculative call whose result asks for
// the user's input is discarded and counted apart; the agent's own call
// executes and gets the request for input as the upstream sent it (a
// 2026-07-28 agent); the agent's retry with the answer is a call of its
// own, and executes.
func TestInputRequiredNeverReused(t *testing.T) {
	up := &statelessServer{}
	p, eng := statelessRig(t, up.start(t))
	cs := serveAgentAt(t, p, "agent", revisionStateless, nil)
	call(t, cs, "list", map[string]any{})
	res, src := call(t, cs, "confirm", map[string]any{})
	if src != "executed" || !res.NeedsInput() || res.RequestState != "st" || len(res.InputRequests) != 1 {
		t.Errorf("agent's confirm: source %s, needs input %v, state %q, %d requests; want executed, the upstream's request for input",
			src, res.NeedsInput(), res.RequestState, len(res.InputRequests))
	}
	up.mu.Lock()
	asked := up.asked
	up.mu.Unlock()
	if asked != 2 {
		t.Errorf("confirm asked %d times, want 2 (the discarded speculation, the agent's own call)", asked)
	}
	st := eng.Stats()
	if n := st.Outcomes[engine.OutcomeNeedsInput]; n != 1 {
		t.Errorf("outcomes %v, want one %s", st.Outcomes, engine.OutcomeNeedsInput)
	}

	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "confirm", Arguments: map[string]any{},
		InputResponses: mcp.InputResponseMap{"ok": &mcp.ElicitResult{Action: "accept"}}, RequestState: res.RequestState})
	if err != nil {
		t.Fatal(err)
	}
	if text(res) != "confirmed" || sourceOf(res) != "executed" {
		t.Errorf("retry with the answer = %q (%s), want confirmed, executed", text(res), sourceOf(res))
	}
	up.mu.Lock()
	answered := up.answered
	up.mu.Unlock()
	if diff := cmp.Diff([]string{"accept st"}, answered); diff != "" {
		t.Errorf("answers the upstream got (-want +got):\n%s", diff)
	}
}

// TestInputRequiredOlderAgent: an agent of 2025-11-25 cannot read an
// input_required result: ahead asks it the old way (elicitation on its
// session) and retries with its answer, so the agent gets the upstream's
// answer in one call, as from a server of its own revision.
func TestInputRequiredOlderAgent(t *testing.T) {
	up := &statelessServer{}
	p, _ := statelessRig(t, up.start(t))
	var elicited atomic.Int32
	cs := serveAgentAt(t, p, "older", agentProtocol, &elicited)
	res, src := call(t, cs, "confirm", map[string]any{})
	if text(res) != "confirmed" || src != "executed" || res.NeedsInput() {
		t.Errorf("older agent's confirm = %q (%s, needs input %v), want confirmed, executed", text(res), src, res.NeedsInput())
	}
	up.mu.Lock()
	answered := up.answered
	up.mu.Unlock()
	if n := elicited.Load(); n != 1 || !slices.Equal(answered, []string{"accept st"}) {
		t.Errorf("agent asked %d times, upstream got answers %q; want once, [accept st]", n, answered)
	}
}

// TestStatelessUpstreamRestartedOlder: an HTTP upstream reached through
// the hub with 2026-07-28 restarts as a server of an older revision (it
// keeps sessions and refuses 2026-07-28 requests): the call that finds it
// so is served, and so are the next, each session connecting on its own
// with the handshake, instead of every call failing.
func TestStatelessUpstreamRestartedOlder(t *testing.T) {
	serve := func(stateless bool, versions []string, era string) http.Handler {
		srv := mcp.NewServer(&mcp.Implementation{Name: "restarting", Version: era},
			&mcp.ServerOptions{Logger: slog.New(slog.DiscardHandler), SupportedProtocolVersions: versions})
		ro := &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: new(false)}
		mcp.AddTool(srv, &mcp.Tool{Name: "list", Annotations: ro},
			func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
				return nil, map[string]any{"files": []string{"a.txt"}}, nil
			})
		mcp.AddTool(srv, &mcp.Tool{Name: "read", Annotations: ro},
			func(_ context.Context, _ *mcp.CallToolRequest, a nameArgs) (*mcp.CallToolResult, any, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: a.Name + " from " + era}}}, nil, nil
			})
		return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
			&mcp.StreamableHTTPOptions{Stateless: stateless, Logger: slog.New(slog.DiscardHandler)})
	}
	var current atomic.Value
	current.Store(serve(true, nil, "new"))
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		current.Load().(http.Handler).ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	p, _ := statelessRig(t, hs.URL)
	a := serveAgent(t, p, "agent-a")
	if res, _ := call(t, a, "read", map[string]any{"name": "x.txt"}); text(res) != "x.txt from new" {
		t.Fatalf("read = %q before the restart", text(res))
	}
	if ups := p.Upstreams(); !ups[0].Shared || ups[0].Revision != revisionStateless {
		t.Fatalf("upstream %+v before the restart, want shared, %s", ups[0], revisionStateless)
	}

	current.Store(serve(false, []string{agentProtocol}, "old"))
	for _, name := range []string{"y.txt", "z.txt"} {
		res, err := a.CallTool(t.Context(), &mcp.CallToolParams{Name: "read", Arguments: map[string]any{"name": name}})
		if err != nil || text(res) != name+" from old" {
			t.Fatalf("read %s after the restart = %v, %v; want it from the older server", name, res, err)
		}
	}
	if ups := p.Upstreams(); ups[0].Shared || ups[0].Revision != agentProtocol {
		t.Errorf("upstream %+v after the restart, want a connection per session, %s", ups[0], agentProtocol)
	}
	b := serveAgent(t, p, "agent-b")
	if res, _ := call(t, b, "read", map[string]any{"name": "w.txt"}); text(res) != "w.txt from old" {
		t.Errorf("a new session's read = %q, want it from the older server", text(res))
	}
}
