package mcpproxy

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ahead-dev/ahead/engine"
	"github.com/ahead-dev/ahead/policy"
)

// errSessionGone: the downstream session ended.
var errSessionGone = errors.New("session ended")

// Caller is what the proxy needs of the engine; *engine.Engine is one.
type Caller interface {
	Call(ctx context.Context, session, tool string, args json.RawMessage) (engine.Result, error)
	// Continue serves a retry that carries the user's input (see
	// engine.Engine.Continue).
	Continue(ctx context.Context, session, tool string, args json.RawMessage) (engine.Result, error)
	EndSession(session string)
}

var _ Caller = (*engine.Engine)(nil)

// Options configure a Proxy. Upstreams is required; the zero value of every
// other field is valid and documented.
type Options struct {
	Upstreams []Upstream
	// Name and Version are the downstream server's implementation; ""
	// means "ahead" and "dev". With a single upstream, its own server
	// info is passed through instead, so the agent sees the server it
	// configured.
	Name, Version string
	// Logger logs problems; nil means slog.Default().
	Logger *slog.Logger
	// Stderr receives the stderr of stdio upstreams; nil means os.Stderr.
	Stderr io.Writer
	// StartTimeout bounds an upstream's start and initialization; 0 means
	// 30 s (npx may download a package on first use).
	StartTimeout time.Duration
	// BackoffMin and BackoffMax bound the delay before restarting an
	// upstream after a failure; 0 means 250 ms and 30 s.
	BackoffMin, BackoffMax time.Duration
	// ReapInterval is how often sessions closed by the HTTP handler
	// (DELETE, idle timeout) are cleaned up; 0 means 1 s.
	ReapInterval time.Duration
	// SessionTimeout closes HTTP sessions idle this long; 0 means 30 min.
	SessionTimeout time.Duration
	// MaxSessions bounds the sessions held at once (ahead serve's
	// max_mcp_sessions): MCP clients' sessions of the older revisions,
	// 2026-07-28 runs (named or not), and sessions of other fronts that
	// call MCP tools; each may hold a connection (a process, for a
	// command upstream) to every upstream. A new session over the bound
	// takes the place of the least recently used idle one that is not an
	// MCP client's session (its upstream connections close, its
	// speculative work is dropped); if there is none, it is refused with
	// a JSON-RPC error that names the bound and says when to try again
	// (data.retry_after_ms). 0 means DefaultMaxSessions; negative, no
	// bound.
	MaxSessions int
	// MaxBodyBytes bounds a request body of Handler: a larger one is
	// answered 413 (issue 23: ahead serve's max_body). 0 means the SDK's
	// default, 4 MiB.
	MaxBodyBytes int64
	// Now is the clock; nil means time.Now (tests).
	Now func() time.Time
	// Policy is the operator's policy: the base of the rules derived
	// from trusted upstreams' annotations (AnnotationPolicy) when the
	// proxy keeps the engine's policy up to date (see Attach). Nil denies
	// everything the annotations do not allow.
	Policy *policy.Policy
}

// Proxy is an MCP server in front of MCP upstreams. Create it with New,
// attach the engine with Attach, serve with Serve (stdio and other
// transports) or Handler (streamable HTTP), and stop it with Close.
type Proxy struct {
	opts   Options
	log    *slog.Logger
	ups    []*upstream
	server *mcp.Server     // stdio, and the older revisions' sessions over HTTP
	runs   *mcp.Server     // 2026-07-28 over HTTP: stateless (era.go)
	ctx    context.Context // cancelled by Close; parent of upstream starts
	cancel context.CancelFunc

	mu       sync.Mutex // protects everything below
	eng      Caller
	sessions map[*mcp.ServerSession]*session
	byID     map[string]*session             // every session, the MCP clients' and the proxy's own (holdSession)
	routes   map[string]route                // downstream tool name → upstream, all sessions
	trusted  map[string]*mcp.ToolAnnotations // tools of trusted upstreams, by downstream name
	follow   func(*policy.Policy)            // the engine's SetPolicy, when annotations are followed
	linker   Linker                          // links a new-era call that names no run (SetLinker)
	closed   bool

	policyMu sync.Mutex // serialises policy updates, so the last one wins

	acks subAcks // upstream subscriptions waiting to be acknowledged (listen.go)

	budgets requestBudgets // of older clients' HTTP requests in flight (budget.go)

	wg sync.WaitGroup
}

