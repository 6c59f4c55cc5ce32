package mcpproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ahead-dev/ahead/policy"
	"github.com/ahead-dev/ahead/sched"
)

// ErrUpstreamDown is returned (wrapped) for a call whose upstream is not
// running: it failed to start or crashed, and the next attempt is not due.
var ErrUpstreamDown = errors.New("upstream down")

// Upstream is one MCP server ahead fronts: a command speaking MCP on stdio
// (Command, Args, Env, Dir), or a streamable HTTP endpoint (URL, Headers).
type Upstream struct {
	// Name identifies the upstream in errors, logs and metrics. Required
	// and unique.
	Name string

	Command string
	Args    []string
	// Env is added to ahead's own environment for the command.
	Env map[string]string
	// Dir is the command's working directory; "" means ahead's.
	Dir string

	URL     string
	Headers map[string]string

	// Transport, if set, replaces Command and URL: it returns a fresh
	// transport for each connection (tests use in-memory transports).
	Transport func() (mcp.Transport, error)

	// Prefix is prepended to the upstream's tool names downstream, to keep
	// the tools of several upstreams apart; "" means none.
	Prefix string
	// TrustAnnotations lets the tools' annotations (readOnlyHint,
	// openWorldHint) feed the default speculation policy; see
	// AnnotationPolicy.
	TrustAnnotations bool
	// Limits are the upstream's slots and rate for the scheduler.
	Limits sched.Limits
}

// pathSpace says how the upstream's path arguments name files: a command
// runs on this machine, in Dir or ahead's own working directory, so its
// relative paths resolve there and its symlinks can be resolved; of a
// remote server ahead knows neither (policy.PathSpace).
func (u *Upstream) pathSpace() policy.PathSpace {
	if u.Command == "" {
		return policy.PathSpace{}
	}
	root, err := filepath.Abs(u.Dir) // "" is ahead's working directory
	if err != nil {
		return policy.PathSpace{Local: true}
	}
	return policy.PathSpace{Root: root, Local: true}
}

func (u *Upstream) validate() error {
	n := 0
	if u.Command != "" {
		n++
	}
	if u.URL != "" {
		n++
	}
	if u.Transport != nil {
		n++
	}
	switch {
	case u.Name == "":
		return errors.New("upstream without a name")
	case n == 0:
		return fmt.Errorf("upstream %q: needs a command or a url", u.Name)
	case n > 1 && u.Transport == nil:
		return fmt.Errorf("upstream %q: has both a command and a url", u.Name)
	}
	return nil
}

// transport returns a new transport to the upstream. Stdio commands write
// their stderr to stderr (the agent's log, as when it launches them).
func (u *Upstream) transport(stderr io.Writer) (mcp.Transport, error) {
	switch {
	case u.Transport != nil:
		return u.Transport()
	case u.Command != "":
		cmd := exec.Command(u.Command, u.Args...)
		cmd.Dir = u.Dir
		cmd.Stderr = stderr
		if len(u.Env) > 0 {
			cmd.Env = os.Environ()
			for _, k := range slices.Sorted(maps.Keys(u.Env)) {
				cmd.Env = append(cmd.Env, k+"="+u.Env[k])
			}
		}
		// A short grace period: an upstream that ignores its closed stdin
		// for longer is terminated, so a session's end never waits long.
		// Its answers counted (stdio.go).
		return &commandTransport{cmd: cmd, terminate: 2 * time.Second}, nil
	default:
		base := http.DefaultTransport
		if len(u.Headers) > 0 {
			base = headerTransport{base: base, headers: u.Headers}
		}
		// Its answers counted and bounded (budget.go).
		hc := &http.Client{Transport: budgetTransport{base: base}}
		return &mcp.StreamableClientTransport{Endpoint: u.URL, HTTPClient: hc}, nil
	}
}

// headerTransport adds the configured headers (an API key, say) to every
// request to an HTTP upstream.
type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
}

func (t headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	for k, v := range t.headers {
		req.Header.Set(k, v)
	}
	return t.base.RoundTrip(req)
}

// slot is one downstream session's connection to one upstream: its current
// client session, and the restart backoff after failures. The hub of an
// HTTP upstream is a slot too, of no session (stateless.go): while the
// upstream is stateless, the sessions' slots hand out its connection.
type slot struct {
	s   *session
	up  *upstream
	hub bool

	mu        sync.Mutex // protects everything below
	cs        *mcp.ClientSession
	starting  chan struct{} // closed when the start in progress ends
	started   time.Time
	failures  int       // consecutive failures (start errors, early crashes)
	retryAt   time.Time // no start before this
	lastErr   error     // why the upstream is down
	starts    int       // connections made, for list refreshes after restarts
	barrier   *barrier  // of the current connection (see order.go)
	authCalls int       // authoritative calls in flight
	specCalls int       // speculative calls in flight
	closed    bool
}

