package engine

import (
	"container/list"
	"slices"
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
// step carries over; then from is dropped. Joining a session into itself
// does nothing.
//
// From then on the name from stands for into: an Offer, Message or
// ThinkTime that names from reaches into. Whoever speaks for from may have
// picked the name up just before the fold and reach the engine just
// after; without this it would recreate from, an orphan whose speculation
// nothing claims and whose messages prediction never hears. The names are
// kept while into is (they go with it) and at most MaxSessions of them,
// the oldest fold forgotten first. A from the engine has not seen yet is
// folded all the same, for the same reason.
//
// Work on a backend whose state is per session (Backend.PerSession) ran in
// from's state, not into's: it is cancelled, never handed over.
func (e *Engine) Join(from, into string) {
	now := time.Now()
	e.lock()
	if e.st.closed {
		e.unlock()
		return
	}
	into = e.resolveLocked(into)
	if from == into || e.st.folded[from] != nil {
		// Itself, or folded already (into into, or into another, which
		// a second link cannot overrule).
		e.unlock()
		return
	}
	s := e.sessionLocked(into, now)
	s.lastActive = now
	f, ok := e.st.sessions[from]
	e.foldLocked(from, s)
	if !ok {
		e.idleLocked(s)
		e.unlock()
		return
	}
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
			// runSpec reads req only after it has set ran inside the door.
			en.req.Session = into
		}
		s.entries[key] = en
		s.bytes += en.size
	}
	for _, en := range e.st.shared {
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
	// Recorded again in into, so that its trace reads as one conversation
	// (messages, then the calls they led to) as mining wants it; from's
	// lines stay as they were heard.
	for _, m := range heard {
		e.recordLocked(m)
	}
	e.unlock()
}

// Resolve returns the session a name stands for: the session Join folded
// it into, or the name itself. The links between a model-side session and
// a tool-side one are kept here, once, with the engine's sessions: the
// gateway asks for them.
func (e *Engine) Resolve(session string) string {
	e.lock()
	defer e.unlock()
	return e.resolveLocked(session)
}

// fold is a name Join folded away (from) and the session it stands for;
// seq and step are where from's model stood then: what a call it had
// emitted would have been recorded with (Offer).
type fold struct {
	from, into string
	seq, step  int
}

// resolveLocked returns the session a name stands for: the session it was
// folded into (Join), or the name itself.
func (e *Engine) resolveLocked(id string) string {
	if el := e.st.folded[id]; el != nil {
		return el.Value.(*fold).into
	}
	return id
}

// foldLocked makes from stand for s, and the names that stood for from
// too, so that a name resolves in one step. Past MaxSessions names the
// oldest fold is forgotten.
func (e *Engine) foldLocked(from string, s *session) {
	if e.st.folded == nil {
		e.st.folded, e.st.folds = map[string]*list.Element{}, list.New()
	}
	if f := e.st.sessions[from]; f != nil {
		for _, a := range f.aliases {
			e.st.folded[a].Value.(*fold).into = s.id
		}
		s.aliases = append(s.aliases, f.aliases...)
		s.aliasBytes += f.aliasBytes
		f.aliases, f.aliasBytes = nil, 0
		e.resizeLocked(f)
	}
	fd := &fold{from: from, into: s.id}
	if f := e.st.sessions[from]; f != nil {
		fd.seq, fd.step = f.emitAt()
	} else {
		fd.step = 1 // as a session Offer makes: its first step
	}
	e.st.folded[from] = e.st.folds.PushBack(fd)
	s.aliases = append(s.aliases, from)
	s.aliasBytes += aliasSize(from)
	for e.st.folds.Len() > e.opts.MaxSessions {
		old := e.st.folds.Remove(e.st.folds.Front()).(*fold)
		delete(e.st.folded, old.from)
		if t := e.st.sessions[old.into]; t != nil {
			t.aliases = slices.DeleteFunc(t.aliases, func(a string) bool { return a == old.from })
			t.aliasBytes -= aliasSize(old.from)
			e.resizeLocked(t)
		}
	}
	e.resizeLocked(s)
}

// aliasSize is what a folded name costs its session: the name, its place
// in Engine.folded and folds.
func aliasSize(name string) int64 { return int64(len(name)) + keyOverhead }

// unfoldLocked forgets the names that stood for a session being dropped:
// the names are free again.
func (e *Engine) unfoldLocked(s *session) {
	for _, a := range s.aliases {
		if el := e.st.folded[a]; el != nil && el.Value.(*fold).into == s.id {
			e.st.folds.Remove(el)
			delete(e.st.folded, a)
		}
	}
	s.aliases, s.aliasBytes = nil, 0
}