// upstream is a configured upstream with its index.
type upstream struct {
	Upstream
	i int
	// hub is the connection that serves every session when the upstream
	// is stateless (stateless.go); nil for all but HTTP upstreams.
	hub *slot

	mu       sync.Mutex // protects everything below
	era      era
	revision string // the revision last negotiated
	// skipHandshake: a command or transport upstream refused the
	// handshake and spoke 2026-07-28 (upstream.go, connect)
	skipHandshake bool
	connections   int64 // connections made
	progress      map[string]progressRoute
	progressSeq   int64
	subs          map[string]map[*session]bool // resource URI → sessions subscribed through the hub
}

// route is where a downstream tool goes.
type route struct {
	up   *upstream
	tool string // the upstream's name for it
}

// New returns a Proxy for the upstreams of opts. It starts nothing:
// upstreams are started per downstream session. The options are copied;
// nil, like Options without upstreams, is an error: a proxy needs an
// upstream.
func New(o *Options) (*Proxy, error) {
	var opts Options
	if o != nil {
		opts = *o
	}
	if len(opts.Upstreams) == 0 {
		return nil, errors.New("mcpproxy: no upstreams")
	}
	if opts.Name == "" {
		opts.Name = "ahead"
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Stderr == nil {
		opts.Stderr = os.Stderr
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 30 * time.Second
	}
	if opts.BackoffMin <= 0 {
		opts.BackoffMin = 250 * time.Millisecond
	}
	if opts.BackoffMax <= 0 {
		opts.BackoffMax = 30 * time.Second
	}
	if opts.ReapInterval <= 0 {
		opts.ReapInterval = time.Second
	}
	if opts.SessionTimeout <= 0 {
		opts.SessionTimeout = 30 * time.Minute
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.MaxSessions == 0 {
		opts.MaxSessions = DefaultMaxSessions
	}
	p := &Proxy{
		opts:     opts,
		log:      opts.Logger,
		sessions: make(map[*mcp.ServerSession]*session),
		byID:     make(map[string]*session),
		routes:   make(map[string]route),
	}
	names := make(map[string]bool)
	for i, u := range opts.Upstreams {
		if err := u.validate(); err != nil {
			return nil, fmt.Errorf("mcpproxy: %w", err)
		}
		if names[u.Name] {
			return nil, fmt.Errorf("mcpproxy: two upstreams named %q", u.Name)
		}
		names[u.Name] = true
		up := &upstream{Upstream: u, i: i}
		if u.Transport == nil && u.URL != "" {
			up.hub = newHub(p, up)
		}
		p.ups = append(p.ups, up)
	}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	impl := &mcp.Implementation{Name: opts.Name, Version: opts.Version}
	p.server = mcp.NewServer(impl, &mcp.ServerOptions{
		Logger: discardLogger,
		// Every revision: an older client initializes (and gets a
		// session); a 2026-07-28 client over stdio discovers, its
		// process being the run (era.go).
		RootsListChangedHandler: p.rootsListChanged,
		// Capabilities are the upstreams', set in the initialize and
		// discover results; these are what the SDK's listen handler
		// may agree to, ahead having agreed first (listen.go).
		Capabilities:       listenCapabilities(),
		SubscribeHandler:   subscribeHandler,
		UnsubscribeHandler: unsubscribeHandler,
	})
	p.server.AddReceivingMiddleware(p.receive(false))
	p.server.AddSendingMiddleware(sendRaw, listenAck)
	p.runs = mcp.NewServer(impl, &mcp.ServerOptions{
		Logger:             discardLogger,
		Capabilities:       listenCapabilities(),
		SubscribeHandler:   subscribeHandler,
		UnsubscribeHandler: unsubscribeHandler,
	})
	p.runs.AddReceivingMiddleware(p.receive(true))
	p.runs.AddSendingMiddleware(sendRaw, listenAck)
	return p, nil
}

var discardLogger = slog.New(slog.DiscardHandler)

// Attach sets the engine tools/call goes through. It must be called once,
// before serving: the engine needs the proxy's backends to be built. If the
// engine can change its policy (SetPolicy) and some upstream is trusted,
// the proxy keeps the policy derived from annotations up to date as
// sessions list tools (tools/list_changed included).
func (p *Proxy) Attach(eng Caller) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.eng != nil {
		panic("mcpproxy: Attach called twice")
	}
	p.eng = eng
	if ps, ok := eng.(interface{ SetPolicy(*policy.Policy) }); ok && slices.ContainsFunc(p.ups, func(u *upstream) bool { return u.TrustAnnotations }) {
		p.follow = ps.SetPolicy
	}
}

// followsAnnotations reports whether the engine's policy follows trusted
// upstreams' annotations (see Attach).
func (p *Proxy) followsAnnotations() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.follow != nil
}

