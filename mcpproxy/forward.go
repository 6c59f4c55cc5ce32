package mcpproxy

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ahead-dev/ahead/backend"
	"github.com/ahead-dev/ahead/engine"
)

// proxied are the methods the proxy serves itself (from the session's
// upstreams); the SDK keeps the protocol's own housekeeping (initialized,
// ping, cancellation), and serves subscriptions/listen within what the
// proxy agreed (listen.go).
var proxied = map[string]bool{
	"initialize": true, "server/discover": true,
	"tools/list": true, "tools/call": true,
	"prompts/list": true, "prompts/get": true,
	"resources/list": true, "resources/templates/list": true, "resources/read": true,
	"resources/subscribe": true, "resources/unsubscribe": true,
	"completion/complete": true, "logging/setLevel": true,
}

// downSessionKey carries the SDK session of the downstream request being
// served: in a 2026-07-28 run, each request has its own, and what the
// upstream sends about the request (progress) goes back on it.
type downSessionKey struct{}

// receive returns the downstream server's receiving middleware: it serves
// what the agent sends from the session's upstreams. With runs, requests
// come from the stateless handler (2026-07-28 over HTTP) and are served in
// the run they name (runFor); else the SDK session is the session.
func (p *Proxy) receive(runs bool) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			ss, ok := req.GetSession().(*mcp.ServerSession)
			if !ok || !proxied[method] && method != "subscriptions/listen" {
				return next(ctx, method, req)
			}
			var s *session
			var err error
			if runs {
				var end func()
				s, end, err = p.runFor(method, req, ss.InitializeParams())
				if err != nil {
					return nil, err
				}
				defer end()
				ctx = context.WithValue(ctx, downSessionKey{}, ss)
			} else if s, err = p.sessionFor(ss); err != nil {
				return nil, err
			}
			if method == "subscriptions/listen" {
				return s.listen(ctx, ss, next, method, req)
			}
			res, err := s.serve(ctx, next, method, req)
			if err != nil || !isNewEra(req) {
				return res, err
			}
			// Results forwarded raw from an upstream of an older
			// revision lack the resultType a 2026-07-28 client reads.
			return completeResult(res), nil
		}
	}
}

// serve serves one downstream request in the session s.
func (s *session) serve(ctx context.Context, next mcp.MethodHandler, method string, req mcp.Request) (mcp.Result, error) {
	// What the upstream answers is counted in the budget of the HTTP
	// request that carried req (budget.go), not of the one that opened
	// the session, long answered.
	ctx = s.p.budgets.with(ctx, req)
	switch method {
	case "initialize":
		return s.initialize(ctx, next, method, req)
	case "server/discover":
		res, err := next(ctx, method, req)
		if err != nil {
			return nil, err
		}
		return s.discover(ctx, res), nil
	case "tools/list":
		return s.listTools(ctx)
	case "tools/call":
		if e := req.GetExtra(); isNewEra(req) && e != nil && e.Header != nil {
			// A 2026-07-28 request over HTTP ends only when its stream
			// breaks (its POST is its whole life): the call runs on, for
			// the client's re-issue to join (engine/orphan.go). Older
			// revisions and stdio cancel a call explicitly: it is cut.
			ctx = engine.KeepRunning(ctx)
		}
		return s.callTool(ctx, req.GetParams().(*mcp.CallToolParamsRaw))
	case "prompts/list":
		return s.listPrompts(ctx)
	case "prompts/get":
		params := req.GetParams().(*mcp.GetPromptParams)
		if m := hopMeta(params.Meta); len(m) != len(params.Meta) {
			cp := *params
			cp.Meta = m
			params = &cp
		}
		defer s.begin(ctx, params.GetProgressToken())()
		cs, err := s.promptOwner(ctx, params.Name)
		if err != nil {
			return nil, err
		}
		return passErr(cs.GetPrompt(ctx, params))
	case "resources/list":
		return s.listResources(ctx)
	case "resources/templates/list":
		return s.listTemplates(ctx)
	case "resources/read":
		params := req.GetParams().(*mcp.ReadResourceParams)
		if m := hopMeta(params.Meta); len(m) != len(params.Meta) {
			cp := *params
			cp.Meta = m
			params = &cp
		}
		defer s.begin(ctx, params.GetProgressToken())()
		cs, err := s.resourceOwner(ctx, params.URI)
		if err != nil {
			return nil, err
		}
		return passErr(cs.ReadResource(ctx, params))
	case "resources/subscribe":
		params := req.GetParams().(*mcp.SubscribeParams)
		cs, err := s.resourceOwner(ctx, params.URI)
		if err != nil {
			return nil, err
		}
		if u := s.hubOf(cs); u != nil {
			err = u.subscribe(ctx, s, cs, params)
		} else {
			err = s.p.acks.subscribe(ctx, cs, params)
		}
		if err != nil {
			return nil, passErrOnly(err)
		}
		return &emptyResult{}, nil
	case "resources/unsubscribe":
		params := req.GetParams().(*mcp.UnsubscribeParams)
		cs, err := s.resourceOwner(ctx, params.URI)
		if err != nil {
			return nil, err
		}
		if u := s.hubOf(cs); u != nil {
			err = u.unsubscribe(ctx, s, cs, params.URI)
		} else {
			err = cs.Unsubscribe(ctx, params)
		}
		if err != nil {
			return nil, passErrOnly(err)
		}
		return &emptyResult{}, nil
	case "completion/complete":
		params := req.GetParams().(*mcp.CompleteParams)
		if m := hopMeta(params.Meta); len(m) != len(params.Meta) {
			cp := *params
			cp.Meta = m
			params = &cp
		}
		cs, err := s.completionOwner(ctx, params)
		if err != nil {
			return nil, err
		}
		return passErr(cs.Complete(ctx, params))
	case "logging/setLevel":
		// The SDK records the level for the session; every upstream
		// that logs gets it too, and filters as it would direct.
		res, err := next(ctx, method, req)
		if err != nil {
			return nil, err
		}
		params := req.GetParams().(*mcp.SetLoggingLevelParams)
		for _, sl := range s.slots {
			cs, err := sl.get(ctx)
			if err != nil || stateless(cs) || !hasCap(cs, func(c *mcp.ServerCapabilities) bool { return c.Logging != nil }) {
				// (2026-07-28 has no logging/setLevel: a level
				// rides on each request, and ahead sends none.)
				continue
			}
			if err := cs.SetLoggingLevel(ctx, params); err != nil {
				return nil, passErrOnly(err)
			}
		}
		return res, nil
	}
	return next(ctx, method, req)
}

