// Package tooldef predicts calls of the tools an agent was told about
// from what was said, by their definitions (issue 24): the tools an MCP
// upstream lists and the tools of a model request, which the engine hears
// as trace.KindTools events (predict.Declarer). A tool never called
// before, in a domain nothing was learned of, is then predicted when the
// conversation names its values:
//
//   - the argument's enum (or const) value said in a message ("the
//     Chicago one" → location: "Chicago", as the schema spells it);
//   - a token matching its pattern or its format (date, date-time, email,
//     uri, uuid, ipv4/6), or the shape of its examples and default;
//   - a number for a numeric argument (within its minimum and maximum);
//   - a token near the words of the argument's name and description, or
//     with the look its name implies (a path for "path" or "file", a URL
//     for "url"), for a string with no constraint;
//   - which tool: the words of its name and description in what the user
//     said last, and how well its required arguments are filled. A tool
//     whose required argument nothing said fills is not predicted.
//
// The weights are a handful of constants, written down in score.go; the
// probability of a prediction is a softmax of the tools' scores against
// "none of them", not calibrated on data (the shared traces hold no
// definitions). The built-in default of package convo needs none of
// this: where no tool is declared, this predictor says nothing.
//
// Bounds: at most Options.MaxSessions sessions (the least recently active
// is forgotten), each with the compiled tools of at most one declaration
// per source (trace.BoundTools bounds each) and a window of at most
// Options.MaxBytes of message text.
package tooldef

import (
	"strings"
	"sync"

	"github.com/ahead-dev/ahead/predict"
	"github.com/ahead-dev/ahead/trace"
)

// Options configure a Predictor. The zero value of each field means its
// default.
type Options struct {
	// MaxPredictions caps the predictions returned per event; 0 means 5.
	MaxPredictions int
	// MaxSessions bounds the sessions tracked; 0 means 10000.
	MaxSessions int
	// MaxBytes bounds the message text a session keeps, the oldest
	// message dropped first; 0 means 16 KiB.
	MaxBytes int
}

// Predictor predicts calls of declared tools. It is safe for concurrent
// use; calls for one session are serialised.
type Predictor struct {
	opts Options

	mu       sync.Mutex // protects sessions and clock
	sessions map[string]*session
	clock    uint64
}

var (
	_ predict.Predictor = (*Predictor)(nil)
	_ predict.Hearer    = (*Predictor)(nil)
	_ predict.Declarer  = (*Predictor)(nil)
)

// New returns a Predictor; opts may be nil.
func New(opts *Options) *Predictor {
	p := &Predictor{sessions: make(map[string]*session)}
	if opts != nil {
		p.opts = *opts
	}
	if p.opts.MaxPredictions <= 0 {
		p.opts.MaxPredictions = 5
	}
	if p.opts.MaxSessions <= 0 {
		p.opts.MaxSessions = 10000
	}
	if p.opts.MaxBytes <= 0 {
		p.opts.MaxBytes = 16 << 10
	}
	return p
}

type session struct {
	mu      sync.Mutex // protects everything below
	lastUse uint64     // under Predictor.mu
	// decl holds each source's latest declaration; tools is their union
	// (the first of two of one name).
	decl  map[string][]*tool
	tools []*tool
	msgs  []heard
	bytes int
	// calls counts the session's calls.
	calls int
}

// heard is a message of the window, tokenised once.
type heard struct {
	role  string
	text  string
	lower string // text in lower case, where enum values are looked for
	toks  []token
	words []string // its content words, for tool choice
}

// session returns a session's state, locked; nil if it does not exist
// and create is false.
func (p *Predictor) session(id string, create bool) *session {
	p.mu.Lock()
	p.clock++
	s := p.sessions[id]
	if s == nil {
		if !create {
			p.mu.Unlock()
			return nil
		}
		if len(p.sessions) >= p.opts.MaxSessions {
			p.evictLocked()
		}
		s = &session{}
		p.sessions[id] = s
	}
	s.lastUse = p.clock
	p.mu.Unlock()
	s.mu.Lock()
	return s
}