func (p *Proxy) engine() Caller {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.eng
}

func (p *Proxy) now() time.Time { return p.opts.Now() }

// Serve serves one downstream session over t (an agent's stdio: use
// &mcp.StdioTransport{}) until the client disconnects or ctx is done.
func (p *Proxy) Serve(ctx context.Context, t mcp.Transport) error {
	if p.engine() == nil {
		return errors.New("mcpproxy: Serve before Attach")
	}
	ss, err := p.server.Connect(ctx, t, nil)
	if err != nil {
		return fmt.Errorf("connecting downstream: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- ss.Wait() }()
	select {
	case err = <-done:
	case <-ctx.Done():
		ss.Close()
		err = <-done
	}
	p.endSession(ss)
	// The agent hanging up is the normal end of a session, whether it
	// closed between messages (EOF) or while a reply was being written
	// (a closed pipe).
	if ctx.Err() != nil || errors.Is(err, mcp.ErrConnectionClosed) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrClosedPipe) {
		return nil
	}
	return err
}

// Handler returns the streamable HTTP handler of the proxy (mount it at
// /mcp). It serves every revision on one endpoint: a 2026-07-28 request
// (its Mcp-Protocol-Version header) statelessly, in the run it names
// (era.go); anything else with the older revisions' sessions, which the
// handler closes on DELETE or after SessionTimeout idle and the proxy
// cleans up within ReapInterval.
func (p *Proxy) Handler() http.Handler {
	p.mu.Lock()
	start := p.eng != nil && !p.closed
	p.mu.Unlock()
	if start {
		p.wg.Go(p.reaper)
	}
	stateful := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return p.server },
		&mcp.StreamableHTTPOptions{Logger: discardLogger, SessionTimeout: p.opts.SessionTimeout,
			MaxRequestBodyBytes: p.opts.MaxBodyBytes})
	// serveRun answers most 2026-07-28 requests before this handler
	// sees them: its checks (runHTTPOK, readRunRequest) mirror what the
	// handler does with these options (no CrossOriginProtection, DNS
	// rebinding protection on); an option added here must be honoured
	// there too (PropagateRequestCancellation: serveRun keeps the request's
	// cancellation).
	//
	// A 2026-07-28 request's POST is its whole life: when its connection
	// breaks, its handler is told (PropagateRequestCancellation), so that
	// the engine drops the call if it has not started and orphans it if it
	// has, for the client's re-issue to join (engine/orphan.go). Without
	// it, the call would look live to the end and the re-issue run twice.
	stateless := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return p.runs },
		&mcp.StreamableHTTPOptions{Logger: discardLogger, Stateless: true, MaxRequestBodyBytes: p.opts.MaxBodyBytes,
			PropagateRequestCancellation: true})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if newEraHTTP(r) {
			r.Header.Del(budgetHeader) // served in r's context, budget and all
			if p.serveRun(w, r) {
				return
			}
			stateless.ServeHTTP(w, r)
			return
		}
		defer p.budgets.carry(r)()
		stateful.ServeHTTP(w, r)
	})
}