// initialize connects the session's upstreams with the agent's
// capabilities, then answers with theirs.
func (s *session) initialize(ctx context.Context, next mcp.MethodHandler, method string, req mcp.Request) (mcp.Result, error) {
	params, _ := req.GetParams().(*mcp.InitializeParams)
	s.setInit(params)
	s.connectAll(ctx)
	res, err := next(ctx, method, req)
	if err != nil {
		return nil, err
	}
	// Trusted upstreams' annotations feed the policy. Read them from the
	// session's own connections, before its first call may be speculated,
	// so that no upstream is launched a second time only to list its
	// tools (issue 14); the agent's own tools/list will refresh them.
	if s.p.followsAnnotations() {
		if _, err := s.listTools(ctx); err != nil {
			s.p.log.Warn("listing trusted upstreams' tools", "session", s.id, "err", err)
		}
	}
	// The session exists before its first call: let the engine speculate
	// on that call too (the predictor's session-start patterns).
	if b, ok := s.p.engine().(interface{ Begin(session string) }); ok {
		b.Begin(s.id)
	}
	ir, ok := res.(*mcp.InitializeResult)
	if !ok {
		return res, nil
	}
	out := *ir
	caps, instr, info := s.capabilities()
	out.Capabilities = caps
	if instr != "" {
		out.Instructions = instr
	}
	if info != nil {
		out.ServerInfo = info
	}
	return &out, nil
}

// passErr returns an upstream's result, or its JSON-RPC error as is (the
// agent sees the code and message it would see direct).
func passErr[R mcp.Result](r R, err error) (mcp.Result, error) {
	if err != nil {
		return nil, passErrOnly(err)
	}
	return r, nil
}

func passErrOnly(err error) error {
	if we, ok := errors.AsType[*jsonrpc.Error](err); ok {
		return we
	}
	return err
}

// upstreamErr turns a failure to reach an upstream into a clear JSON-RPC
// error (internal error, naming the upstream and the cause).
func upstreamErr(err error) error {
	if we, ok := errors.AsType[*jsonrpc.Error](err); ok {
		return we
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "ahead: " + err.Error()}
}

func hasCap(cs *mcp.ClientSession, f func(*mcp.ServerCapabilities) bool) bool {
	res := cs.InitializeResult()
	return res != nil && res.Capabilities != nil && f(res.Capabilities)
}