// get returns the slot's live client session, starting (or restarting) the
// upstream if needed. Concurrent callers share one start; a caller that
// gives up (ctx) leaves the start running for the others.
func (sl *slot) get(ctx context.Context) (*mcp.ClientSession, error) {
	if h := sl.up.hub; h != nil && !sl.hub {
		// The hub first: it learns whether the upstream is stateless.
		if cs, err := h.get(ctx); !errors.Is(err, errSessions) {
			return cs, err
		}
	}
	for {
		sl.mu.Lock()
		if sl.closed {
			sl.mu.Unlock()
			return nil, fmt.Errorf("upstream %q: %w", sl.up.Name, errSessionGone)
		}
		if sl.hub && sl.up.eraOf() == eraSessions {
			sl.mu.Unlock()
			return nil, errSessions
		}
		if sl.cs != nil {
			cs := sl.cs
			sl.mu.Unlock()
			return cs, nil
		}
		if ch := sl.starting; ch != nil {
			sl.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		if now := sl.s.p.now(); now.Before(sl.retryAt) {
			err := fmt.Errorf("upstream %q: %w (%v); next start in %s", sl.up.Name, ErrUpstreamDown,
				sl.lastErr, sl.retryAt.Sub(now).Round(time.Millisecond))
			sl.mu.Unlock()
			return nil, err
		}
		ch := make(chan struct{})
		sl.starting = ch
		sl.mu.Unlock()
		sl.s.p.wg.Go(func() { sl.start(ch) })
	}
}

// start connects to the upstream; it runs in its own goroutine so that a
// caller's cancellation does not abort a start others wait for.
func (sl *slot) start(done chan struct{}) {
	p := sl.s.p
	ctx, cancel := context.WithTimeout(p.ctx, p.opts.StartTimeout)
	defer cancel()
	cs, err := sl.connect(ctx)
	if err == nil {
		sl.up.reached(cs, sl.hub)
		if sl.hub && !stateless(cs) {
			// It keeps sessions: this one is ahead's, not an agent's.
			// Each session connects on its own, as before.
			cs.Close()
			p.log.Debug("upstream keeps sessions: a connection per session", "upstream", sl.up.Name,
				"revision", cs.InitializeResult().ProtocolVersion)
			sl.mu.Lock()
			sl.starting = nil
			sl.mu.Unlock()
			close(done)
			return
		}
	}

	sl.mu.Lock()
	sl.starting = nil
	if err == nil && sl.closed {
		sl.mu.Unlock()
		cs.Close()
		close(done)
		return
	}
	restarted := false
	if err != nil {
		sl.failLocked(fmt.Errorf("starting: %w", err))
	} else {
		sl.cs = cs
		sl.started = p.now()
		sl.starts++
		restarted = sl.starts > 1
		p.wg.Go(func() { sl.watch(cs) })
	}
	sl.mu.Unlock()
	close(done)
	if err != nil {
		p.log.Warn("upstream failed to start", "upstream", sl.up.Name, "session", sl.s.id, "err", err)
		return
	}
	p.log.Debug("upstream connected", "upstream", sl.up.Name, "session", sl.s.id,
		"revision", cs.InitializeResult().ProtocolVersion, "shared", sl.hub)
	if restarted {
		// The new process may offer other tools than the dead one did.
		p.log.Info("upstream restarted", "upstream", sl.up.Name, "session", sl.s.id)
		if sl.hub {
			for _, s := range p.liveSessions() {
				s.upstreamChanged(sl.up, listTools|listPrompts|listResources)
			}
		} else {
			sl.s.upstreamChanged(sl.up, listTools|listPrompts|listResources)
		}
	}
}

// failLocked records a failure and schedules the next start with
// exponential backoff.
func (sl *slot) failLocked(err error) {
	p := sl.s.p
	sl.failures++
	d := p.opts.BackoffMin << min(sl.failures-1, 20)
	if d <= 0 || d > p.opts.BackoffMax {
		d = p.opts.BackoffMax
	}
	sl.lastErr = err
	sl.retryAt = p.now().Add(d)
}

// watch waits for the upstream connection to end and marks the slot down.
func (sl *slot) watch(cs *mcp.ClientSession) {
	err := cs.Wait()
	p := sl.s.p
	sl.mu.Lock()
	if sl.cs != cs {
		sl.mu.Unlock()
		return
	}
	sl.cs = nil
	if sl.closed {
		sl.mu.Unlock()
		return
	}
	if p.now().Sub(sl.started) >= p.opts.BackoffMax {
		sl.failures = 0 // it ran well for a long time: this is a fresh failure
	}
	why := "connection closed"
	if err != nil {
		why = err.Error()
	}
	sl.failLocked(fmt.Errorf("crashed: %s", why))
	retry := sl.retryAt.Sub(p.now())
	sl.mu.Unlock()
	p.log.Warn("upstream crashed", "upstream", sl.up.Name, "session", sl.s.id, "err", why, "restart_in", retry)
}

// connect starts the upstream and initializes an MCP client session with
// the downstream client's capabilities, asking for the agent's revision. An
// upstream that refuses the handshake of that revision but speaks
// 2026-07-28 (a server of the new revision only) is reached with 2026-07-28
// instead, the SDK's client carrying the agent's identity and capabilities
// in each request's _meta, as a hub's calls do (stateless.go); the
// upstream remembers it, so later sessions ask for 2026-07-28 at once.
func (sl *slot) connect(ctx context.Context) (*mcp.ClientSession, error) {
	if sl.hub {
		// Discover first; the SDK falls back to initialize.
		return sl.dial(ctx, revisionStateless)
	}
	version := sl.s.protocolVersion()
	if sl.up.discovers() {
		version = revisionStateless
	}
	cs, err := sl.dial(ctx, version)
	if err == nil || version >= revisionStateless || !refusedHandshake(err) {
		return cs, err
	}
	cs, err2 := sl.dial(ctx, revisionStateless)
	if err2 != nil {
		return nil, errors.Join(err, fmt.Errorf("discovering %s: %w", revisionStateless, err2))
	}
	if stateless(cs) {
		sl.s.p.log.Info("upstream refuses the handshake: reached with "+revisionStateless, "upstream", sl.up.Name,
			"session", sl.s.id, "asked", version, "err", err)
		sl.up.mu.Lock()
		sl.up.skipHandshake = true
		sl.up.mu.Unlock()
	}
	return cs, nil
}

// refusedHandshake reports whether err is the upstream's answer refusing
// the initialize handshake (a JSON-RPC error: an unsupported revision, or
// no such method), not a failure to reach it.
func refusedHandshake(err error) bool {
	_, ok := errors.AsType[*jsonrpc.Error](err)
	return ok
}

// discovers reports whether u refused the handshake and is reached with
// 2026-07-28 (connect).
func (u *upstream) discovers() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.skipHandshake
}

