package engine

import (
	"time"

	"github.com/ahead-dev/ahead/predict"
	"github.com/ahead-dev/ahead/trace"
)

// Join folds session from into session into: one agent's work seen under
// two names (the gateway's automatic session for a conversation, and the
// tool side's session, linked by a call both saw). from's unclaimed
// speculative work becomes into's, so that into's calls claim it; its
// conversation window is heard again in into (the predictor hears it, and
// it is recorded there as well); a think time the model side measured for the
// step carries over; then from is dropped. Joining a session into itself,
// or an unknown session, does nothing.
//
// Work on a backend whose state is per session (Backend.PerSession) ran in
// from's state, not into's: it is cancelled, never handed over.
func (e *Engine) Join(from, into string) {
	if from == into {
		return
	}
	now := time.Now()
	e.mu.Lock()
	f, ok := e.sessions[from]
	if !ok || e.closed {
		e.unlock()
		return
	}
	s := e.sessionLocked(into, now)
	s.lastActive = now
	for key, en := range f.entries {
		if e.perSession[en.backend] || s.entries[key] != nil || s.running[key] > 0 {
			// Computed in another state, or into already has (or is
			// making) this call: keep one.
			e.removeLocked(en, OutcomeCancelled)
			continue
		}
		delete(f.entries, key)
		f.bytes -= en.size
		en.sess, en.from, en.window = s, into, s.results
		if !en.ran {
			// runSpec reads req only after it has set ran under e.mu.
			en.req.Session = into
		}
		s.entries[key] = en
		s.bytes += en.size
	}
	for _, en := range e.shared {
		if en.from == from {
			en.from, en.window = into, s.results
		}
	}
	if f.thinkHeard {
		s.thinkHeard = true
	}
	// The predictor hears the conversation under its new session, as if
	// it had been said there: queued behind into's own prediction work,
	// so that it hears into's events in order (after.go).
	_, hearer := e.opts.Predictor.(predict.Hearer)
	hearer = hearer && e.policy.Load() != nil
	heard := make([]trace.Event, len(f.msgs))
	for i, m := range f.msgs {
		m.Session, m.Seq = into, s.seq
		s.hearLocked(m, e.opts.MaxMessageBytes)
		heard[i] = m
		if hearer {
			e.afterLocked(s, afterWork{kind: afterHear, ev: m, seq: s.seq})
		}
	}
	e.dropSessionLocked(f, OutcomeCancelled)
	e.resizeLocked(s)
	e.idleLocked(s)
	e.enforceBytesLocked(s, now)
	e.unlock()

	// Recorded again in into, so that its trace reads as one conversation
	// (messages, then the calls they led to) as mining wants it; from's
	// lines stay as they were heard.
	if e.opts.Recorder != nil {
		for _, m := range heard {
			if err := e.opts.Recorder.Record(m); err != nil {
				e.opts.Logger.Warn("recording message", "session", into, "role", m.Role, "err", err)
			}
		}
	}
}
