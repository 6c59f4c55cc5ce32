package mcpproxy

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ahead-dev/ahead/engine"
	"github.com/ahead-dev/ahead/policy"
	"github.com/ahead-dev/ahead/predict"
	"github.com/ahead-dev/ahead/sched"
	"github.com/ahead-dev/ahead/trace"
)

// files is the state of one upstream session of the test server: a tiny
// file system, so every downstream session sees only its own writes.
type files struct {
	mu    sync.Mutex
	data  map[string]string
	reads map[string]int // read calls per name, authoritative or not
	write int
}

// testServer is an in-memory upstream: each connection gets a fresh MCP
// server with its own files (a stateful upstream, as a process per
// session would be).
type testServer struct {
	mu       sync.Mutex
	sessions []*mcp.ServerSession
	servers  []*mcp.Server
	state    []*files
	connects int
	// release, if set, is what the "slow" tool waits for.
	release chan struct{}
	// failConnect makes new connections fail.
	failConnect bool
}

type nameArgs struct {
	Name string `json:"name"`
}

type writeArgs struct {
	Name string `json:"name"`
	Text string `json:"text"`
}

func (ts *testServer) newServer(st *files) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "testfs", Version: "1.2.3"}, &mcp.ServerOptions{
		Instructions: "use list before read",
		Logger:       slog.New(slog.DiscardHandler),
		CompletionHandler: func(ctx context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
			return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: []string{req.Params.Argument.Value + "-done"}}}, nil
		},
		SubscribeHandler:   func(context.Context, *mcp.SubscribeRequest) error { return nil },
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
	})
	ro := &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: new(false)}
	mcp.AddTool(s, &mcp.Tool{Name: "list", Description: "list files", Annotations: ro},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			st.mu.Lock()
			defer st.mu.Unlock()
			var names []string
			for n := range st.data {
				names = append(names, n)
			}
			sort.Strings(names)
			return nil, map[string]any{"files": names}, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "read", Description: "read a file", Annotations: ro},
		func(ctx context.Context, req *mcp.CallToolRequest, a nameArgs) (*mcp.CallToolResult, any, error) {
			st.mu.Lock()
			defer st.mu.Unlock()
			st.reads[a.Name]++
			text, ok := st.data[a.Name]
			if !ok {
				return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "no such file " + a.Name}}}, nil, nil
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "write", Description: "write a file",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: new(true), OpenWorldHint: new(false)}},
		func(ctx context.Context, req *mcp.CallToolRequest, a writeArgs) (*mcp.CallToolResult, any, error) {
			st.mu.Lock()
			defer st.mu.Unlock()
			st.write++
			st.data[a.Name] = a.Text
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "slow", Description: "reports progress, logs, then waits"},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			if tok := req.Params.GetProgressToken(); tok != nil {
				req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: 1, Total: 2, Message: "half"})
			}
			req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Data: "slow started"})
			ts.mu.Lock()
			release := ts.release
			ts.mu.Unlock()
			if release != nil {
				select {
				case <-release:
				case <-ctx.Done():
					return nil, nil, ctx.Err()
				}
			}
			return nil, map[string]any{"done": true}, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "ask", Description: "asks the user (sampling, elicitation, roots)"},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			msg, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 5,
				Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "hi"}}}})
			if err != nil {
				return nil, nil, fmt.Errorf("sampling: %w", err)
			}
			el, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "name?",
				RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}}})
			if err != nil {
				return nil, nil, fmt.Errorf("elicitation: %w", err)
			}
			roots, err := req.Session.ListRoots(ctx, nil)
			if err != nil {
				return nil, nil, fmt.Errorf("roots: %w", err)
			}
			var rs []string
			for _, r := range roots.Roots {
				rs = append(rs, r.URI)
			}
			return nil, map[string]any{
				"sampled":  msg.Content.(*mcp.TextContent).Text,
				"elicited": el.Content["name"],
				"roots":    rs,
			}, nil
		})
	s.AddPrompt(&mcp.Prompt{Name: "greet", Arguments: []*mcp.PromptArgument{{Name: "who"}}},
		func(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user",
				Content: &mcp.TextContent{Text: "hello " + req.Params.Arguments["who"]}}}}, nil
		})
	s.AddResource(&mcp.Resource{URI: "test://motd", Name: "motd", MIMEType: "text/plain"},
		func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "be kind"}}}, nil
		})
	s.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "test://files/{name}", Name: "file"},
		func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			name := strings.TrimPrefix(req.Params.URI, "test://files/")
			st.mu.Lock()
			defer st.mu.Unlock()
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: st.data[name]}}}, nil
		})
	return s
}

