package convo

import (
	"sync"

	"github.com/ahead-dev/ahead/predict"
	"github.com/ahead-dev/ahead/trace"
)

// Options configure a Predictor. The zero value of each field means its
// default.
type Options struct {
	// MaxPredictions caps the predictions returned per event; 0 means 10.
	MaxPredictions int
	// MaxSessions bounds the sessions tracked at once; when a new session
	// would exceed it, the least recently active one is forgotten. 0
	// means 10000.
	MaxSessions int
	// MaxBytes bounds the text a session's window keeps: the system
	// prompt, the latest user message and the most recent other text, the
	// middle dropped first. 0 means the model's mining window
	// (DefaultMaxBytes).
	MaxBytes int
}

// Predictor serves a Model online. It is safe for concurrent use; calls
// for one session are serialised.
type Predictor struct {
	c     *compiled
	codes shapeCodes // c's shapes by packed key, shared by the sessions
	opts  Options

	mu       sync.Mutex // protects sessions and clock
	sessions map[string]*session
	clock    uint64
}

type session struct {
	mu      sync.Mutex // protects st and sc
	lastUse uint64     // under Predictor.mu
	st      *state
	sc      scratch
}

var (
	_ predict.Predictor = (*Predictor)(nil)
	_ predict.Hearer    = (*Predictor)(nil)
	_ predict.Starter   = (*Predictor)(nil)
)

// New returns a predictor serving m. opts may be nil. m must not be
// modified afterwards.
func New(m *Model, opts *Options) *Predictor {
	c := compile(m)
	p := &Predictor{c: c, codes: newShapeCodes(c.shapeID), sessions: make(map[string]*session)}
	if opts != nil {
		p.opts = *opts
	}
	if p.opts.MaxPredictions <= 0 {
		p.opts.MaxPredictions = 10
	}
	if p.opts.MaxSessions <= 0 {
		p.opts.MaxSessions = 10000
	}
	if p.opts.MaxBytes <= 0 {
		p.opts.MaxBytes = DefaultMaxBytes
	}
	return p
}

// session returns a session's state, locked, creating it if needed.
func (p *Predictor) session(id string) *session {
	p.mu.Lock()
	p.clock++
	s := p.sessions[id]
	if s == nil {
		if len(p.sessions) >= p.opts.MaxSessions {
			p.evictLocked()
		}
		s = &session{st: newState(p.c, p.opts.MaxBytes, false)}
		s.st.codes = p.codes
		p.sessions[id] = s
	}
	s.lastUse = p.clock
	p.mu.Unlock()
	s.mu.Lock()
	return s
}

// evictLocked forgets the least recently active session. A scan is fine:
// it runs only when the bound is hit, which a working engine (it calls
// Forget) rarely reaches.
func (p *Predictor) evictLocked() {
	delete(p.sessions, predict.LeastRecent(p.sessions, func(s *session) uint64 { return s.lastUse }))
}

// Hear takes a message of the conversation as it became known (a system
// or user message when sent, an assistant message when its turn ended)
// and returns the predictions of the session's next call, best first.
func (p *Predictor) Hear(msg trace.Event) []predict.Prediction {
	s := p.session(msg.Session)
	defer s.mu.Unlock()
	s.st.hear(msg)
	return s.st.predict(&s.sc, p.opts.MaxPredictions, false)
}

// Observe takes a call's result and returns the predictions of the
// session's next call, best first.
func (p *Predictor) Observe(ev trace.Event) []predict.Prediction {
	if !ev.IsCall() {
		if ev.IsMessage() {
			return p.Hear(ev)
		}
		return nil
	}
	s := p.session(ev.Session)
	defer s.mu.Unlock()
	s.st.observe(ev)
	return s.st.predict(&s.sc, p.opts.MaxPredictions, false)
}

// Start returns the predictions of a session's first call, before
// anything was said or called.
func (p *Predictor) Start(id string) []predict.Prediction {
	s := p.session(id)
	defer s.mu.Unlock()
	return s.st.predict(&s.sc, p.opts.MaxPredictions, false)
}

// Forget drops a session's state.
func (p *Predictor) Forget(id string) {
	p.mu.Lock()
	delete(p.sessions, id)
	p.mu.Unlock()
}
