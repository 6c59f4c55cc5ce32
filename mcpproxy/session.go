package mcpproxy

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// session is one engine session: its id, its downstream MCP session (nil
// for a session of another front, such as the HTTP API: see
// Proxy.holdSession), and its own connection (slot) to every upstream.
type session struct {
	p     *Proxy
	id    string
	ss    *mcp.ServerSession // nil: no MCP client session (another front, or a 2026-07-28 run)
	slots []*slot            // one per upstream, in configuration order
	used  time.Time          // the last call (proxy's own sessions); protected by p.mu
	pins  int                // requests and calls being served in it (holdSession); protected by p.mu
	// client: an MCP client is behind the session (ss, or the requests of
	// a 2026-07-28 run, each with its own SDK session: see runFor).
	client atomic.Bool

	mu        sync.Mutex // protects everything below
	init      *mcp.InitializeParams
	tools     map[string]route     // the last listing: downstream name → upstream
	prompts   map[string]*upstream // prompt name → upstream
	resources map[string]*upstream // resource URI → upstream
	inflight  []*downReq           // downstream requests being served, oldest first
	hubMeta   mcp.Meta             // the agent's identity and capabilities, for calls on hubs (requestMeta)
	// listeners are the open subscriptions/listen streams (listen.go),
	// each a request in flight: at most what the front admits
	// (max_connections over HTTP, one connection over stdio); watches
	// holds one entry per URI they subscribe to.
	listeners []*listener
	watches   map[string]*watch // resource URI → the listens' subscription upstream
}

// downReq is a downstream request in flight. Its context carries the
// request id, so messages sent downstream with it travel on the request's
// own stream (streamable HTTP), as the upstream's would have.
type downReq struct {
	ctx   context.Context
	token any // progress token, if any
}

func newSession(p *Proxy, id string, ss *mcp.ServerSession) *session {
	s := &session{p: p, id: id, ss: ss}
	s.client.Store(ss != nil)
	for _, u := range p.ups {
		s.slots = append(s.slots, &slot{s: s, up: u})
	}
	return s
}

// busy reports whether a call is in flight on one of the session's
// upstream connections, or a listen is open (a run waiting for
// notifications is not idle).
func (s *session) busy() bool {
	if s.listening() {
		return true
	}
	for _, sl := range s.slots {
		sl.mu.Lock()
		n := sl.authCalls + sl.specCalls
		sl.mu.Unlock()
		if n > 0 {
			return true
		}
	}
	return false
}

func (s *session) close() {
	for _, sl := range s.slots {
		sl.close()
		if sl.up.hub != nil {
			// Its subscriptions on the upstream's hub end with it.
			_ = sl.up.unsubscribe(context.Background(), s, nil, "")
		}
	}
}

// setInit records the downstream client's initialize parameters.
func (s *session) setInit(p *mcp.InitializeParams) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.init = p
}

func (s *session) initParams() *mcp.InitializeParams {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.init != nil || s.ss == nil {
		return s.init
	}
	return s.ss.InitializeParams()
}

// protocolVersion is the version the agent asked for: the upstream is
// asked for the same.
func (s *session) protocolVersion() string {
	if ip := s.initParams(); ip != nil && ip.ProtocolVersion != "" {
		return ip.ProtocolVersion
	}
	return ""
}

// connectAll starts the session's upstreams in parallel and waits for
// them. Failures are recorded in the slots (and retried later); they do not
// fail the session.
func (s *session) connectAll(ctx context.Context) {
	var wg sync.WaitGroup
	for _, sl := range s.slots {
		wg.Go(func() { _, _ = sl.get(ctx) })
	}
	wg.Wait()
}

// begin records a downstream request in flight and returns its end.
func (s *session) begin(ctx context.Context, token any) func() {
	r := &downReq{ctx: ctx, token: token}
	s.mu.Lock()
	s.inflight = append(s.inflight, r)
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		for i, q := range s.inflight {
			if q == r {
				s.inflight = append(s.inflight[:i], s.inflight[i+1:]...)
				break
			}
		}
		s.mu.Unlock()
	}
}

// relate returns the context for a message the upstream sends to the agent
// while serving up's request: the values of the downstream request it most
// likely belongs to (the one with the progress token, else the latest in
// flight), and the cancellation of the upstream's request.
func (s *session) relate(up context.Context, token any) (context.Context, context.CancelFunc) {
	base := context.Background()
	s.mu.Lock()
	for i := len(s.inflight) - 1; i >= 0; i-- {
		r := s.inflight[i]
		if token == nil || r.token == token {
			base = r.ctx
			break
		}
	}
	s.mu.Unlock()
	ctx, cancel := context.WithCancel(context.WithoutCancel(base))
	stop := context.AfterFunc(up, cancel)
	return ctx, func() { stop(); cancel() }
}