// dial makes one connection to the upstream asking for version.
func (sl *slot) dial(ctx context.Context, version string) (*mcp.ClientSession, error) {
	t, err := sl.up.transport(sl.s.p.opts.Stderr)
	if err != nil {
		return nil, err
	}
	b := newBarrier()
	if _, streamable := t.(*mcp.StreamableClientTransport); !streamable {
		t = orderedTransport{t, b}
	}
	var client *mcp.Client
	if sl.hub {
		client = sl.s.p.newHubClient(sl)
	} else {
		client = sl.s.newClient(sl)
	}
	client.AddReceivingMiddleware(b.middleware, sl.s.p.acks.middleware)
	cs, err := client.Connect(ctx, t, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		return nil, err
	}
	sl.up.mu.Lock()
	sl.up.connections++
	sl.up.mu.Unlock()
	sl.mu.Lock()
	sl.barrier = b
	sl.mu.Unlock()
	return cs, nil
}

// live returns the current client session without starting one.
func (sl *slot) live() *mcp.ClientSession {
	if h := sl.sharing(); h != nil {
		return h.live()
	}
	sl.mu.Lock()
	defer sl.mu.Unlock()
	return sl.cs
}

// due reports whether the slot is down and may be started now.
func (sl *slot) due() bool {
	if h := sl.sharing(); h != nil {
		return h.due()
	}
	sl.mu.Lock()
	defer sl.mu.Unlock()
	return !sl.closed && sl.cs == nil && sl.starting == nil && !sl.s.p.now().Before(sl.retryAt)
}

// close ends the slot's connection for good.
func (sl *slot) close() {
	sl.mu.Lock()
	sl.closed = true
	cs := sl.cs
	sl.cs = nil
	sl.mu.Unlock()
	if cs != nil {
		cs.Close()
	}
}

// track counts a call in flight on the slot, authoritative or speculative,
// and returns the function that ends it.
func (sl *slot) track(speculative bool) func() {
	sl.mu.Lock()
	if speculative {
		sl.specCalls++
	} else {
		sl.authCalls++
	}
	sl.mu.Unlock()
	return func() {
		sl.mu.Lock()
		if speculative {
			sl.specCalls--
		} else {
			sl.authCalls--
		}
		sl.mu.Unlock()
	}
}

// onlySpeculative reports whether every call in flight is speculative: a
// request from the upstream to the user (sampling, elicitation) can then
// only come from work the agent did not ask for, and is refused.
func (sl *slot) onlySpeculative() bool {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	return sl.specCalls > 0 && sl.authCalls == 0
}

// settle waits until the notifications the slot's connection has read so
// far have been forwarded (see order.go).
func (sl *slot) settle(ctx context.Context) {
	if h := sl.sharing(); h != nil {
		h.settle(ctx)
		return
	}
	sl.mu.Lock()
	b := sl.barrier
	sl.mu.Unlock()
	if b != nil {
		b.wait(ctx)
	}
}
