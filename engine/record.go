package engine

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"time"

	"github.com/ahead-dev/ahead/predict"
	"github.com/ahead-dev/ahead/trace"
)

// Step 3 of a call, finish, and the end of every speculative execution,
// settle: what the engine counts and records of them. The records, the
// metrics and the debug lines are queued in the tail (state.go) and done
// when the lock is released.

// finish accounts for the call, records it, and queues it for the
// predictor (after.go), whose predictions are speculated on once the
// agent has its result.
func (c *authCall) finish(res Result, err error) {
	e := c.e
	now := time.Now()
	e.lock()
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
			e.st.thinks.observe(c.think)
		}
	}
	if err == nil {
		if c.executed {
			ts.dur.observe(c.toolTime)
		}
		ts.count(res.Source)
		e.st.totals.count(res.Source, res.Saved)
	}
	if !c.rule.IsReadOnly() && e.st.disabled&ruleCompletion == 0 {
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
	if !unknown {
		e.st.tail.call = callDone{tool: c.tool, source: res.Source, took: now.Sub(c.arrive), saved: res.Saved, err: err}
		e.st.tail.hasCall = true
	}
	if err != nil {
		// Not served (backend unreachable, cut off at shutdown): kept in
		// the trace for the record, as a line mining and eval skip.
		e.recordLocked(trace.Event{Kind: trace.KindFailed, Session: s.id, Seq: c.seq, Step: c.step, Tool: c.tool, Args: c.args,
			Status: trace.StatusError, Output: err.Error(), TS: c.arrive.UTC().Format(time.RFC3339Nano), ResultTS: now.UTC().Format(time.RFC3339Nano)})
		e.unlock()
		if e.debug {
			c.log(res, now, err)
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
	e.recordLocked(ev)
	e.unlock() // the call is recorded before the predictor sees it
	if e.debug {
		c.log(res, now, err)
	}
	if gone || e.opts.Predictor == nil || e.policy.Load() == nil {
		return
	}
	w := afterWork{kind: afterObserve, ev: ev, seq: c.seq + 1}
	e.lock()
	queued := e.afterLocked(s, w)
	e.unlock()
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

// settleLocked fixes a speculative entry's outcome. If its execution is
// still running, the count and record wait for runSpec to see it end, so
// every execution is counted and recorded exactly once with its final
// outcome and duration.
func (e *Engine) settleLocked(en *entry, why Outcome) {
	if en.settled {
		return
	}
	if en.reuses > 0 && why != OutcomeInvalidated {
		why = OutcomeReused // a shared result that served someone
	}
	en.outcome = why
	if en.ran && !en.done {
		return
	}
	en.settled = true
	if e.st.totals.Outcomes == nil {
		e.st.totals.Outcomes = make(map[Outcome]int64)
	}
	e.st.totals.Outcomes[why]++
	// Counted in place: Prometheus counters neither block nor call out.
	e.metrics.specOutcome(en.key.Tool, why)
	e.metrics.originOutcome(en.origins, why)
	if e.debug {
		e.st.tail.logs = append(e.st.tail.logs, settled{
			tool: en.key.Tool, from: en.from, args: en.key.Args, origins: en.origins,
			p: en.p, why: why, ran: en.ran, took: en.finished.Sub(en.started),
		})
	}
	if !en.ran {
		if e.opts.Amplification > 0 {
			// Never started: the amplification budget gets it back.
			e.st.tokens = min(e.st.tokens+1, e.opts.AmplificationBurst)
		}
		return
	}
	e.calibrateLocked(en, why)
	ran := en.finished.Sub(en.started)
	ts := e.toolLocked(en.key.Tool)
	en.origins.each(func(o predict.Origin) {
		os := e.originLocked(o)
		switch why {
		// Saved as the call counted it (Result.Saved), not the
		// whole run: a promoted call waited for the rest.
		case OutcomeReused:
			os.Reused++
			os.Saved += en.saved
		case OutcomePromoted:
			os.Promoted++
			os.Saved += en.saved
		case OutcomeWarmed:
		default:
			os.Wasted++
			os.WastedTime += ran
		}
	})
	switch why {
	case OutcomeReused, OutcomePromoted, OutcomeWarmed:
	default:
		e.st.totals.Wasted += ran
		ts.wasted++
		ts.wastedTime += ran
		e.metrics.wastedSeconds.WithLabelValues(e.metrics.tool(en.key.Tool)).Add(ran.Seconds())
	}
	if why == OutcomeReused || why == OutcomePromoted {
		ts.saved += en.saved
	}
	st := trace.StatusOK
	if en.err != nil || en.resp.IsError {
		st = trace.StatusError
	}
	e.recordLocked(trace.Event{
		Kind:        trace.KindSpeculative,
		Session:     en.from,
		Seq:         en.seq,
		Tool:        en.req.Tool,
		Args:        en.req.Args,
		Status:      st,
		Output:      en.resp.Output,
		TS:          en.started.UTC().Format(time.RFC3339Nano),
		ResultTS:    en.finished.UTC().Format(time.RFC3339Nano),
		DurationMS:  millis(ran),
		Speculative: true,
		Outcome:     string(why),
		Origin:      en.origins.String(),
	})
}

// logSpeculation writes the debug line of a settled speculative entry:
// what ran, what predicted it, how likely it was, and what became of it.
// The arguments appear as a digest: they may hold what users said.
func (e *Engine) logSpeculation(s settled) {
	attrs := []any{
		"session", s.from, "tool", s.tool,
		"args", argsDigest(s.args),
		"origin", s.origins.String(), "p", math.Round(s.p*1000) / 1000,
		"outcome", string(s.why),
	}
	if s.ran {
		attrs = append(attrs, "ran_ms", float64(s.took.Microseconds())/1000)
	}
	e.opts.Logger.Debug("speculation", attrs...)
}

// argsDigest is a short digest of canonical arguments, the same in every
// run, so a debug line can be matched with the call in a trace.
func argsDigest(args string) string {
	h := fnv.New64a()
	h.Write([]byte(args))
	return fmt.Sprintf("%012x", h.Sum64()>>16)
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