// errSpeculativeUserRequest refuses a request to the user from an upstream
// that is only running speculative work.
var errSpeculativeUserRequest = errors.New("ahead: a speculative call may not ask the user anything")

// newClient returns the MCP client for one upstream connection of the
// session: it mirrors the agent's capabilities and forwards what the
// upstream sends to the agent.
func (s *session) newClient(sl *slot) *mcp.Client {
	caps := s.mirroredCaps()
	ss := s.ss
	if ss == nil {
		// Requests to the user go to the agent's session: a run without
		// one (2026-07-28 over HTTP) has no channel for them on a
		// connection that keeps sessions.
		caps.RootsV2, caps.Sampling, caps.Elicitation = nil, nil, nil
	}
	opts := &mcp.ClientOptions{
		Logger:       discardLogger,
		Capabilities: caps,
		// A request for input (2026-07-28's input_required) goes to the
		// agent as it came; ahead never answers for the user.
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			s.upstreamChanged(sl.up, listTools)
		},
		PromptListChangedHandler: func(context.Context, *mcp.PromptListChangedRequest) {
			s.upstreamChanged(sl.up, listPrompts)
		},
		ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) {
			s.upstreamChanged(sl.up, listResources)
		},
		ResourceUpdatedHandler: func(ctx context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			s.notify(context.Background(), "notifications/resources/updated", req.Params)
		},
		LoggingMessageHandler: func(ctx context.Context, req *mcp.LoggingMessageRequest) {
			rctx, cancel := s.relate(ctx, nil)
			defer cancel()
			// Raw: the upstream filtered by the level the agent set
			// (forwarded), as it would direct.
			s.notify(rctx, "notifications/message", req.Params)
		},
		ProgressNotificationHandler: func(ctx context.Context, req *mcp.ProgressNotificationClientRequest) {
			// The upstream request carries the agent's own progress
			// token, so the notification goes back unchanged.
			rctx, cancel := s.relate(ctx, req.Params.ProgressToken)
			defer cancel()
			to := s.downstream(rctx)
			if to == nil {
				return
			}
			if err := to.NotifyProgress(rctx, req.Params); err != nil {
				s.p.log.Debug("forwarding progress", "session", s.id, "err", err)
			}
		},
		ElicitationCompleteHandler: func(ctx context.Context, req *mcp.ElicitationCompleteNotificationRequest) {
			if ss == nil {
				return
			}
			if err := ss.NotifyElicitationComplete(context.Background(), req.Params); err != nil {
				s.p.log.Debug("forwarding elicitation complete", "session", s.id, "err", err)
			}
		},
	}
	if caps.Sampling != nil {
		opts.CreateMessageWithToolsHandler = func(ctx context.Context, req *mcp.CreateMessageWithToolsRequest) (*mcp.CreateMessageWithToolsResult, error) {
			if sl.onlySpeculative() {
				return nil, errSpeculativeUserRequest
			}
			rctx, cancel := s.relate(ctx, nil)
			defer cancel()
			return ss.CreateMessageWithTools(rctx, req.Params)
		}
	}
	c := mcp.NewClient(&mcp.Implementation{Name: s.clientName(), Version: s.clientVersion()}, opts)
	// roots/list is answered by the agent, not by the client's own roots;
	// elicitation/create goes to the agent before the SDK's client checks
	// the schema (the agent judges it, as it would direct).
	c.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			switch method {
			case "roots/list":
				if caps.RootsV2 == nil {
					return nil, fmt.Errorf("%w: the client has no roots", errMethodNotFound)
				}
				rctx, cancel := s.relate(ctx, nil)
				defer cancel()
				params, _ := req.GetParams().(*mcp.ListRootsParams)
				return ss.ListRoots(rctx, params)
			case "elicitation/create":
				if caps.Elicitation == nil {
					return nil, fmt.Errorf("%w: the client does not elicit", errMethodNotFound)
				}
				if sl.onlySpeculative() {
					return nil, errSpeculativeUserRequest
				}
				rctx, cancel := s.relate(ctx, nil)
				defer cancel()
				return ss.Elicit(rctx, req.GetParams().(*mcp.ElicitParams))
			}
			return next(ctx, method, req)
		}
	})
	c.AddSendingMiddleware(sendRaw)
	return c
}

// downstream returns the SDK session a message about the downstream
// request of ctx (see relate) goes back on: the agent's session or, in a
// 2026-07-28 run, the request's own; nil if there is none.
func (s *session) downstream(ctx context.Context) *mcp.ServerSession {
	if s.ss != nil {
		return s.ss
	}
	ss, _ := ctx.Value(downSessionKey{}).(*mcp.ServerSession)
	return ss
}

