package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/ahead-dev/ahead/backend"
	"github.com/ahead-dev/ahead/callkey"
	"github.com/ahead-dev/ahead/policy"
	"github.com/ahead-dev/ahead/sched"
	"github.com/ahead-dev/ahead/trace"
)

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
	return c.execute(ctx, b)
}

// fromSpeculation serves the call from its claimed speculative entry: a
// completed result is reused; a queued or running one is promoted and
// awaited. It reports false if the speculation failed and the call must
// execute.
func (c *authCall) fromSpeculation(ctx context.Context, en *entry) (Result, bool, error) {
	e := c.e
	e.mu.Lock()
	if en.done {
		// claimLocked only hands out completed entries that are reusable.
		res := c.result(en.resp, Reused, en.finished.Sub(en.started))
		c.toolTime = en.finished.Sub(en.started)
		en.saved = c.toolTime // (a shared one's origins are credited once)
		if en.sess != nil {
			e.settleLocked(en, OutcomeReused)
		} else {
			en.reuses++
		}
		e.unlock()
		return res, true, nil
	}
	e.mu.Unlock()

	if !en.job.Promote(c.s.id) && en.job.State() != sched.Finished {
		// Preempted, cancelled or dropped: it brings nothing, and a
		// cancelled run may take the backend a while to return. Waiting
		// for it would make the call wait on speculation (issue 13).
		e.mu.Lock()
		why := OutcomeDropped
		switch {
		case en.job.State() == sched.Preempted:
			why = OutcomePreempted
		case en.ran:
			why = OutcomeCancelled
		}
		e.settleLocked(en, why)
		e.unlock()
		return Result{}, false, nil
	}
	select {
	case <-en.job.Done():
	case <-ctx.Done():
		// The caller left: nobody wants this execution any more.
		en.job.Cancel()
		e.mu.Lock()
		e.settleLocked(en, OutcomeCancelled)
		e.unlock()
		return Result{}, false, fmt.Errorf("calling %s: %w", c.tool, ctx.Err())
	}

	e.mu.Lock()
	defer e.unlock()
	if !en.done || en.err != nil || en.resp.IsError {
		// Dropped before it ran, or failed: never reuse an error result.
		why := OutcomeFailed
		if !en.ran {
			why = OutcomeDropped
		}
		e.settleLocked(en, why)
		return Result{}, false, nil
	}
	saved := time.Duration(0)
	if en.started.Before(c.arrive) {
		saved = c.arrive.Sub(en.started)
	}
	c.toolTime = en.finished.Sub(en.started)
	en.saved = saved
	e.settleLocked(en, OutcomePromoted)
	return c.result(en.resp, Promoted, saved), true, nil
}

