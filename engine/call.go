package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"time"

	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/ahead-dev/ahead/backend"
	"github.com/ahead-dev/ahead/callkey"
	"github.com/ahead-dev/ahead/policy"
	"github.com/ahead-dev/ahead/trace"
)

// Step 1 of a call, accept: Call makes the call's key, routes it, folds a
// linked session in (link.go), waits for the session's pending prediction
// (after.go), opens the step, applies the hazard of a write on arrival
// (hazard.go) and claims the call's speculative counterpart (reuse.go),
// all in one stay inside the door (state.go). Step 2 serves it: from the
// counterpart (reuse.go) or by executing it (execute, below). Step 3,
// finish, accounts for it and records it (record.go); what it predicts is
// speculated after the agent has its result (after.go, speculate.go).

// Call serves an authoritative call of tool with args in session: from a
// completed speculative result (reuse), by promoting a queued or running
// speculative execution, or by executing it. A tool's own failure is a
// Result with Status error, not an error; errors are for calls that could
// not be served (unknown tool, invalid arguments, backend unreachable,
// ctx done).
func (e *Engine) Call(ctx context.Context, sessionID, tool string, args json.RawMessage) (Result, error) {
	return e.call(ctx, sessionID, tool, args, false)
}

// Continue serves an authoritative call that continues an earlier call of
// the same tool and args with something its arguments do not show: an MCP
// retry carrying the user's inputResponses for an input_required result.
// It is a call of its own: no speculative result of the call without that
// input may answer it, so it always executes (hazards, scheduling and
// recording are those of any call).
func (e *Engine) Continue(ctx context.Context, sessionID, tool string, args json.RawMessage) (Result, error) {
	return e.call(ctx, sessionID, tool, args, true)
}

// call serves Call and, with own set, Continue.
func (e *Engine) call(ctx context.Context, sessionID, tool string, args json.RawMessage, own bool) (Result, error) {
	key, err := callkey.Make(tool, args)
	if err != nil {
		return Result{}, fmt.Errorf("calling %s: %w", tool, err)
	}
	bname, b, ok := e.route(tool)
	if !ok {
		return Result{}, fmt.Errorf("%w %q", ErrUnknownTool, tool)
	}
	rule := e.policy.Load().Lookup(tool)
	canon := json.RawMessage(key.Args)
	var ef policy.Effect
	if !rule.IsReadOnly() {
		// Outside the lock: resolving paths may stat their folders.
		ef = rule.EffectIn(canon, e.spaces[bname])
	}
	if e.opts.Linker != nil {
		if from, ok := e.opts.Linker.Link(sessionID, key); ok {
			e.Join(from, sessionID)
		}
	}
	arrive := time.Now()

	e.lock()
	if e.st.closed {
		e.unlock()
		return Result{}, ErrClosed
	}
	s := e.sessionLocked(sessionID, arrive)
	// What earlier events of the session predict is speculated on before
	// this call looks for its counterpart (after.go).
	s, err = e.waitPredictedLocked(ctx, s, 0, arrive)
	if err != nil {
		e.unlock()
		return Result{}, fmt.Errorf("calling %s: %w", tool, err)
	}
	if !own && len(s.orphans) > 0 {
		// The same call, re-issued after its requester left (orphan.go).
		if fl := e.adoptLocked(s, key, arrive); fl != nil {
			fl.joined = true
			s.inflight++
			s.lastActive = arrive
			e.busyLocked(s)
			e.unlock()
			return e.join(ctx, s, fl, arrive)
		}
	}
	fenced := true
	if fbackend, ok := e.fenceWantedLocked(s, key, rule); ok && !own {
		// A speculative result other replicas' writes can reach: first
		// apply every write announced before this call (see Fleet).
		e.unlock()
		ferr := e.opts.Fleet.Fence(ctx, fbackend)
		e.lock()
		if e.st.closed {
			e.unlock()
			return Result{}, ErrClosed
		}
		s = e.sessionLocked(s.id, arrive)
		fenced = ferr == nil
		if !fenced {
			e.st.totals.Unfenced++
		}
	}
	if e.opts.Amplification > 0 {
		e.st.tokens = min(e.st.tokens+e.opts.Amplification, e.opts.AmplificationBurst)
	}
	think, thinkHeard := s.beginLocked(arrive)
	e.busyLocked(s)
	seq, step := s.seq, s.step
	s.seq++
	s.running[key]++
	if !rule.IsReadOnly() {
		e.invalidateLocked(s, bname, ef)
	}
	var en *entry
	if _, wanted := e.fenceWantedLocked(s, key, rule); !own && (fenced || !wanted) {
		en = e.claimLocked(s, key, rule, arrive)
	}
	// Without a result here, another replica's may serve it (shared.go).
	remote := !own && en == nil && e.lookupWanted(bname, rule)
	completion := e.st.disabled&ruleCompletion == 0
	epoch, ttl := e.st.writes, time.Duration(0)
	if rule.IsReadOnly() {
		ttl = min(e.ttlLocked(rule), e.opts.AdoptWindow)
	}
	e.unlock()
	announce := !rule.IsReadOnly() && e.opts.Fleet != nil && !e.perSession[bname]
	if announce {
		// Before the write reaches the backend, every replica may learn of
		// it; one that cannot be announced in time is forwarded anyway.
		if aerr := e.opts.Fleet.Announce(ctx, bname, ef); aerr != nil && e.debug {
			e.opts.Logger.Debug("announcing a write", "session", sessionID, "tool", tool, "err", aerr)
		}
	}

	call := &authCall{
		e: e, s: s, tool: tool, key: key, args: canon, rule: rule, effect: ef,
		backend: bname, seq: seq, step: step, think: think, thinkHeard: thinkHeard, arrive: arrive,
		remote: remote, own: own, epoch: epoch, ttl: ttl,
	}
	var span oteltrace.Span
	if e.tracer != nil {
		ctx, span = e.startCallSpan(ctx, call)
	}
	after := func(ctx context.Context, res Result, err error) {
		if announce && completion {
			// Again once it completed, as for this engine's own sessions
			// (call.finish): what other replicas speculated while it ran
			// may have read the old state. Done before the agent has the
			// result, so that a call it makes next on any replica is
			// fenced after it.
			_ = e.opts.Fleet.Completed(ctx, bname, ef)
		}
		if span != nil {
			endCallSpan(span, res, err)
		}
	}
	if keepsRunning(ctx) {
		// Its requester may leave while it runs (orphan.go).
		return e.serveOwned(ctx, call, b, en, after)
	}
	res, err := call.serve(ctx, b, en)
	call.finish(res, err)
	after(ctx, res, err)
	return res, err
}