// mirroredCaps are the agent's capabilities that ahead passes upstream
// (roots, sampling and elicitation are answered by the agent).
func (s *session) mirroredCaps() *mcp.ClientCapabilities {
	caps := &mcp.ClientCapabilities{}
	var down *mcp.ClientCapabilities
	if ip := s.initParams(); ip != nil {
		down = ip.Capabilities
	}
	if down != nil {
		caps.Experimental = maps.Clone(down.Experimental)
		caps.Extensions = maps.Clone(down.Extensions)
		caps.RootsV2 = down.RootsV2
		caps.Sampling = down.Sampling
		caps.Elicitation = down.Elicitation
	}
	return caps
}

// clientName and clientVersion pass the agent's identity upstream.
func (s *session) clientName() string {
	if ip := s.initParams(); ip != nil && ip.ClientInfo != nil && ip.ClientInfo.Name != "" {
		return ip.ClientInfo.Name
	}
	return s.p.opts.Name
}

func (s *session) clientVersion() string {
	if ip := s.initParams(); ip != nil && ip.ClientInfo != nil && ip.ClientInfo.Version != "" {
		return ip.ClientInfo.Version
	}
	return s.p.opts.Version
}

// What changed upstream.
const (
	listTools = 1 << iota
	listPrompts
	listResources
)

// upstreamChanged forgets the session's cached lists and tells the agent
// to list again.
func (s *session) upstreamChanged(up *upstream, what int) {
	s.mu.Lock()
	if what&listTools != 0 {
		s.tools = nil
	}
	if what&listPrompts != 0 {
		s.prompts = nil
	}
	if what&listResources != 0 {
		s.resources = nil
	}
	s.mu.Unlock()
	ctx := context.Background()
	if what&listTools != 0 {
		s.notify(ctx, "notifications/tools/list_changed", &mcp.ToolListChangedParams{})
	}
	if what&listPrompts != 0 {
		s.notify(ctx, "notifications/prompts/list_changed", &mcp.PromptListChangedParams{})
	}
	if what&listResources != 0 {
		s.notify(ctx, "notifications/resources/list_changed", &mcp.ResourceListChangedParams{})
	}
}

// notify sends a notification to the agent, as is: to the listens that
// asked for it when the agent speaks 2026-07-28 (listen.go), else on its
// session.
func (s *session) notify(ctx context.Context, method string, params mcp.Params) {
	if listened(method) && s.notifyListeners(method, params) {
		return
	}
	if s.ss == nil {
		// A 2026-07-28 run: a log message goes to the request it came
		// with, at the level that request asked (the SDK filters);
		// nobody else is told (the run's calls list again themselves).
		if lm, ok := params.(*mcp.LoggingMessageParams); ok && method == "notifications/message" {
			if ss := s.downstream(ctx); ss != nil {
				if err := ss.Log(ctx, lm); err != nil {
					s.p.log.Debug("forwarding a log message", "session", s.id, "err", err)
				}
			}
		}
		return
	}
	if err := notifyRaw(ctx, s.ss, method, params); err != nil {
		s.p.log.Debug("notifying downstream", "session", s.id, "method", method, "err", err)
	}
}

// capabilities returns the union of the live upstreams' capabilities: what
// the agent may use through ahead.
func (s *session) capabilities() (*mcp.ServerCapabilities, string, *mcp.Implementation) {
	caps := &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}}
	var instr []string
	var info *mcp.Implementation
	live := 0
	for _, sl := range s.slots {
		cs := sl.live()
		if cs == nil {
			continue
		}
		res := cs.InitializeResult()
		if res == nil {
			continue
		}
		live++
		info = res.ServerInfo
		if res.Instructions != "" {
			instr = append(instr, res.Instructions)
		}
		c := res.Capabilities
		if c == nil {
			continue
		}
		if c.Prompts != nil {
			if caps.Prompts == nil {
				caps.Prompts = &mcp.PromptCapabilities{}
			}
			caps.Prompts.ListChanged = caps.Prompts.ListChanged || c.Prompts.ListChanged
		}
		if c.Resources != nil {
			if caps.Resources == nil {
				caps.Resources = &mcp.ResourceCapabilities{}
			}
			caps.Resources.ListChanged = caps.Resources.ListChanged || c.Resources.ListChanged
			caps.Resources.Subscribe = caps.Resources.Subscribe || c.Resources.Subscribe
		}
		if c.Completions != nil {
			caps.Completions = &mcp.CompletionCapabilities{}
		}
		if c.Logging != nil {
			caps.Logging = &mcp.LoggingCapabilities{}
		}
		for k, v := range c.Experimental {
			if caps.Experimental == nil {
				caps.Experimental = make(map[string]any)
			}
			caps.Experimental[k] = v
		}
	}
	if live != 1 || len(s.slots) != 1 {
		info = nil
	}
	return caps, strings.Join(instr, "\n\n"), info
}
