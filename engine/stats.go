package engine

import (
	"fmt"
	"hash/fnv"
	"maps"
	"math"
	"time"

	"github.com/ahead-dev/ahead/predict"
	"github.com/ahead-dev/ahead/trace"
)

// ewma is an exponentially weighted moving average of durations.
type ewma struct {
	v time.Duration
	n int64
}

// ewmaWeight is the weight of a new sample: recent behaviour dominates
// within about ten calls.
const ewmaWeight = 0.2

func (w *ewma) observe(d time.Duration) {
	if w.n == 0 {
		w.v = d
	} else {
		w.v += time.Duration(ewmaWeight * float64(d-w.v))
	}
	w.n++
}

// value returns the average, or def before any sample.
func (w *ewma) value(def time.Duration) time.Duration {
	if w.n == 0 {
		return def
	}
	return w.v
}

// toolStats is what the engine learns and counts per tool.
type toolStats struct {
	dur, think                        ewma
	calls, executed, reused, promoted int64
	specStarted, wasted               int64
	saved, wastedTime                 time.Duration
	// cal is what each origin's guesses of the tool were worth, by the
	// origin's bit (calibrate.go).
	cal [maxOrigins]calibration
}

func (ts *toolStats) count(src Source) {
	ts.calls++
	switch src {
	case Executed:
		ts.executed++
	case Reused:
		ts.reused++
	case Promoted:
		ts.promoted++
	}
}

// toolLocked returns the statistics kept for tool. Tool names come from
// clients: beyond maxToolLabels names (as for the metric labels), or for a
// name longer than maxToolName, the figures go to otherTools, so that a
// client naming a new tool in every call cannot grow them without bound
// (issue 23: 20,000 names took 178 MiB and an 85 MB /v1/stats). Tools a
// backend lists always have their own.
func (e *Engine) toolLocked(tool string) *toolStats {
	ts, ok := e.tools[tool]
	if !ok {
		if _, listed := e.routes[tool]; !listed && (len(e.tools) >= maxToolLabels || len(tool) > maxToolName) {
			tool = otherTools
			if ts, ok = e.tools[tool]; ok {
				return ts
			}
		}
		ts = &toolStats{}
		e.tools[tool] = ts
	}
	return ts
}

// Totals counts what the engine did since it started.
type Totals struct {
	// Calls is the number of authoritative calls served, split by source.
	Calls, Executed, Reused, Promoted int64
	// SpecStarted counts speculative executions started (dry runs
	// included); Warmups counts warm-ups requested; Declined counts
	// predictions not run for want of amplification budget.
	SpecStarted, Warmups, Declined int64
	// SessionsEvicted counts sessions dropped for MaxSessions or MaxBytes.
	SessionsEvicted int64
	// Unfenced counts calls served without their speculative counterpart
	// because a fleet's fence failed (Options.Fleet): the fleet was down,
	// slow or not caught up.
	Unfenced int64
	// Outcomes counts the fates of speculative entries.
	Outcomes map[Outcome]int64
	// Saved is the tool time agents did not wait; Wasted the time spent
	// on speculative executions nobody claimed.
	Saved, Wasted time.Duration
}

func (t *Totals) count(src Source, saved time.Duration) {
	t.Calls++
	switch src {
	case Executed:
		t.Executed++
	case Reused:
		t.Reused++
	case Promoted:
		t.Promoted++
	}
	t.Saved += saved
}

// ToolStats summarises one tool.
type ToolStats struct {
	Calls, Executed, Reused, Promoted int64
	SpecStarted, Wasted               int64
	Saved, WastedTime                 time.Duration
	// MeanDuration and MeanThink are the learned expectations (EWMA) of
	// the tool's duration and of the think time before calls to it.
	MeanDuration, MeanThink time.Duration
}

// Stats is a snapshot of the engine's counters.
type Stats struct {
	Totals
	Tools map[string]ToolStats
	// Origins splits what speculation did by where its predictions came
	// from (an execution several origins predicted counts for each).
	Origins map[predict.Origin]OriginStats
	// Sessions, Entries and Bytes are the live sessions and speculative
	// entries and the bytes those entries hold; SessionBytes is what the
	// sessions hold beside them (conversation windows, the predictor's
	// state). Bytes + SessionBytes stays within Options.MaxBytes.
	Sessions, Entries   int
	Bytes, SessionBytes int64
	// Ready is how many of the Entries hold a finished result (the rest
	// are queued or running).
	Ready int
}

// Stats returns a snapshot of the engine's counters.
func (e *Engine) Stats() Stats {
	e.mu.Lock()
	defer e.mu.Unlock()
	st := Stats{
		Totals:   e.totals,
		Tools:    make(map[string]ToolStats, len(e.tools)),
		Sessions: len(e.sessions),
		Entries:  e.count,
		Bytes:    e.bytes,
		Ready:    e.filed.Len(),
	}
	st.SessionBytes = e.sessBytes
	st.Outcomes = maps.Clone(e.totals.Outcomes)
	st.Origins = make(map[predict.Origin]OriginStats, len(e.origins))
	for o, os := range e.origins {
		st.Origins[o] = *os
	}
	for name, ts := range e.tools {
		st.Tools[name] = ToolStats{
			Calls: ts.calls, Executed: ts.executed, Reused: ts.reused, Promoted: ts.promoted,
			SpecStarted: ts.specStarted, Wasted: ts.wasted, Saved: ts.saved, WastedTime: ts.wastedTime,
			MeanDuration: ts.dur.value(e.opts.DefaultDuration),
			MeanThink:    ts.think.value(e.opts.DefaultThink),
		}
	}
	return st
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
	if e.debug {
		e.logSpeculation(en, why)
	}
	if e.totals.Outcomes == nil {
		e.totals.Outcomes = make(map[Outcome]int64)
	}
	e.totals.Outcomes[why]++
	e.metrics.specOutcome(en.key.Tool, why)
	e.metrics.originOutcome(en.origins, why)
	if !en.ran {
		if e.opts.Amplification > 0 {
			// Never started: the amplification budget gets it back.
			e.tokens = min(e.tokens+1, e.opts.AmplificationBurst)
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
		e.totals.Wasted += ran
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
	e.pending = append(e.pending, trace.Event{
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
func (e *Engine) logSpeculation(en *entry, why Outcome) {
	attrs := []any{
		"session", en.from, "tool", en.key.Tool,
		"args", argsDigest(en.key.Args),
		"origin", en.origins.String(), "p", math.Round(en.p*1000) / 1000,
		"outcome", string(why),
	}
	if en.ran {
		attrs = append(attrs, "ran_ms", float64(en.finished.Sub(en.started).Microseconds())/1000)
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

// unlock releases e.mu and then writes the speculative records that
// settled while it was held (the recorder may do I/O).
func (e *Engine) unlock() {
	evs := e.pending
	e.pending = nil
	forget := e.forget
	e.forget = nil
	e.mu.Unlock()
	// A session dropped here may have been started again since: it then
	// loses what the predictor knew of it, no more.
	for _, id := range forget {
		if e.opts.Predictor != nil {
			e.opts.Predictor.Forget(id)
		}
		if e.opts.SessionEnded != nil {
			e.opts.SessionEnded(id)
		}
	}
	if e.opts.Recorder == nil {
		return
	}
	for _, ev := range evs {
		if err := e.opts.Recorder.Record(ev); err != nil {
			e.opts.Logger.Warn("recording speculative call", "session", ev.Session, "tool", ev.Tool, "err", err)
		}
	}
}