// listTools lists every upstream's tools under their downstream names, and
// remembers where each goes.
func (s *session) listTools(ctx context.Context) (*mcp.ListToolsResult, error) {
	routes := make(map[string]route)
	var tools, trusted []*mcp.Tool
	var hints mcp.Cacheable // the upstreams' cache hints, merged
	var errs []error
	reached := 0
	for _, sl := range s.slots {
		cs, err := sl.get(ctx)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		listed, cache, err := allTools(ctx, cs)
		if err != nil {
			errs = append(errs, fmt.Errorf("listing tools of %q: %w", sl.up.Name, err))
		}
		mergeCache(&hints, reached == 0, cache)
		reached++
		for _, t := range listed {
			name := sl.up.Prefix + t.Name
			if _, dup := routes[name]; dup {
				s.p.log.Warn("tool offered by two upstreams; the first is used (set a prefix)",
					"tool", name, "upstream", sl.up.Name)
				continue
			}
			routes[name] = route{up: sl.up, tool: t.Name}
			tools = append(tools, downstreamTool(t, name, s.p.log))
			if sl.up.TrustAnnotations {
				trusted = append(trusted, &mcp.Tool{Name: name, Annotations: t.Annotations})
			}
		}
	}
	if reached == 0 && len(errs) > 0 {
		return nil, upstreamErr(errors.Join(errs...))
	}
	for _, err := range errs {
		s.p.log.Warn("tools/list: upstream skipped", "session", s.id, "err", err)
	}
	s.mu.Lock()
	s.tools = routes
	s.mu.Unlock()
	s.p.addRoutes(routes)
	s.p.noteTrusted(trusted)
	s.declare(ctx, tools)
	if tools == nil {
		tools = []*mcp.Tool{}
	}
	return &mcp.ListToolsResult{Tools: tools, Cacheable: hints}, nil
}

// allTools lists an upstream's tools, every page, with the cache hints of
// the first (an older revision's upstream gives none: ttlMs 0, stale at
// once).
func allTools(ctx context.Context, cs *mcp.ClientSession) ([]*mcp.Tool, mcp.Cacheable, error) {
	var tools []*mcp.Tool
	var cache mcp.Cacheable
	params := &mcp.ListToolsParams{}
	for first := true; ; first = false {
		res, err := cs.ListTools(ctx, params)
		if err != nil {
			return tools, cache, err
		}
		if first {
			cache = res.Cacheable
		}
		tools = append(tools, res.Tools...)
		if res.NextCursor == "" {
			return tools, cache, nil
		}
		params = &mcp.ListToolsParams{Cursor: res.NextCursor}
	}
}

// toolRoute returns where a tool of the session goes, listing the tools
// first if the session has not (or they changed since).
func (s *session) toolRoute(ctx context.Context, tool string) (route, error) {
	s.mu.Lock()
	r, ok := s.tools[tool]
	listed := s.tools != nil
	s.mu.Unlock()
	if ok {
		return r, nil
	}
	if !listed {
		if _, err := s.listTools(ctx); err != nil {
			return route{}, err
		}
		s.mu.Lock()
		r, ok = s.tools[tool]
		s.mu.Unlock()
		if ok {
			return r, nil
		}
	}
	if !s.client.Load() {
		// No MCP client behind the session (the HTTP API), so nobody
		// expects the upstream's own answer to a tool it lacks: a tool
		// no listing names is unknown (404), unless another session's
		// listing has it (its upstream failed to start here, and the
		// call says so).
		if r, ok := s.p.routeOf(tool); ok {
			return r, nil
		}
		return route{}, fmt.Errorf("%w %q", backend.ErrUnknownTool, tool)
	}
	if r, ok := s.p.fallbackRoute(tool); ok {
		return r, nil
	}
	return route{}, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown tool %q", tool)}
}

// hubOf returns the upstream whose hub cs is, if it is one.
func (s *session) hubOf(cs *mcp.ClientSession) *upstream {
	for _, sl := range s.slots {
		if h := sl.sharing(); h != nil && h.live() == cs {
			return sl.up
		}
	}
	return nil
}

func upstreamErrOrNil(err error) error {
	if err == nil {
		return nil
	}
	return upstreamErr(err)
}

// rootsListChanged forwards the agent's roots/list_changed to the session's
// upstreams (which then ask for the roots again, through ahead).
func (p *Proxy) rootsListChanged(ctx context.Context, req *mcp.RootsListChangedRequest) {
	s, err := p.sessionFor(req.Session)
	if err != nil {
		return
	}
	for _, sl := range s.slots {
		if cs := sl.live(); cs != nil {
			if err := notifyRaw(context.WithoutCancel(ctx), cs, "notifications/roots/list_changed", &mcp.RootsListChangedParams{}); err != nil {
				p.log.Debug("forwarding roots/list_changed", "upstream", sl.up.Name, "err", err)
			}
		}
	}
}