// transport connects a fresh server session with fresh files.
func (ts *testServer) transport() (mcp.Transport, error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.failConnect {
		return nil, fmt.Errorf("test upstream refuses connections")
	}
	ts.connects++
	st := &files{data: map[string]string{"a.txt": "alpha", "b.txt": "beta"}, reads: map[string]int{}}
	ct, st2 := mcp.NewInMemoryTransports()
	srv := ts.newServer(st)
	ss, err := srv.Connect(context.Background(), st2, nil)
	if err != nil {
		return nil, err
	}
	ts.sessions = append(ts.sessions, ss)
	ts.servers = append(ts.servers, srv)
	ts.state = append(ts.state, st)
	return ct, nil
}

// kill ends every live upstream session, as a crash would.
func (ts *testServer) kill() {
	ts.mu.Lock()
	ss := ts.sessions
	ts.sessions = nil
	ts.mu.Unlock()
	for _, s := range ss {
		s.Close()
	}
}

func (ts *testServer) server(i int) *mcp.Server {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.servers[i]
}

func (ts *testServer) files(i int) *files {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.state[i]
}

// rig is a proxy with an engine in front of a test server.
type rig struct {
	t     *testing.T
	up    *testServer
	proxy *Proxy
	eng   *engine.Engine
	clock *fakeClock
	// crashes receives the session of each upstream connection the proxy
	// found crashed (its log), for waitCrashed.
	crashes chan string
}

// crashLog is a log handler that sends the session of every "upstream
// crashed" record on ch (never blocking: it holds 256).
type crashLog chan<- string

func (h crashLog) Enabled(context.Context, slog.Level) bool { return true }
func (h crashLog) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h crashLog) WithGroup(string) slog.Handler            { return h }
func (h crashLog) Handle(_ context.Context, rec slog.Record) error {
	if rec.Message != "upstream crashed" {
		return nil
	}
	rec.Attrs(func(a slog.Attr) bool {
		if a.Key == "session" {
			select {
			case h <- a.Value.String():
			default:
			}
			return false
		}
		return true
	})
	return nil
}

// waitCrashed waits until the proxy has found the upstream connection of
// each session crashed (it is down, its restart due after the backoff).
func (r *rig) waitCrashed(sessions ...string) {
	r.t.Helper()
	left := make(map[string]bool)
	for _, s := range sessions {
		left[s] = true
	}
	timeout := time.After(30 * time.Second)
	for len(left) > 0 {
		select {
		case s := <-r.crashes:
			delete(left, s)
		case <-timeout:
			r.t.Fatalf("the upstream connections of sessions %v were not found crashed within 30 s", slices.Collect(maps.Keys(left)))
		}
	}
}

// agentSessions returns the sessions of the agents connected to the proxy.
func (r *rig) agentSessions() []string {
	r.proxy.mu.Lock()
	defer r.proxy.mu.Unlock()
	var ids []string
	for _, s := range r.proxy.sessions {
		ids = append(ids, s.id)
	}
	return ids
}

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

type rigOptions struct {
	policy    *policy.Policy
	predictor predict.Predictor
	recorder  engine.Recorder
	prefix    string
	// follow: no startup probe; the engine starts denying everything and
	// the proxy derives the policy from the tools sessions list.
	follow bool
	// untrusted: the upstream's annotations are not trusted.
	untrusted bool
	// limits are the upstream's slots and queue.
	limits sched.Limits
	// maxSessions is the proxy's MaxSessions.
	maxSessions int
}

// readAfterList predicts, after a successful list, a read of its first
// file, and nothing else; after a read, a write (which the policy must
// never let run speculatively).
var readAfterList = predict.Func(func(ev trace.Event) []predict.Prediction {
	switch ev.Tool {
	case "list":
		var out struct {
			Files []string `json:"files"`
		}
		if json.Unmarshal([]byte(ev.Output), &out) != nil || len(out.Files) == 0 {
			return nil
		}
		args, _ := json.Marshal(map[string]string{"name": out.Files[0]})
		return []predict.Prediction{{Tool: "read", Args: args, P: 0.9}}
	case "read":
		return []predict.Prediction{{Tool: "write", Args: json.RawMessage(`{"name":"a.txt","text":"spec"}`), P: 0.9}}
	}
	return nil
})

