package learn

import (
	"cmp"
	"slices"

	"github.com/ahead-dev/ahead/callkey"
	"github.com/ahead-dev/ahead/predict"
	"github.com/ahead-dev/ahead/trace"
)

// Issue 24: agents make a call again with the same arguments: a retry
// after an error, a loop (one tau2 airline session sends the same
// transfer 94 times in a row), a status polled. A pattern learnt from
// other sessions knows the tool comes next but not always where its
// arguments come from, and a tool-only guess cannot be run ahead. A
// learning pool therefore fills the tool-only guess of a tool the session
// already called with that call's arguments, at the guess's p times how
// often, in the calls observed, a tool called again in a session was
// called with the same arguments as its latest call (counted per tool,
// pulled towards one half by one pseudo-call each way). On tau2 retail →
// airline (relearning every 10 sessions) this took exact_at_3 from 0.523
// to the figure in README.

// repeatScan bounds how far back a session's kept calls are searched for
// the latest call of a tool: a loop or a retry repeats a recent call.
const repeatScan = 64

// maxRepeatTools bounds the tools counted; beyond it a new tool's share
// is the prior (one half).
const maxRepeatTools = 4096

// repeatStat counts, for one tool, the calls made when the session had
// called it before (n) and those with the same arguments as the latest
// (same).
type repeatStat struct{ n, same float64 }

func (r repeatStat) share() float64 { return (r.same + 1) / (r.n + 2) }

// latestLocked returns the latest kept call of tool in session's log,
// searching at most repeatScan events back.
func (l *Learner) latestLocked(session, tool string) (trace.Event, bool) {
	evs := l.log[session]
	for i, n := len(evs)-1, 0; i >= 0 && n < repeatScan; i, n = i-1, n+1 {
		if ev := evs[i]; !ev.IsMessage() && ev.Tool == tool {
			return ev, true
		}
	}
	return trace.Event{}, false
}

// countRepeatLocked counts ev against the latest call of its tool in its
// session (before ev is kept).
func (l *Learner) countRepeatLocked(ev trace.Event) {
	prev, ok := l.latestLocked(ev.Session, ev.Tool)
	if !ok {
		return
	}
	st, ok := l.repeats[ev.Tool]
	if !ok && len(l.repeats) >= maxRepeatTools {
		return
	}
	st.n++
	if sameCall(prev, ev) {
		st.same++
	}
	l.repeats[ev.Tool] = st
}

func sameCall(a, b trace.Event) bool {
	ka, err := callkey.Make(a.Tool, a.Args)
	if err != nil {
		return false
	}
	kb, err := callkey.Make(b.Tool, b.Args)
	return err == nil && ka == kb
}

// fillRepeats replaces, in preds (the patterns' guesses after a call of
// session), each tool-only guess of a tool the session called before by
// that call with its latest arguments, at p times the tool's repeat
// share, keeping the order by p.
func (l *Learner) fillRepeats(session string, preds []predict.Prediction) []predict.Prediction {
	filled := false
	l.mu.Lock()
	for i, p := range preds {
		if p.Args != nil {
			continue
		}
		prev, ok := l.latestLocked(session, p.Tool)
		if !ok || prev.Args == nil {
			continue
		}
		if _, err := callkey.Make(prev.Tool, prev.Args); err != nil {
			continue
		}
		if !filled {
			preds = append([]predict.Prediction(nil), preds...) // the caller's list is not ours
			filled = true
		}
		st := l.repeats[p.Tool]
		preds[i].Args = append([]byte(nil), prev.Args...)
		preds[i].P = p.P * st.share()
		preds[i].Repeat = true
	}
	l.mu.Unlock()
	if filled {
		slices.SortStableFunc(preds, func(a, b predict.Prediction) int { return cmp.Compare(b.P, a.P) })
	}
	return preds
}
