package engine

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/ahead-dev/ahead/backend"
	"github.com/ahead-dev/ahead/callkey"
	"github.com/ahead-dev/ahead/policy"
	"github.com/ahead-dev/ahead/predict"
	"github.com/ahead-dev/ahead/sched"
	"github.com/ahead-dev/ahead/trace"
)

// Errors returned by Call (wrapped, test with errors.Is).
var (
	// ErrUnknownTool: no backend serves the tool.
	ErrUnknownTool = backend.ErrUnknownTool
	// ErrInvalidArgs: the arguments are not a canonicalisable JSON object.
	ErrInvalidArgs = callkey.ErrInvalidArgs
	// ErrClosed: the engine is shut down.
	ErrClosed = errors.New("engine: closed")
)

// Source says how an authoritative call was served.
type Source string

const (
	// Executed: run authoritatively, no speculative counterpart helped.
	Executed Source = "executed"
	// Reused: a completed speculative result was handed over.
	Reused Source = "reused"
	// Promoted: a queued or running speculative execution became the
	// authoritative one.
	Promoted Source = "promoted"
	// Joined is in orphan.go.
)

// Result is the outcome of an authoritative call.
type Result struct {
	Tool   string
	Status trace.Status
	// Output is the tool's output as the backend returned it.
	Output string
	// Raw is the backend's front-specific result, if any (see
	// backend.Response.Raw).
	Raw    any
	Source Source
	// Saved is the tool time the agent did not wait thanks to speculation.
	Saved time.Duration
	// Seq is the call's position in its session.
	Seq int
}

// Recorder stores events (the trace store). Record must not block for long.
type Recorder interface {
	Record(ev trace.Event) error
}

// Linker links a session to another the same agent works in, on exact
// evidence: an authoritative call in session that was first seen elsewhere
// (a call the model emitted in a gateway session, before the agent made
// it). It returns the session to fold into this one, once; ok is false when
// there is none, or when several could match. gateway.Linker is one.
type Linker interface {
	Link(session string, key callkey.Key) (from string, ok bool)
}

// Fleet shares an engine's writes with the other replicas of a fleet
// (package fleet). Announce publishes a write on a backend whose state is
// shared, with what it may change; the engine calls it before it forwards
// the write, and forwards the write whatever it returns (an announcement
// that failed is the fleet's to make late). Completed announces the write
// again once it has completed, before the agent has its result: what other
// replicas speculated while it ran may have read the old state. Fence returns nil once the replica has applied every write other
// replicas announced before it was called; the engine calls it before it
// hands over a speculative result that other sessions' writes can reach,
// and serves the call as a miss when it fails. The fleet applies the writes
// of others through Engine.Invalidate.
type Fleet interface {
	Announce(ctx context.Context, backend string, ef policy.Effect) error
	Completed(ctx context.Context, backend string, ef policy.Effect) error
	Fence(ctx context.Context, backend string) error
}

// Backend is a backend with its capacity, as configured.
type Backend struct {
	Backend backend.Backend
	// Tools lists the tools it serves, for the default router. A backend
	// with no tools serves every tool no other backend lists, if it is the
	// only backend without a list.
	Tools  []string
	Limits sched.Limits
	// PerSession declares that each session sees only its own data (a
	// sandbox per session, the replay benchmark): a write there can only
	// change what the writing session reads. False (the default) means
	// the state is shared, so a write invalidates speculative reads in
	// every session.
	PerSession bool
	// Paths says how the backend's path arguments (`as: path` in the
	// policy) name files: its root for relative paths, and whether it runs
	// on this machine, so that symlinks are resolved (policy.PathSpace).
	// The zero value knows neither: a relative and an absolute path then
	// conflict, and paths compare by their elements.
	Paths policy.PathSpace
}