// SetLinker lets a 2026-07-28 tools/call that names no run join the run of
// the conversation whose model emitted it (see Linker). Call it before
// serving; nil (the default) links nothing.
func (p *Proxy) SetLinker(l Linker) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.linker = l
}

// reaper ends the state of sessions the server no longer has.
func (p *Proxy) reaper() {
	t := time.NewTicker(p.opts.ReapInterval)
	defer t.Stop()
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-t.C:
		}
		live := make(map[*mcp.ServerSession]bool)
		for ss := range p.server.Sessions() {
			live[ss] = true
		}
		var gone []*mcp.ServerSession
		p.mu.Lock()
		for ss := range p.sessions {
			if !live[ss] {
				gone = append(gone, ss)
			}
		}
		p.mu.Unlock()
		for _, ss := range gone {
			p.endSession(ss)
		}
		p.reapIdle()
	}
}

// Close ends every session, stops the upstreams and waits for the proxy's
// goroutines. The engine is not closed (it is the caller's).
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	var all []*mcp.ServerSession
	for ss := range p.sessions {
		all = append(all, ss)
	}
	var own []*session
	for id, s := range p.byID {
		if s.ss == nil {
			own = append(own, s)
			delete(p.byID, id)
		}
	}
	p.mu.Unlock()
	for _, ss := range all {
		ss.Close()
		p.endSession(ss)
	}
	for _, s := range own {
		s.close()
	}
	for _, u := range p.ups {
		if u.hub != nil {
			u.hub.close()
		}
	}
	p.cancel()
	p.wg.Wait()
	return nil
}

// sessionFor returns the state of a downstream session, creating it on
// first sight.
func (p *Proxy) sessionFor(ss *mcp.ServerSession) (*session, error) {
	p.mu.Lock()
	if s, ok := p.sessions[ss]; ok {
		p.mu.Unlock()
		return s, nil
	}
	if p.closed {
		p.mu.Unlock()
		return nil, errors.New("mcpproxy: closed")
	}
	victim, err := p.makeRoomLocked()
	if err != nil {
		p.mu.Unlock()
		return nil, err
	}
	id := ss.ID()
	if id == "" {
		id = "mcp-" + rand.Text()
	}
	s := newSession(p, id, ss)
	p.sessions[ss] = s
	p.byID[id] = s
	p.mu.Unlock()
	p.evict(victim)
	return s, nil
}

// holdSession returns the session a call of engine session id runs in:
// the MCP client's session of that id, else the proxy's own session for
// id, started on first use. An upstream connection belongs to ahead's
// session, whichever front opened it: a session of the HTTP API calling an
// MCP tool gets its own upstream connections, as an MCP client's session
// does, and keeps them until EndSession (the engine dropping the session:
// DELETE, idle timeout) or until it has had no call for SessionTimeout
// (the reaper: the bound for a speculative call racing with the session's
// end). Such sessions are at most the engine's sessions, plus those
// racing with their end, and at most MaxSessions with the MCP clients'.
//
// The session is held (never evicted to make room for another) until
// release is called: call it when the request or call is served.
func (p *Proxy) holdSession(id string) (s *session, release func(), err error) {
	p.mu.Lock()
	s, ok := p.byID[id]
	var victim *session
	if !ok {
		if p.closed {
			p.mu.Unlock()
			return nil, nil, fmt.Errorf("session %q: %w", id, errSessionGone)
		}
		if victim, err = p.makeRoomLocked(); err != nil {
			p.mu.Unlock()
			return nil, nil, err
		}
		s = newSession(p, id, nil)
		p.byID[id] = s
		p.log.Debug("upstream connections opened for a session without an MCP client", "session", id)
	}
	s.used = p.now()
	s.pins++
	p.mu.Unlock()
	p.evict(victim)
	return s, func() {
		p.mu.Lock()
		s.pins--
		p.mu.Unlock()
	}, nil
}