// upstreamBackend is the engine's backend for one upstream: it calls the
// tool on the connection of the session the call belongs to.
type upstreamBackend struct {
	p  *Proxy
	up *upstream
}

var (
	_ backend.Backend = (*upstreamBackend)(nil)
	_ backend.Warmer  = (*upstreamBackend)(nil)
)

// Call runs a tool on the session's connection to the upstream. A
// speculative call runs in exactly the session state the agent's would.
// The session need not be an MCP client's: see Proxy.holdSession.
func (b *upstreamBackend) Call(ctx context.Context, req backend.Request) (backend.Response, error) {
	s, release, err := b.p.holdSession(req.Session)
	if err != nil {
		return backend.Response{}, err
	}
	defer release()
	r, err := s.toolRoute(ctx, req.Tool)
	if err != nil {
		return backend.Response{}, routeErr(req.Tool, err)
	}
	sl := s.slots[r.up.i]
	res, onHub, err := b.callOn(ctx, s, sl, r, req)
	if err != nil && onHub && staleEra(err) && ctx.Err() == nil {
		// The upstream refused the hub's revision, so it ran nothing;
		// the hub forgot what it knew (stateless.go): once more, with
		// the revision the upstream speaks now.
		res, _, err = b.callOn(ctx, s, sl, r, req)
	}
	if err != nil {
		if ctx.Err() != nil {
			return backend.Response{}, ctx.Err()
		}
		return backend.Response{}, err
	}
	// The log and progress messages the upstream sent before the result
	// go to the agent first (order.go).
	sl.settle(ctx)
	return backend.Response{Output: renderResult(res), IsError: res.IsError, NeedsInput: res.NeedsInput(), Raw: res}, nil
}

// callOn calls the tool on the slot's connection (the hub's, when the
// upstream is stateless: onHub).
func (b *upstreamBackend) callOn(ctx context.Context, s *session, sl *slot, r route, req backend.Request) (res *mcp.CallToolResult, onHub bool, err error) {
	cs, err := sl.get(ctx)
	if err != nil {
		return nil, false, err
	}
	params := &mcp.CallToolParams{Name: r.tool, Arguments: req.Args}
	dc, ok := ctx.Value(downKey{}).(*downCall)
	if ok && !req.Speculative && dc.session == req.Session && dc.tool == req.Tool {
		params.Meta = maps.Clone(dc.meta) // the SDK may add to it
		params.InputResponses = dc.inputResponses
		params.RequestState = dc.requestState
	} else {
		dc = nil
	}
	if h := sl.sharing(); h != nil && h.live() == cs {
		// The hub serves every session: the call says whose it is.
		onHub = true
		params.Meta = s.requestMeta(params.Meta)
		defer r.up.routeProgress(s, params.Meta)()
	} else if dc != nil && dc.logLevel != nil && stateless(cs) {
		// The session's own connection of 2026-07-28: the upstream logs
		// at the level the agent asked this call's messages at, on the
		// call's stream, and they reach the agent's request (notify).
		if params.Meta == nil {
			params.Meta = mcp.Meta{}
		}
		params.Meta[mcp.MetaKeyLogLevel] = dc.logLevel
	}
	defer sl.track(req.Speculative)()
	res, err = cs.CallTool(ctx, params)
	if err != nil {
		return nil, onHub, fmt.Errorf("upstream %q: %w", r.up.Name, err)
	}
	return res, onHub, nil
}

// Warmup brings the session's connection to the tool's upstream up if it
// crashed and may restart now, so that the predicted call does not pay for
// the restart. (Connections of live sessions start when they initialize.)
func (b *upstreamBackend) Warmup(ctx context.Context, req backend.Request) error {
	s, release, err := b.p.holdSession(req.Session)
	if err != nil {
		return err
	}
	defer release()
	r, err := s.toolRoute(ctx, req.Tool)
	if err != nil {
		return routeErr(req.Tool, err)
	}
	if sl := s.slots[r.up.i]; sl.due() {
		_, err := sl.get(ctx)
		return err
	}
	return nil
}

// routeErr is the engine's error for a tool the session could not route:
// unknown (the engine's ErrUnknownTool, 404 on the HTTP API), or the
// reason no upstream could be asked (down, ctx done).
func routeErr(tool string, err error) error {
	if errors.Is(err, backend.ErrUnknownTool) {
		return err
	}
	if je, ok := errors.AsType[*jsonrpc.Error](err); ok && je.Code == jsonrpc.CodeInvalidParams {
		return fmt.Errorf("%w %q", backend.ErrUnknownTool, tool)
	}
	return fmt.Errorf("routing %q: %w", tool, err)
}