// Options configure an Engine. The zero value of each field is valid and
// documented.
type Options struct {
	// Backends maps backend names to backends; with none, every call
	// fails with ErrUnknownTool.
	Backends map[string]Backend
	// Route returns the backend of a tool; nil means the tools listed in
	// Backends (and the backend without a list, if any, for the rest).
	Route func(tool string) (backendName string, ok bool)
	// Policy decides what may be speculated; nil denies all speculation.
	Policy *policy.Policy
	// Predictor guesses the next calls; nil predicts nothing.
	Predictor predict.Predictor
	// Recorder stores events; nil records nothing.
	Recorder Recorder
	// Linker, if set, is asked about every authoritative call; a session
	// it names is folded into the call's session (Join) before the call
	// looks for its speculative counterpart, so that work started in the
	// other session (a call complete in the model's stream) serves it.
	// Nil links nothing.
	Linker Linker
	// Fleet, if set, announces this engine's writes to other replicas
	// and fences before reuse (see Fleet); nil means a replica alone.
	Fleet Fleet
	// Registerer receives the Prometheus metrics; nil means none.
	Registerer prometheus.Registerer
	// TracerProvider receives OpenTelemetry spans: "ahead.call" for each
	// authoritative call and "ahead.speculate" for each speculative
	// execution. Nil means no spans (and no cost).
	TracerProvider oteltrace.TracerProvider
	// Logger logs problems; nil means slog.Default().
	Logger *slog.Logger
	// SessionEnded, if set, is called (outside the engine's lock) with the
	// id of every session the engine drops: EndSession, idle timeout,
	// MaxSessions. What a front keeps per session (an MCP upstream
	// connection opened for an HTTP API session) ends with it. Nil means
	// nothing is told.
	SessionEnded func(session string)

	// SpecBudget caps concurrent speculative executions over all sessions
	// and backends; 0 means 32. Speculation only ever takes capacity real
	// calls leave free (backend reserves, preemption), so the budget bounds
	// wasted backend work, not latency; it must still let a few dozen
	// sessions each run ahead the batch of calls its agent is about to make
	// (8 throttled 16 concurrent tau2 sessions to 0.52 of the stall an
	// oracle hides, against 0.66 with 32).
	SpecBudget int
	// MinProbability ignores predictions less likely than this; 0 means
	// 0.02. Amplification, not this floor, is what bounds the waste.
	MinProbability float64
	// Amplification caps the speculative executions started per
	// authoritative call, on average: every call earns this many, every
	// speculative execution spends one (given back if it never runs), and
	// up to AmplificationBurst can be saved up for the moments that take
	// many at once (a session start, a list the agent is about to fetch).
	// While less than half the burst is saved up, the probability a
	// prediction needs rises from MinProbability towards 0.5, so a scarce
	// budget declines the least likely work wherever it comes from. 0
	// means 2.9: three executions per call is the most issue 10 lets
	// speculation spend, and 2.9 keeps the average under it with a
	// full burst spent over a thousand calls (on the held-out tau2
	// replay, 2.5 hid 0.73-0.75 of what an oracle hides at 2.54
	// executions per call, 2.9 hid 0.76-0.77 at 2.92); negative means
	// no cap.
	Amplification float64
	// AmplificationBurst is how many unspent executions can be saved up;
	// 0 means 64.
	AmplificationBurst float64
	// DefaultTTL is how long a speculative result stays reusable for tools
	// whose rule sets none. 0 means a minute for shared results and, for
	// the others, twice the 95th percentile of the agents' recent think
	// times (at least DefaultThink, at most a minute; four times
	// DefaultThink until 16 are measured). It is the only
	// bound on writes ahead does not see.
	DefaultTTL time.Duration
	// IdleTimeout drops a session (and its work) idle this long; 0 means
	// 10 min.
	IdleTimeout time.Duration
	// DefaultDuration is the expected tool duration before any is
	// measured; 0 means 500 ms.
	DefaultDuration time.Duration
	// DefaultThink is the expected think time before any is measured;
	// 0 means 1.8 s.
	DefaultThink time.Duration
	// StartDeadline is how long a queued speculative job may wait to
	// start; 0 means the tool's expected think time (a later start
	// cannot finish before the call arrives anyway), at least 100 ms.
	StartDeadline time.Duration
	// MaxSessionEntries and MaxSessionBytes bound one session's
	// speculative entries; 0 means 64 entries and 16 MiB.
	MaxSessionEntries int
	MaxSessionBytes   int64
	// MaxEntries bounds all speculative entries; 0 means 4096.
	MaxEntries int
	// MaxBytes bounds the memory of all sessions: their speculative
	// entries, their conversation windows and served calls, and what the
	// predictor keeps for them if it says (SessionSizer). Over it, the
	// lowest-utility results and the least recently active idle sessions
	// go (see enforceBudgetLocked). 0 means 256 MiB.
	MaxBytes int64
	// MaxSessions bounds the sessions kept at once; a new session beyond
	// it drops the least recently active idle one (its work cancelled, its
	// predictor state forgotten). 0 means 10,000.
	MaxSessions int
	// MaxMessageBytes bounds the text of a session's conversation window
	// (Message, Conversation); 0 means 64 KiB.
	MaxMessageBytes int64
	// SweepInterval is how often expired results and idle sessions are
	// dropped; 0 means 1 s.
	SweepInterval time.Duration
	// AdoptWindow is how long after it finished the result of a call
	// whose requester left while it ran may still be handed to the same
	// call re-issued in its session (Source Joined, orphan.go); for a read,
	// no longer than the tool's speculative results live. 0 means 10 s;
	// negative: never joined (an orphan still runs to its end).
	AdoptWindow time.Duration
}