func newRig(t *testing.T, o rigOptions) *rig {
	t.Helper()
	r := &rig{t: t, up: &testServer{}, clock: &fakeClock{t: time.Unix(1e9, 0)}, crashes: make(chan string, 256)}
	p, err := New(&Options{
		Upstreams:   []Upstream{{Name: "fs", Transport: r.up.transport, Prefix: o.prefix, TrustAnnotations: !o.untrusted, Limits: o.limits}},
		Logger:      slog.New(crashLog(r.crashes)),
		Stderr:      io.Discard,
		Now:         r.clock.Now,
		MaxSessions: o.maxSessions,
	})
	if err != nil {
		t.Fatal(err)
	}
	pol := o.policy
	if o.follow {
		pol = &policy.Policy{}
	} else if pol == nil {
		tools, err := p.TrustedTools(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		pol = AnnotationPolicy(nil, tools)
	}
	r.eng = engine.New(&engine.Options{
		Backends:  p.Backends(),
		Route:     p.Route,
		Policy:    pol,
		Predictor: o.predictor,
		Recorder:  o.recorder,
		Logger:    slog.New(slog.DiscardHandler),
	})
	p.Attach(r.eng)
	r.proxy = p
	t.Cleanup(func() {
		p.Close()
		r.eng.Close()
	})
	return r
}

// agentProtocol is the protocol version test agents speak: the newest with
// sessions, which agents use today.
const agentProtocol = "2025-11-25"

// clientOptions are what a test agent supports and observes.
type agent struct {
	mu       sync.Mutex
	progress []string
	logs     []string
	changed  int
	updated  []string
}

func (a *agent) options() *mcp.ClientOptions {
	return &mcp.ClientOptions{
		Logger: slog.New(slog.DiscardHandler),
		CreateMessageHandler: func(ctx context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			return &mcp.CreateMessageResult{Role: "assistant", Model: "m", Content: &mcp.TextContent{Text: "sampled!"}}, nil
		},
		ElicitationHandler: func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "ada"}}, nil
		},
		ProgressNotificationHandler: func(ctx context.Context, req *mcp.ProgressNotificationClientRequest) {
			a.mu.Lock()
			defer a.mu.Unlock()
			a.progress = append(a.progress, fmt.Sprintf("%v:%v/%v %s", req.Params.ProgressToken, req.Params.Progress, req.Params.Total, req.Params.Message))
		},
		LoggingMessageHandler: func(ctx context.Context, req *mcp.LoggingMessageRequest) {
			a.mu.Lock()
			defer a.mu.Unlock()
			a.logs = append(a.logs, fmt.Sprintf("%s %v", req.Params.Level, req.Params.Data))
		},
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			a.mu.Lock()
			defer a.mu.Unlock()
			a.changed++
		},
		ResourceUpdatedHandler: func(ctx context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			a.mu.Lock()
			defer a.mu.Unlock()
			a.updated = append(a.updated, req.Params.URI)
		},
	}
}

// connect connects an agent to the proxy over an in-memory transport.
func (r *rig) connect(a *agent) *mcp.ClientSession {
	r.t.Helper()
	if a == nil {
		a = &agent{}
	}
	ct, st := mcp.NewInMemoryTransports()
	done := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { done <- r.proxy.Serve(ctx, st) }()
	c := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "0.1"}, a.options())
	c.AddRoots(&mcp.Root{URI: "file:///work", Name: "work"})
	cs, err := c.Connect(r.t.Context(), ct, &mcp.ClientSessionOptions{ProtocolVersion: agentProtocol})
	if err != nil {
		cancel()
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() {
		cs.Close()
		cancel()
		if err := <-done; err != nil {
			r.t.Errorf("Serve: %v", err)
		}
	})
	return cs
}

// direct connects an agent straight to a fresh upstream session.
func (r *rig) direct(a *agent) *mcp.ClientSession {
	r.t.Helper()
	if a == nil {
		a = &agent{}
	}
	t, err := r.up.transport()
	if err != nil {
		r.t.Fatal(err)
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "0.1"}, a.options())
	c.AddRoots(&mcp.Root{URI: "file:///work", Name: "work"})
	cs, err := c.Connect(r.t.Context(), t, &mcp.ClientSessionOptions{ProtocolVersion: agentProtocol})
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { cs.Close() })
	return cs
}

// call calls a tool and returns its result and _meta.ahead.source.
func call(t *testing.T, cs *mcp.ClientSession, tool string, args any) (*mcp.CallToolResult, string) {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("calling %s: %v", tool, err)
	}
	return res, sourceOf(res)
}

func sourceOf(res *mcp.CallToolResult) string {
	a, _ := res.Meta["ahead"].(map[string]any)
	s, _ := a["source"].(string)
	return s
}

// withoutAhead returns res without ahead's _meta, for comparison with a
// direct result.
func withoutAhead(res *mcp.CallToolResult) *mcp.CallToolResult {
	out := *res
	out.Meta = nil
	for k, v := range res.Meta {
		if k == "ahead" {
			continue
		}
		if out.Meta == nil {
			out.Meta = mcp.Meta{}
		}
		out.Meta[k] = v
	}
	return &out
}

func text(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func contextWithCancel(t *testing.T) (context.Context, context.CancelFunc) {
	return context.WithCancel(t.Context())
}

// wire is v as it travels: comparing wire forms compares what an agent
// would see, whatever the SDK keeps in unexported fields.
func wire(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}
