package speculator

import (
	"encoding/json"
	"math"
	"time"

	"github.com/ahead-dev/ahead/callkey"
	"github.com/ahead-dev/ahead/predict"
	"github.com/ahead-dev/ahead/trace"
)

// Bounds of what a session keeps: the recent calls shown to the model, the
// bytes of each output kept for it, and the distinct calls remembered (the
// simulation's plausible wrong guesses).
const (
	maxRecentCalls = 12
	maxOutputBytes = 2000
	maxSeenCalls   = 64
)

// The learned probability of a guess (ISSUE-NOTES, "A fast model as a
// second predictor"): until a (rank, tool) has priorOutcomes outcomes, P is
// the prior — firstPrior for the first guess, halved per rank — then the
// share of its guesses that matched.
const (
	priorOutcomes = 20
	firstPrior    = 0.3
)

// ewmaAlpha weighs a new sample in the moving averages (think time, tool
// time, request latency, hit rate).
const ewmaAlpha = 0.2

type ewma struct {
	v float64
	n int
}

func (e *ewma) add(x float64) {
	if e.n == 0 {
		e.v = x
	} else {
		e.v += ewmaAlpha * (x - e.v)
	}
	e.n++
}

// known reports the average and whether there is one.
func (e *ewma) known() (float64, bool) { return e.v, e.n > 0 }

// guess is one of a window's answered guesses.
type guess struct {
	rank int
	tool string
	key  callkey.Key
	args json.RawMessage
}

// winState is where a window's request is.
type winState int

const (
	winQueued   winState = iota // admitted, waiting for a slot
	winRunning                  // asked, not answered
	winAnswered                 // answered (or failed): one request per window
	winSkipped                  // not admitted
)

// window is one think window of a session: it opens when a tool result
// returns or a user message arrives, and closes when the session's next call
// (or the model's turn, an assistant message) shows the agent stopped
// thinking. An answer for a closed window is late and dropped.
type window struct {
	session string
	// seq is the seq the session's next call will have.
	seq int
	// step is the step whose results opened the window (results of the
	// same step extend it); -1 when a message opened it.
	step int
	// ordinal orders windows for a slot: earlier steps of a session first.
	ordinal int
	opened  time.Time
	closed  bool

	// The request's state (Speculator only).
	state  winState
	cancel func() // cancels a running request
	tokens int    // the request's estimated tokens
	k      int    // guesses asked for
}

// scoring holds the guesses of a session's last answered window until the
// step of calls after it has been seen.
type scoring struct {
	win     *window
	seq     int // the window's seq: calls from it on are scored
	step    int // the first scored call's step; -1 until seen
	guesses []guess
	hit     []bool
}

type seenCall struct {
	tool string
	args json.RawMessage
	key  callkey.Key
}

// sessionState is what the ledger keeps of one session.
type sessionState struct {
	calls    []trace.Event // recent calls, oldest first, outputs cut
	msgs     []trace.Event // heard messages (used without Options.Conversation)
	msgBytes int
	seen     []seenCall // distinct calls, oldest first
	lastStep int
	win      *window
	score    *scoring
}

type rankTool struct {
	rank int
	tool string
}

type outcomes struct{ n, hits int }

// ledger keeps per-session windows and recent calls, scores guesses against
// the calls that followed, and learns P per (rank, tool), the hit rate and
// the think and tool times admission needs. It is not safe for concurrent
// use: its owner guards it.
type ledger struct {
	sessions   map[string]*sessionState
	counts     map[rankTool]*outcomes
	hitRate    ewma // share of answered windows with a hit
	think      ewma // the agent's think time, ms
	toolTime   ewma // tool time over all tools, ms
	maxMsg     int  // bytes of heard messages kept per session
	maxBreadth int
	m          *metrics
}

func newLedger(maxBreadth, maxMsgBytes int, m *metrics) *ledger {
	return &ledger{
		sessions:   make(map[string]*sessionState),
		counts:     make(map[rankTool]*outcomes),
		maxMsg:     maxMsgBytes,
		maxBreadth: maxBreadth,
		m:          m,
	}
}