func (o Options) withDefaults() Options {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.SpecBudget <= 0 {
		o.SpecBudget = 32
	}
	if o.MinProbability <= 0 {
		o.MinProbability = 0.02
	}
	if o.Amplification == 0 {
		o.Amplification = 2.9
	}
	if o.AmplificationBurst <= 0 {
		o.AmplificationBurst = 64
	}
	def(&o.IdleTimeout, 10*time.Minute)
	def(&o.DefaultDuration, 500*time.Millisecond)
	def(&o.DefaultThink, 1800*time.Millisecond)
	def(&o.SweepInterval, time.Second)
	if o.AdoptWindow == 0 {
		o.AdoptWindow = 10 * time.Second
	}
	if o.MaxSessionEntries <= 0 {
		o.MaxSessionEntries = 64
	}
	if o.MaxSessionBytes <= 0 {
		o.MaxSessionBytes = 16 << 20
	}
	if o.MaxEntries <= 0 {
		o.MaxEntries = 4096
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = 256 << 20
	}
	if o.MaxSessions <= 0 {
		o.MaxSessions = 10000
	}
	if o.MaxMessageBytes <= 0 {
		o.MaxMessageBytes = 64 << 10
	}
	return o
}

// Engine serves authoritative calls and speculates. Create it with New and
// stop it with Close.
type Engine struct {
	opts       Options
	sched      *sched.Scheduler
	backends   map[string]backend.Backend
	routes     map[string]string           // tool → backend, for the default router
	fallback   string                      // backend for unlisted tools
	perSession map[string]bool             // backends whose state is per session
	spaces     map[string]policy.PathSpace // how each backend's paths name files
	metrics    *metrics
	tracer     oteltrace.Tracer // nil: no spans
	sharer     ResultSharer     // Options.Fleet, if it shares results; nil otherwise
	policy     atomic.Pointer[policy.Policy]

	debug bool // the logger takes debug lines

	// mu guards st: the engine's state is read and changed only between
	// e.lock() and e.unlock(), the one door (state.go).
	mu sync.Mutex
	st state

	stop chan struct{}
	wg   sync.WaitGroup

	// life ends when Close begins: it cuts the orphans (orphan.go), the
	// calls whose requesters left while they ran, which Close then waits
	// for in orphans.
	life    context.Context
	endLife context.CancelFunc
	orphans sync.WaitGroup
}