// evictLocked forgets the least recently active session (a scan: it runs
// only at the bound, which an engine that calls Forget rarely reaches).
func (p *Predictor) evictLocked() {
	delete(p.sessions, predict.LeastRecent(p.sessions, func(s *session) uint64 { return s.lastUse }))
}

// Declare takes the tools declared to a session and returns the
// predictions of its next call.
func (p *Predictor) Declare(ev trace.Event) []predict.Prediction {
	if ev.Kind != trace.KindTools {
		return nil
	}
	s := p.session(ev.Session, true)
	defer s.mu.Unlock()
	if s.decl == nil {
		s.decl = make(map[string][]*tool, 1)
	}
	s.decl[ev.From] = compile(trace.BoundTools(ev.Tools))
	s.tools = s.tools[:0]
	seen := make(map[string]bool)
	for _, from := range []string{trace.FromMCP, trace.FromOpenAI, trace.FromAnthropic, trace.FromHTTP, ev.From} {
		for _, t := range s.decl[from] {
			if !seen[t.name] {
				seen[t.name] = true
				s.tools = append(s.tools, t)
			}
		}
	}
	return s.predict(p.opts.MaxPredictions)
}

// Hear takes a message and returns the predictions of the session's next
// call. Only sessions that declared tools keep their messages: agents
// list their tools before they work (MCP), or send them with the
// request that carries the messages (the gateway declares them first),
// and a predictor joined to every session (ahead eval, traces without
// definitions) must cost nothing where no tool is declared.
func (p *Predictor) Hear(msg trace.Event) []predict.Prediction {
	if !msg.IsMessage() || msg.Content == "" {
		return nil
	}
	s := p.session(msg.Session, false)
	if s == nil {
		return nil
	}
	defer s.mu.Unlock()
	s.hear(msg, p.opts.MaxBytes)
	return s.predict(p.opts.MaxPredictions)
}

// Observe takes a call and returns the predictions of the session's next
// call.
func (p *Predictor) Observe(ev trace.Event) []predict.Prediction {
	switch {
	case ev.IsMessage():
		return p.Hear(ev)
	case ev.Kind == trace.KindTools:
		return p.Declare(ev)
	case !ev.IsCall():
		return nil
	}
	s := p.session(ev.Session, false)
	if s == nil {
		return nil
	}
	defer s.mu.Unlock()
	s.calls++
	return s.predict(p.opts.MaxPredictions)
}

// Forget drops a session's state.
func (p *Predictor) Forget(id string) {
	p.mu.Lock()
	delete(p.sessions, id)
	p.mu.Unlock()
}

// SessionBytes is about what the predictor holds for a session: its
// window of text (the compiled tools are counted by their declaration's
// size, which bounds them).
func (p *Predictor) SessionBytes(id string) int64 {
	p.mu.Lock()
	s := p.sessions[id]
	p.mu.Unlock()
	if s == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n := int64(3 * s.bytes)
	for _, ts := range s.decl {
		for _, t := range ts {
			n += int64(256 + 128*len(t.args))
		}
	}
	return n
}

// hear adds a message to the window, dropping the oldest beyond max
// bytes (a message larger than max keeps its tail).
func (s *session) hear(msg trace.Event, max int) {
	text := msg.Content
	if len(text) > max {
		text = text[len(text)-max:]
	}
	h := heard{role: msg.Role, text: text, lower: strings.ToLower(text)}
	h.toks = tokens(text, nil)
	lastWords(text, h.toks)
	if msg.Role == trace.RoleUser {
		h.words = words(text, nil)
	}
	s.msgs = append(s.msgs, h)
	s.bytes += len(text)
	for s.bytes > max && len(s.msgs) > 1 {
		s.bytes -= len(s.msgs[0].text)
		s.msgs[0] = heard{}
		s.msgs = s.msgs[1:]
	}
}