func (l *ledger) session(id string) *sessionState {
	s, ok := l.sessions[id]
	if !ok {
		s = &sessionState{}
		l.sessions[id] = s
	}
	return s
}

// observe takes an authoritative result: it scores the outstanding guesses,
// learns times, and opens a window unless the result extends the open one
// (a result of the same step). It returns the window opened and the one
// closed, either nil.
func (l *ledger) observe(ev trace.Event, now time.Time) (opened, closed *window) {
	s := l.session(ev.Session)
	l.scoreLocked(s, ev)
	if ev.LLMMS != nil && *ev.LLMMS > 0 {
		l.think.add(*ev.LLMMS)
	}
	if ev.DurationMS != nil {
		l.toolTime.add(*ev.DurationMS)
	}
	s.lastStep = max(s.lastStep, ev.Step)
	kept := ev
	if len(kept.Output) > maxOutputBytes {
		kept.Output = kept.Output[:maxOutputBytes] + " …"
	}
	s.calls = append(s.calls, kept)
	if len(s.calls) > maxRecentCalls {
		s.calls = append(s.calls[:0], s.calls[len(s.calls)-maxRecentCalls:]...)
	}
	if k, err := callkey.Make(ev.Tool, ev.Args); err == nil && !s.hasSeen(k) {
		s.seen = append(s.seen, seenCall{tool: ev.Tool, args: ev.Args, key: k})
		if len(s.seen) > maxSeenCalls {
			s.seen = append(s.seen[:0], s.seen[1:]...)
		}
	}

	if w := s.win; w != nil && !w.closed {
		if w.step >= 0 && ev.Step == w.step {
			// Another result of the step that opened it: the agent
			// thinks once, after its last result.
			w.seq = max(w.seq, ev.Seq+1)
			return nil, nil
		}
		if ev.Seq < w.seq {
			return nil, nil // an older call finishing late
		}
		w.closed = true
		closed = w
	}
	s.win = &window{session: ev.Session, seq: ev.Seq + 1, step: ev.Step, ordinal: ev.Step, opened: now}
	return s.win, closed
}

// hear takes a message: a user message opens a window (unless one is open
// for the same next call), an assistant message closes the open one (the
// model's turn ended).
func (l *ledger) hear(msg trace.Event, now time.Time) (opened, closed *window) {
	s := l.session(msg.Session)
	s.msgs = append(s.msgs, msg)
	s.msgBytes += len(msg.Content)
	for s.msgBytes > l.maxMsg && len(s.msgs) > 1 {
		s.msgBytes -= len(s.msgs[0].Content)
		s.msgs = s.msgs[1:]
	}
	w := s.win
	open := w != nil && !w.closed
	switch msg.Role {
	case trace.RoleAssistant:
		if open && msg.Seq >= w.seq {
			w.closed = true
			return nil, w
		}
	case trace.RoleUser:
		if open && msg.Seq == w.seq {
			return nil, nil // one request per think window
		}
		if open {
			w.closed = true
			closed = w
		}
		s.win = &window{session: msg.Session, seq: msg.Seq, step: -1, ordinal: s.lastStep, opened: now}
		return s.win, closed
	}
	return nil, nil
}

// forget drops a session; it returns its open window, if any, closed.
func (l *ledger) forget(id string) *window {
	s, ok := l.sessions[id]
	if !ok {
		return nil
	}
	delete(l.sessions, id)
	if w := s.win; w != nil && !w.closed {
		w.closed = true
		return w
	}
	return nil
}

// current reports whether w is its session's open window.
func (l *ledger) current(w *window) bool {
	s, ok := l.sessions[w.session]
	return ok && s.win == w && !w.closed
}

// answer turns a window's guesses (best first, valid, distinct) into
// predictions with learned P, and keeps them for scoring (until retract).
// It returns nil, false when the window has closed: the answer is late.
func (l *ledger) answer(w *window, gs []guess) ([]predict.Prediction, bool) {
	if !l.current(w) {
		return nil, false
	}
	s := l.sessions[w.session]
	if s.score != nil {
		l.finalize(s.score)
	}
	s.score = &scoring{win: w, seq: w.seq, step: -1, guesses: gs, hit: make([]bool, len(gs))}
	preds := make([]predict.Prediction, len(gs))
	for i, g := range gs {
		preds[i] = predict.Prediction{Tool: g.tool, Args: g.args, P: l.p(g.rank, g.tool), Origin: predict.OriginSpeculator}
	}
	return preds, true
}