// New returns a running Engine. The options are copied; nil means the
// zero Options: no backends (every call fails with ErrUnknownTool), no
// policy (nothing is speculated), every bound at its documented default.
func New(o *Options) *Engine {
	var opts Options
	if o != nil {
		opts = *o
	}
	opts = opts.withDefaults()
	e := &Engine{
		opts:       opts,
		backends:   make(map[string]backend.Backend),
		routes:     make(map[string]string),
		perSession: make(map[string]bool),
		spaces:     make(map[string]policy.PathSpace),
		metrics:    newMetrics(opts.Registerer),
		stop:       make(chan struct{}),
		st:         newState(opts),
	}
	e.life, e.endLife = context.WithCancel(context.Background())
	limits := make(map[string]sched.Limits)
	var unlisted []string
	for name, b := range opts.Backends {
		e.backends[name] = b.Backend
		limits[name] = b.Limits
		e.perSession[name] = b.PerSession
		e.spaces[name] = b.Paths
		if len(b.Tools) == 0 {
			unlisted = append(unlisted, name)
		}
		for _, t := range b.Tools {
			e.routes[t] = name
		}
	}
	if len(unlisted) == 1 {
		// With several backends without a tools list, which would serve
		// an unlisted tool is ambiguous: none does (set Route to decide).
		e.fallback = unlisted[0]
	}
	if rs, ok := opts.Fleet.(ResultSharer); ok {
		e.sharer = rs
	}
	e.debug = opts.Logger.Enabled(context.Background(), slog.LevelDebug)
	e.policy.Store(opts.Policy)
	if opts.TracerProvider != nil {
		e.tracer = opts.TracerProvider.Tracer("github.com/ahead-dev/ahead/engine")
	}
	e.sched = sched.New(&sched.Options{Backends: limits, SpecBudget: opts.SpecBudget})
	e.metrics.collectQueues(e.sched)
	e.wg.Go(e.sweeper)
	return e
}

// Close cancels all speculative work, waits for the engine's goroutines and
// refuses further calls. Authoritative calls in progress finish.
func (e *Engine) Close() {
	e.lock()
	if e.st.closed {
		e.unlock()
		return
	}
	e.st.closed = true
	for _, s := range e.st.sessions {
		e.dropSessionLocked(s, OutcomeCancelled)
	}
	for _, en := range e.st.shared {
		e.removeLocked(en, OutcomeCancelled)
	}
	e.unlock()
	// Calls whose requesters left are cut, then awaited: they record.
	e.endLife()
	e.orphans.Wait()
	close(e.stop)
	e.sched.Close()
	e.wg.Wait()
	// Speculative runs that were cancelled above have returned now and
	// settled; write their records.
	e.lock()
	e.unlock()
}

// SetPolicy replaces the policy, for calls from now on. Speculative work
// the new policy no longer allows at its level is cancelled; results
// already handed out stay handed out. (The MCP proxy uses it when trusted
// upstreams announce new tools or annotations.) Nil denies everything.
func (e *Engine) SetPolicy(p *policy.Policy) {
	e.lock()
	e.policy.Store(p)
	drop := func(en *entry) {
		if p.Lookup(en.key.Tool).Level() < en.level {
			e.removeLocked(en, OutcomeCancelled)
		}
	}
	for _, s := range e.st.sessions {
		for _, en := range s.entries {
			drop(en)
		}
	}
	for _, en := range e.st.shared {
		drop(en)
	}
	e.unlock()
}

// Quiesce stops speculation for good while calls go on being served: the
// queued and running speculative work that no call has claimed is
// cancelled, and no new work is started (the predictor still observes
// every call, so it keeps learning). Servers call it when they begin to
// shut down: nothing would claim new speculation, and the calls still in
// flight should not share slots with it.
func (e *Engine) Quiesce() {
	e.lock()
	e.st.quiet = true
	for _, s := range e.st.sessions {
		for _, en := range s.entries {
			if !en.done {
				e.removeLocked(en, OutcomeCancelled)
			}
		}
	}
	for _, en := range e.st.shared {
		if !en.done {
			e.removeLocked(en, OutcomeCancelled)
		}
	}
	e.unlock()
}

// route returns the backend of tool.
func (e *Engine) route(tool string) (string, backend.Backend, bool) {
	var name string
	if e.opts.Route != nil {
		n, ok := e.opts.Route(tool)
		if !ok {
			return "", nil, false
		}
		name = n
	} else if n, ok := e.routes[tool]; ok {
		name = n
	} else if e.fallback != "" {
		name = e.fallback
	} else {
		return "", nil, false
	}
	b, ok := e.backends[name]
	return name, b, ok
}
