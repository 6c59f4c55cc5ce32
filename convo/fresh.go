package convo

import (
	"sync"

	"github.com/ahead-dev/ahead/predict"
	"github.com/ahead-dev/ahead/trace"
)

// Fresh serves the built-in default where no model was learnt: it learns
// in memory, from the calls it observes (in every session), which tools
// there are, their argument names and key sets, what their values look
// like and how the conversation said them, and predicts a session's next
// calls from what was said with the default's weights. A tool seen once
// already gets its values from what the user says.
//
// Memory: what it keeps of the tools is bounded (maxSeenTools and the
// other maxSeen limits); of each session, a window of text as a
// Predictor's (Options.MaxBytes) and the session's events since it
// began, up to 4 × MaxBytes of text and arguments (the oldest dropped
// first, the system prompt kept), to hear them again when the tools it
// knows change; sessions are bounded by Options.MaxSessions.
//
// It is safe for concurrent use; one mutex serialises its sessions (it
// is the fallback of a model learnt, not the path of every prediction).
type Fresh struct {
	def  *Default
	opts Options

	mu       sync.Mutex // protects everything below
	seen     *seen
	cur      *compiled
	codes    shapeCodes
	ver      int
	nextAt   int // calls at which the model is made again
	sessions map[string]*freshSession
	clock    uint64
}

type freshSession struct {
	log     []trace.Event
	bytes   int
	st      *state
	ver     int
	sc      scratch
	lastUse uint64
}

var (
	_ predict.Predictor = (*Fresh)(nil)
	_ predict.Hearer    = (*Fresh)(nil)
	_ predict.Starter   = (*Fresh)(nil)
)

// NewFresh returns a predictor of the default d (nil: Builtin()) that
// knows no tool yet. opts may be nil.
func NewFresh(d *Default, opts *Options) *Fresh {
	if d == nil {
		d = Builtin()
	}
	f := &Fresh{def: d, seen: newSeen(), sessions: make(map[string]*freshSession), nextAt: 1}
	if opts != nil {
		f.opts = *opts
	}
	if f.opts.MaxPredictions <= 0 {
		f.opts.MaxPredictions = 10
	}
	if f.opts.MaxSessions <= 0 {
		f.opts.MaxSessions = 10000
	}
	if f.opts.MaxBytes <= 0 {
		f.opts.MaxBytes = DefaultMaxBytes
	}
	f.remake()
	return f
}

// remake makes the model again from what was seen.
func (f *Fresh) remake() {
	f.cur = compileSynth(f.seen.synth(f.def), f.seen, f.def)
	f.codes = newShapeCodes(f.cur.shapeID)
	f.ver++
	f.seen.grew = false
}

// sessionLocked returns a session, its state made with the current model.
func (f *Fresh) sessionLocked(id string) *freshSession {
	f.clock++
	s := f.sessions[id]
	if s == nil {
		if len(f.sessions) >= f.opts.MaxSessions {
			delete(f.sessions, predict.LeastRecent(f.sessions, func(s *freshSession) uint64 { return s.lastUse }))
		}
		s = &freshSession{}
		f.sessions[id] = s
	}
	s.lastUse = f.clock
	if s.ver != f.ver {
		s.st = newState(f.cur, f.opts.MaxBytes, false)
		s.st.codes = f.codes
		s.ver = f.ver
		for _, ev := range s.log {
			if ev.IsMessage() {
				s.st.hear(ev)
			} else {
				s.st.observe(ev)
			}
		}
	}
	return s
}

// keep adds ev to the session's log, within its bound.
func (f *Fresh) keep(s *freshSession, ev trace.Event) {
	s.log = append(s.log, ev)
	s.bytes += len(ev.Content) + len(ev.Args)
	for s.bytes > 4*f.opts.MaxBytes && len(s.log) > 1 {
		i := 0
		if s.log[0].IsMessage() && s.log[0].Role == trace.RoleSystem {
			i = 1
		}
		s.bytes -= len(s.log[i].Content) + len(s.log[i].Args)
		s.log = append(s.log[:i], s.log[i+1:]...)
	}
}

// Observe learns a call and returns the predictions of the session's
// next call.
func (f *Fresh) Observe(ev trace.Event) []predict.Prediction {
	if !ev.IsCall() {
		if ev.IsMessage() {
			return f.Hear(ev)
		}
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.sessionLocked(ev.Session)
	f.seen.call(s.st, ev.Session, ev)
	ev.Output = "" // only the call's arguments are read
	f.keep(s, ev)
	if f.seen.grew || f.seen.calls >= f.nextAt {
		// New tools, arguments or key sets are predicted from the next
		// call on; the counts behind tool choice are brought up to date
		// at doubling intervals, so that making the model again costs
		// time in the log of the calls.
		f.nextAt = max(f.nextAt, 2*f.seen.calls)
		f.remake()
		s = f.sessionLocked(ev.Session)
	} else {
		s.st.observe(ev)
	}
	return s.st.predict(&s.sc, f.opts.MaxPredictions, false)
}

// Hear takes a message and returns the predictions of the session's next
// call.
func (f *Fresh) Hear(msg trace.Event) []predict.Prediction {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.sessionLocked(msg.Session)
	f.keep(s, msg)
	s.st.hear(msg)
	return s.st.predict(&s.sc, f.opts.MaxPredictions, false)
}

// Start returns the predictions of a session's first call.
func (f *Fresh) Start(id string) []predict.Prediction {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.sessionLocked(id)
	return s.st.predict(&s.sc, f.opts.MaxPredictions, false)
}

// Forget drops a session's state; what was learnt of the tools stays.
func (f *Fresh) Forget(id string) {
	f.mu.Lock()
	delete(f.sessions, id)
	f.mu.Unlock()
}

// Knows reports whether the model p serves has learnt tool: where it has
// not, a Fresh predictor beside it speaks for the tool.
func (p *Predictor) Knows(tool string) bool {
	_, ok := p.c.byName[tool]
	return ok
}

// SessionBytes is what f keeps for a session: its events kept to hear
// again and the text in its window, so that an engine counts them in its
// memory budget.
func (f *Fresh) SessionBytes(id string) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.sessions[id]
	if s == nil {
		return 0
	}
	n := int64(s.bytes)
	if s.st != nil {
		n += int64(s.st.bytes)
	}
	return n
}