// retract forgets the guesses of w's answer, which the engine refused as
// late (the agent's call had begun, though its result, which closes the
// window here, had not come back): they were never offered, so they count
// neither as guesses nor towards P.
func (l *ledger) retract(w *window) {
	if s := l.sessions[w.session]; s != nil && s.score != nil && s.score.win == w {
		s.score = nil
	}
}

// scoreLocked marks the outstanding guesses the call matches, and settles
// them once a later step begins.
func (l *ledger) scoreLocked(s *sessionState, ev trace.Event) {
	sc := s.score
	if sc == nil || ev.Seq < sc.seq {
		return
	}
	if sc.step < 0 {
		sc.step = ev.Step
	}
	if ev.Step != sc.step {
		l.finalize(sc)
		s.score = nil
		return
	}
	k, err := callkey.Make(ev.Tool, ev.Args)
	if err != nil {
		return
	}
	for i, g := range sc.guesses {
		if !sc.hit[i] && g.key == k {
			sc.hit[i] = true
			l.m.hit()
		}
	}
}

// finalize counts a window's outcomes.
func (l *ledger) finalize(sc *scoring) {
	hitAny := false
	for i, g := range sc.guesses {
		o := l.counts[rankTool{g.rank, g.tool}]
		if o == nil {
			o = &outcomes{}
			l.counts[rankTool{g.rank, g.tool}] = o
		}
		o.n++
		if sc.hit[i] {
			o.hits++
			hitAny = true
		}
	}
	if len(sc.guesses) > 0 {
		l.hitRate.add(b2f(hitAny))
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// p is the probability of a guess of tool at rank: the prior until the
// (rank, tool) has priorOutcomes outcomes, then its hit share.
func (l *ledger) p(rank int, tool string) float64 {
	if o := l.counts[rankTool{rank, tool}]; o != nil && o.n >= priorOutcomes {
		return float64(o.hits) / float64(o.n)
	}
	return prior(rank)
}

func prior(rank int) float64 { return firstPrior * math.Pow(0.5, float64(rank)) }

// breadth is how many guesses to ask for (confidence-aware breadth): all
// of maxBreadth when recent hits are rare and there is spare capacity, one
// when they are common, one fewer than the maximum otherwise.
func (l *ledger) breadth(spare bool) int {
	k := max(1, l.maxBreadth-1)
	if r, ok := l.hitRate.known(); ok {
		switch {
		case r >= 0.6:
			k = 1
		case r < 0.3 && spare:
			k = l.maxBreadth
		}
	} else if spare {
		k = l.maxBreadth
	}
	return k
}

// expectedSaving is the tool time (ms) k guesses are expected to hide if
// their answer comes after latency ms: each rank's average P times the
// tool time, capped by the think time left once the answer is in. ok is
// false when nothing is known yet.
func (l *ledger) expectedSaving(k int, latency float64) (saving float64, ok bool) {
	tool, ok1 := l.toolTime.known()
	think, ok2 := l.think.known()
	if !ok1 {
		return 0, false
	}
	hide := tool
	if ok2 {
		hide = min(tool, think-latency)
	}
	if hide <= 0 {
		return 0, true
	}
	for r := range k {
		saving += l.rankP(r) * hide
	}
	return saving, true
}

// rankP is the average P of guesses at rank over all tools.
func (l *ledger) rankP(rank int) float64 {
	n, hits := 0, 0
	for rt, o := range l.counts {
		if rt.rank == rank {
			n += o.n
			hits += o.hits
		}
	}
	if n < priorOutcomes {
		return prior(rank)
	}
	return float64(hits) / float64(n)
}

func (s *sessionState) hasSeen(k callkey.Key) bool {
	for _, c := range s.seen {
		if c.key == k {
			return true
		}
	}
	return false
}