// EndSession ends the proxy's own session id (see holdSession): its
// upstream connections close. An MCP client's session ends with the
// client, not here; an unknown id does nothing.
func (p *Proxy) EndSession(id string) {
	p.mu.Lock()
	s, ok := p.byID[id]
	if ok && s.ss == nil {
		delete(p.byID, id)
	}
	p.mu.Unlock()
	if ok && s.ss == nil {
		s.close()
	}
}

// reapIdle ends the proxy's own sessions with no call in flight and none
// for SessionTimeout.
func (p *Proxy) reapIdle() {
	now := p.now()
	var idle []*session
	p.mu.Lock()
	for id, s := range p.byID {
		if s.ss == nil && s.pins == 0 && now.Sub(s.used) >= p.opts.SessionTimeout && !s.busy() {
			delete(p.byID, id)
			idle = append(idle, s)
		}
	}
	p.mu.Unlock()
	for _, s := range idle {
		s.close()
	}
}

// endSession drops a downstream session: its speculative work in the
// engine, and its upstream connections.
func (p *Proxy) endSession(ss *mcp.ServerSession) {
	p.mu.Lock()
	s, ok := p.sessions[ss]
	if ok {
		delete(p.sessions, ss)
		delete(p.byID, s.id)
	}
	eng := p.eng
	p.mu.Unlock()
	if !ok {
		return
	}
	if eng != nil {
		eng.EndSession(s.id)
	}
	s.close()
}

// addRoutes records where a session's tools go, for the engine's router
// and speculative calls. With several upstreams offering a name, the first
// configured wins, as in every session's listing.
func (p *Proxy) addRoutes(rs map[string]route) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for name, r := range rs {
		if old, ok := p.routes[name]; ok && old.up.i < r.up.i {
			continue
		}
		p.routes[name] = r
	}
}

func (p *Proxy) routeOf(tool string) (route, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r, ok := p.routes[tool]
	return r, ok
}

// fallbackRoute is where a tool no listing named goes: to the first
// upstream whose (non-empty) prefix it has, else to the first upstream
// without a prefix. That upstream answers for it as it would direct (most
// servers return an error result for a tool they do not have).
func (p *Proxy) fallbackRoute(tool string) (route, bool) {
	var bare *upstream
	for _, u := range p.ups {
		if u.Prefix == "" {
			if bare == nil {
				bare = u
			}
			continue
		}
		if name, ok := strings.CutPrefix(tool, u.Prefix); ok {
			return route{up: u, tool: name}, true
		}
	}
	if bare != nil {
		return route{up: bare, tool: tool}, true
	}
	return route{}, false
}

// BackendName returns the engine backend name of an upstream.
func BackendName(upstream string) string { return "mcp:" + upstream }

// Backends returns one engine backend per upstream, to build the engine
// with (together with Route).
func (p *Proxy) Backends() map[string]engine.Backend {
	m := make(map[string]engine.Backend, len(p.ups))
	for _, u := range p.ups {
		m[BackendName(u.Name)] = engine.Backend{Backend: &upstreamBackend{p: p, up: u}, Limits: u.Limits, Paths: u.pathSpace()}
	}
	return m
}

// Route is the engine's router for the proxy's tools: it knows the tools
// the sessions have listed, and the prefixes of the upstreams.
func (p *Proxy) Route(tool string) (string, bool) {
	if r, ok := p.routeOf(tool); ok {
		return BackendName(r.up.Name), true
	}
	if r, ok := p.fallbackRoute(tool); ok {
		return BackendName(r.up.Name), true
	}
	return "", false
}
