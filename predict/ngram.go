package predict

import (
	"cmp"
	"slices"
	"strings"
	"sync"

	"github.com/ahead-dev/ahead/trace"
)

// NGram is the reference predictor ahead is measured against: the next
// tool from n-gram counts over tool names (the longest context seen in
// training, backing off to shorter ones for the remaining ranks), with the
// arguments the session last passed to that tool (repeat-last-arguments),
// or tool-only when the session has not called it yet. P is the tool's
// n-gram probability. It is safe for concurrent use.
type NGram struct {
	n      int
	counts map[string]map[string]int // context ("a\x00b") → next tool → count

	mu       sync.Mutex // protects sessions
	sessions map[string]*ngramSession
}

type ngramSession struct {
	tools []string          // the last n-1 tools
	args  map[string][]byte // tool → its last arguments
}

// ngramStart pads contexts at the session start.
const ngramStart = "^"

// NewNGram returns an untrained n-gram predictor (n ≥ 1; n = 3 is a
// trigram: two tools of context).
func NewNGram(n int) *NGram {
	return &NGram{n: max(n, 1), counts: make(map[string]map[string]int), sessions: make(map[string]*ngramSession)}
}

// Train counts the tool sequences of sessions (each in seq order).
func (g *NGram) Train(sessions []trace.Session) {
	for _, s := range sessions {
		hist := []string{ngramStart}
		for _, ev := range s.Events {
			for k := 1; k < g.n && k <= len(hist); k++ {
				key := strings.Join(hist[len(hist)-k:], "\x00")
				m := g.counts[key]
				if m == nil {
					m = make(map[string]int)
					g.counts[key] = m
				}
				m[ev.Tool]++
			}
			hist = append(hist, ev.Tool)
		}
	}
}

// Observe records ev and predicts the next calls.
func (g *NGram) Observe(ev trace.Event) []Prediction {
	g.mu.Lock()
	s := g.sessions[ev.Session]
	if s == nil {
		s = &ngramSession{tools: []string{ngramStart}, args: make(map[string][]byte)}
		g.sessions[ev.Session] = s
	}
	s.tools = append(s.tools, ev.Tool)
	if len(s.tools) > g.n {
		s.tools = s.tools[len(s.tools)-g.n:]
	}
	if len(ev.Args) > 0 {
		s.args[ev.Tool] = ev.Args
	} else {
		s.args[ev.Tool] = []byte("{}")
	}
	hist := slices.Clone(s.tools)
	args := make(map[string][]byte, len(s.args))
	for t, a := range s.args {
		args[t] = a
	}
	g.mu.Unlock()

	var out []Prediction
	seen := make(map[string]bool)
	for k := min(g.n-1, len(hist)); k >= 1; k-- {
		m := g.counts[strings.Join(hist[len(hist)-k:], "\x00")]
		total := 0
		for _, c := range m {
			total += c
		}
		var level []Prediction
		for t, c := range m {
			if !seen[t] {
				level = append(level, Prediction{Tool: t, P: float64(c) / float64(total)})
			}
		}
		slices.SortFunc(level, func(a, b Prediction) int {
			if c := cmp.Compare(b.P, a.P); c != 0 {
				return c
			}
			return strings.Compare(a.Tool, b.Tool)
		})
		for _, p := range level {
			seen[p.Tool] = true
			if a, ok := args[p.Tool]; ok {
				p.Args = a
			}
			out = append(out, p)
		}
		if len(out) >= 10 {
			break
		}
	}
	if len(out) > 10 {
		out = out[:10]
	}
	return out
}

// Start predicts a session's first call: the tools sessions began with in
// training, most frequent first, tool-only (no arguments to repeat yet). It
// returns nil once the session has events.
func (g *NGram) Start(session string) []Prediction {
	g.mu.Lock()
	_, started := g.sessions[session]
	g.mu.Unlock()
	if started {
		return nil
	}
	m := g.counts[ngramStart]
	total := 0
	for _, c := range m {
		total += c
	}
	out := make([]Prediction, 0, len(m))
	for t, c := range m {
		out = append(out, Prediction{Tool: t, P: float64(c) / float64(total)})
	}
	slices.SortFunc(out, func(a, b Prediction) int {
		if c := cmp.Compare(b.P, a.P); c != 0 {
			return c
		}
		return strings.Compare(a.Tool, b.Tool)
	})
	if len(out) > 10 {
		out = out[:10]
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// Forget drops a session's state.
func (g *NGram) Forget(session string) {
	g.mu.Lock()
	delete(g.sessions, session)
	g.mu.Unlock()
}