// authCall is one authoritative call on its way through the engine.
type authCall struct {
	e       *Engine
	s       *session
	tool    string
	key     callkey.Key
	args    json.RawMessage // canonical
	rule    policy.Tool
	effect  policy.Effect // what it may change, unless read-only
	backend string
	seq     int
	step    int
	think   time.Duration
	// thinkHeard: the model side measured this step's think time
	// (Engine.ThinkTime), which already counts in Engine.thinks.
	thinkHeard bool
	arrive     time.Time
	remote     bool // may be served by another replica's result (shared.go)
	own        bool // a Continue: never joined, nor joins
	// epoch is state.writes when it arrived; ttl how long after it
	// finished a read may be joined, if orphaned (orphan.go).
	epoch uint64
	ttl   time.Duration
	// gate, when served on its own goroutine (serveOwned), says whether
	// the execution started, or its requester left before (gated).
	gate *atomic.Int32

	toolTime time.Duration // how long the tool ran (speculatively or not)
	executed bool          // ran authoritatively (its duration is a fresh sample)
}

func (c *authCall) serve(ctx context.Context, b backend.Backend, en *entry) (Result, error) {
	if en != nil {
		res, ok, err := c.fromSpeculation(ctx, en)
		if ok || err != nil {
			return res, err
		}
	}
	if c.remote {
		if res, ok := c.fromFleet(ctx); ok {
			return res, nil
		}
	}
	return c.execute(ctx, b)
}

func (c *authCall) execute(ctx context.Context, b backend.Backend) (Result, error) {
	req := backend.Request{Session: c.s.id, Tool: c.tool, Args: c.args}
	var resp backend.Response
	var err error
	serr := c.e.sched.Do(ctx, c.backend, c.s.id, func(ctx context.Context) {
		if !c.gated() {
			err = context.Canceled // its requester left before it started
			return
		}
		t0 := time.Now()
		resp, err = b.Call(ctx, req)
		c.toolTime = time.Since(t0)
	})
	if serr == nil {
		serr = err
	}
	if serr != nil {
		return Result{}, fmt.Errorf("calling %s: %w", c.tool, serr)
	}
	c.executed = true
	if resp.RetryAfter > 0 {
		c.e.sched.Backoff(c.backend, resp.RetryAfter)
	}
	return c.result(resp, Executed, 0), nil
}

func (c *authCall) result(resp backend.Response, src Source, saved time.Duration) Result {
	st := trace.StatusOK
	if resp.IsError {
		st = trace.StatusError
	}
	return Result{
		Tool:   c.tool,
		Status: st,
		Output: resp.Output,
		Raw:    resp.Raw,
		Source: src,
		Saved:  saved,
		Seq:    c.seq,
	}
}