func (c *authCall) execute(ctx context.Context, b backend.Backend) (Result, error) {
	req := backend.Request{Session: c.s.id, Tool: c.tool, Args: c.args}
	var resp backend.Response
	var err error
	serr := c.e.sched.Do(ctx, c.backend, c.s.id, func(ctx context.Context) {
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

// finish accounts for the call, records it, and queues it for the
// predictor (after.go), whose predictions are speculated on once the
// agent has its result.
func (c *authCall) finish(res Result, err error) {
	e := c.e
	now := time.Now()
	e.mu.Lock()
	s := c.s
	s.inflight--
	if s.running[c.key]--; s.running[c.key] <= 0 {
		delete(s.running, c.key)
	}
	s.lastResult = now
	s.lastActive = now
	e.idleLocked(s)
	s.results++ // a new think window: volatile results of the last one are stale
	e.dropStaleLocked(s)
	// A tool its backend does not have (an MCP upstream's listing lacks
	// it) gets no stats entry: any name a client sends would otherwise
	// stay in /v1/stats for good.
	unknown := errors.Is(err, ErrUnknownTool)
	ts := &toolStats{}
	if !unknown {
		ts = e.toolLocked(c.tool)
	}
	if c.think > 0 {
		ts.think.observe(c.think)
		if !c.thinkHeard {
			e.thinks.observe(c.think)
		}
	}
	if err == nil {
		if c.executed {
			ts.dur.observe(c.toolTime)
		}
		ts.count(res.Source)
		e.totals.count(res.Source, res.Saved)
	}
	if !c.rule.IsReadOnly() && e.disabled&ruleCompletion == 0 {
		// Again after the write: anything speculated while it ran may
		// have read the old state.
		e.invalidateLocked(s, c.backend, c.effect)
	}
	if !c.rule.IsReadOnly() {
		// The agent may read again what its own write changed. Another
		// session's write does not make it ask again: whether what it
		// holds went stale is the hazards' business (invalidation), not
		// a reason to guess it will repeat a call.
		clear(s.served)
		s.servedBytes = 0
	} else if err == nil {
		if len(s.served) >= maxServed {
			clear(s.served)
			s.servedBytes = 0
		}
		if _, ok := s.served[c.key]; !ok {
			s.served[c.key] = struct{}{}
			s.servedBytes += int64(len(c.key.Tool)+len(c.key.Args)) + keyOverhead
		}
		e.resizeLocked(s)
	}
	gone := s.gone
	e.unlock()
	if !unknown {
		e.metrics.observeCall(c.tool, res.Source, now.Sub(c.arrive), res.Saved, err)
	}
	if e.debug {
		c.log(res, now, err)
	}
	if err != nil {
		// Not served (backend unreachable, cut off at shutdown): kept in
		// the trace for the record, as a line mining and eval skip.
		if e.opts.Recorder != nil {
			ev := trace.Event{Kind: trace.KindFailed, Session: s.id, Seq: c.seq, Step: c.step, Tool: c.tool, Args: c.args,
				Status: trace.StatusError, Output: err.Error(), TS: c.arrive.UTC().Format(time.RFC3339Nano), ResultTS: now.UTC().Format(time.RFC3339Nano)}
			if rerr := e.opts.Recorder.Record(ev); rerr != nil {
				e.opts.Logger.Warn("recording call", "session", s.id, "tool", c.tool, "err", rerr)
			}
		}
		return
	}
	ev := trace.Event{
		Session:    s.id,
		Seq:        c.seq,
		Step:       c.step,
		Tool:       c.tool,
		Args:       c.args,
		Status:     res.Status,
		Output:     res.Output,
		TS:         c.arrive.UTC().Format(time.RFC3339Nano),
		ResultTS:   now.UTC().Format(time.RFC3339Nano),
		DurationMS: millis(c.toolTime),
		Source:     string(res.Source),
	}
	if c.think > 0 {
		ev.LLMMS = millis(c.think)
	}
	if e.opts.Recorder != nil {
		if rerr := e.opts.Recorder.Record(ev); rerr != nil {
			e.opts.Logger.Warn("recording call", "session", s.id, "tool", c.tool, "err", rerr)
		}
	}
	if gone || e.opts.Predictor == nil || e.policy.Load() == nil {
		return
	}
	w := afterWork{kind: afterObserve, ev: ev, seq: c.seq + 1}
	e.mu.Lock()
	queued := e.afterLocked(s, w)
	e.mu.Unlock()
	if !queued {
		e.predict(s, w) // closed: the predictor still learns
	}
}

// maxServed bounds a session's set of served calls.
const maxServed = 256

func millis(d time.Duration) *float64 {
	ms := float64(d) / float64(time.Millisecond)
	return &ms
}

// log writes the debug line of an authoritative call (issue 27: at debug,
// only speculative executions were logged, so a user could not see their
// agent's calls go through): session, seq, tool, where the result came
// from, the tool time it saved, and how long the agent waited. The
// arguments appear as a digest, as in the speculation lines.
func (c *authCall) log(res Result, now time.Time, err error) {
	attrs := []any{
		"session", c.s.id, "seq", c.seq, "tool", c.tool, "args", argsDigest(c.key.Args),
		"source", string(res.Source), "saved_ms", float64(res.Saved.Microseconds()) / 1000,
		"duration_ms", float64(now.Sub(c.arrive).Microseconds()) / 1000,
	}
	switch {
	case err != nil:
		attrs = append(attrs, "err", err)
	case res.Status == trace.StatusError:
		attrs = append(attrs, "status", string(res.Status))
	}
	c.e.opts.Logger.Debug("call", attrs...)
}
