package engine

import (
	"maps"
	"time"

	"github.com/ahead-dev/ahead/predict"
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
	joined                            int64
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
	case Joined:
		ts.joined++
	}
}

// toolLocked returns the statistics kept for tool. Tool names come from
// clients: beyond maxToolLabels names (as for the metric labels), or for a
// name longer than maxToolName, the figures go to otherTools, so that a
// client naming a new tool in every call cannot grow them without bound
// (issue 23: 20,000 names took 178 MiB and an 85 MB /v1/stats). Tools a
// backend lists always have their own.
func (e *Engine) toolLocked(tool string) *toolStats {
	ts, ok := e.st.tools[tool]
	if !ok {
		if _, listed := e.routes[tool]; !listed && (len(e.st.tools) >= maxToolLabels || len(tool) > maxToolName) {
			tool = otherTools
			if ts, ok = e.st.tools[tool]; ok {
				return ts
			}
		}
		ts = &toolStats{}
		e.st.tools[tool] = ts
	}
	return ts
}

// Totals counts what the engine did since it started.
type Totals struct {
	// Calls is the number of authoritative calls served, split by source.
	Calls, Executed, Reused, Promoted, Joined int64
	// Orphaned counts the calls whose requesters left while they ran
	// (a broken stream, a cancelled request): they ran to the end, for a
	// re-issued call to join (orphan.go).
	Orphaned int64
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
	case Joined:
		t.Joined++
	}
	t.Saved += saved
}

// ToolStats summarises one tool.
type ToolStats struct {
	Calls, Executed, Reused, Promoted, Joined int64
	SpecStarted, Wasted                       int64
	Saved, WastedTime                         time.Duration
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
	// state, orphans' results and the outputs orphans still read).
	// Bytes + SessionBytes stays within Options.MaxBytes.
	Sessions, Entries   int
	Bytes, SessionBytes int64
	// Ready is how many of the Entries hold a finished result (the rest
	// are queued or running).
	Ready int
}

// Stats returns a snapshot of the engine's counters.
func (e *Engine) Stats() Stats {
	e.lock()
	defer e.unlock()
	st := Stats{
		Totals:   e.st.totals,
		Tools:    make(map[string]ToolStats, len(e.st.tools)),
		Sessions: len(e.st.sessions),
		Entries:  e.st.count,
		Bytes:    e.st.bytes,
		Ready:    e.st.filed.Len(),
	}
	st.SessionBytes = e.st.sessBytes + e.st.orphanReading
	st.Outcomes = maps.Clone(e.st.totals.Outcomes)
	st.Origins = make(map[predict.Origin]OriginStats, len(e.st.origins))
	for o, os := range e.st.origins {
		st.Origins[o] = *os
	}
	for name, ts := range e.st.tools {
		st.Tools[name] = ToolStats{
			Calls: ts.calls, Executed: ts.executed, Reused: ts.reused, Promoted: ts.promoted, Joined: ts.joined,
			SpecStarted: ts.specStarted, Wasted: ts.wasted, Saved: ts.saved, WastedTime: ts.wastedTime,
			MeanDuration: ts.dur.value(e.opts.DefaultDuration),
			MeanThink:    ts.think.value(e.opts.DefaultThink),
		}
	}
	return st
}
