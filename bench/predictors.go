package bench

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"github.com/ahead-dev/ahead/callkey"
	"github.com/ahead-dev/ahead/predict"
	"github.com/ahead-dev/ahead/trace"
)

// tracker is the predictor the engine of a mode sees. It first tells the
// harness that the observed call is finished — the engine observes a call
// before it speculates on it, so the replay backend's position is up to date
// before any speculation of the next step starts — and then asks the mode's
// own predictor. It is a Starter, so that every mode may speculate a
// session's first call when the agent begins (engine.Begin).
type tracker struct {
	agents map[string]*agent // read-only during the run
	inner  modePredictor
}

var (
	_ predict.Starter  = (*tracker)(nil)
	_ predict.Hearer   = (*tracker)(nil)
	_ predict.Declarer = (*tracker)(nil)
)

// modePredictor predicts with access to the replayed session (the oracle
// needs it; the others ignore it). start predicts a session's first calls,
// before it makes any; a is nil for a session the harness does not replay.
type modePredictor interface {
	start(session string, a *agent) []predict.Prediction
	predict(ev trace.Event, a *agent) []predict.Prediction
	forget(session string)
}

func (t *tracker) Start(session string) []predict.Prediction {
	return t.inner.start(session, t.agents[session])
}

func (t *tracker) Observe(ev trace.Event) []predict.Prediction {
	a := t.agents[ev.Session]
	if a != nil {
		a.observed(ev)
	}
	return t.inner.predict(ev, a)
}

func (t *tracker) Forget(session string) { t.inner.forget(session) }

// Hear passes a message to the mode's predictor if it listens.
func (t *tracker) Hear(msg trace.Event) []predict.Prediction {
	if h, ok := t.inner.(predict.Hearer); ok {
		return h.Hear(msg)
	}
	return nil
}

// Declare passes the tools declared to a session to the mode's predictor
// if it reads them.
func (t *tracker) Declare(tools trace.Event) []predict.Prediction {
	if d, ok := t.inner.(predict.Declarer); ok {
		return d.Declare(tools)
	}
	return nil
}

// external adapts ahead's own predictor.
type external struct{ p predict.Predictor }

func (x external) start(session string, _ *agent) []predict.Prediction {
	if st, ok := x.p.(predict.Starter); ok {
		return st.Start(session)
	}
	return nil
}

func (x external) predict(ev trace.Event, _ *agent) []predict.Prediction { return x.p.Observe(ev) }
func (x external) forget(session string)                                 { x.p.Forget(session) }

// Hear passes a message to ahead's predictor if it listens.
func (x external) Hear(msg trace.Event) []predict.Prediction {
	if h, ok := x.p.(predict.Hearer); ok {
		return h.Hear(msg)
	}
	return nil
}

// Declare passes the tools declared to a session to ahead's predictor if
// it reads them.
func (x external) Declare(tools trace.Event) []predict.Prediction {
	if d, ok := x.p.(predict.Declarer); ok {
		return d.Declare(tools)
	}
	return nil
}

// oracle knows every session: when the session begins and when the last
// call of a step finishes (the start of each think window) it predicts the
// next step's calls exactly, with probability 1, and says a call the agent
// makes again is made again (Repeat): the engine must not take it for a
// result the agent already holds.
type oracle struct{}

func (o oracle) start(_ string, a *agent) []predict.Prediction { return o.next(a) }

func (o oracle) predict(_ trace.Event, a *agent) []predict.Prediction { return o.next(a) }

// next predicts the agent's next step if it is thinking.
func (oracle) next(a *agent) []predict.Prediction {
	if a == nil {
		return nil
	}
	calls := a.nextStepIfIdle()
	preds := make([]predict.Prediction, 0, len(calls))
	for _, ev := range calls {
		preds = append(preds, predict.Prediction{Tool: ev.Tool, Args: ev.Args, P: 1, Repeat: true})
	}
	return preds
}

func (oracle) forget(string) {}

// transitions counts which tool follows which, over the mining sessions
// and, online, over every observed call: the baselines' knowledge. The
// start of a session is the tool "".
type transitions struct {
	mu    sync.Mutex // protects everything below
	next  map[string]map[string]int
	total map[string]int
	last  map[string]string                     // session → last tool
	args  map[string]map[string]json.RawMessage // session → tool → last args
}

func newTransitions(mine []trace.Session) *transitions {
	t := &transitions{
		next:  make(map[string]map[string]int),
		total: make(map[string]int),
		last:  make(map[string]string),
		args:  make(map[string]map[string]json.RawMessage),
	}
	for _, s := range mine {
		prev := ""
		for _, ev := range s.Events {
			t.countLocked(prev, ev.Tool)
			prev = ev.Tool
		}
	}
	return t
}

func (t *transitions) countLocked(from, to string) {
	m := t.next[from]
	if m == nil {
		m = make(map[string]int)
		t.next[from] = m
	}
	m[to]++
	t.total[from]++
}

// observe learns from ev and returns the ranked next tools after it with
// their probabilities, and the session's last arguments per tool.
func (t *transitions) observe(ev trace.Event) ([]toolP, map[string]json.RawMessage) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.countLocked(t.last[ev.Session], ev.Tool)
	t.last[ev.Session] = ev.Tool
	a := t.args[ev.Session]
	if a == nil {
		a = make(map[string]json.RawMessage)
		t.args[ev.Session] = a
	}
	a[ev.Tool] = ev.Args
	return t.rankedLocked(ev.Tool), a
}

// first returns the ranked first tools of a session: what follows the
// session start "" in the mining sessions (and in the sessions observed
// so far).
func (t *transitions) first() []toolP {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.rankedLocked("")
}

// rankedLocked returns the tools seen after from, most frequent first,
// with their probabilities.
func (t *transitions) rankedLocked(from string) []toolP {
	var ranked []toolP
	for tool, n := range t.next[from] {
		ranked = append(ranked, toolP{tool, float64(n) / float64(t.total[from])})
	}
	slices.SortFunc(ranked, func(x, y toolP) int {
		if c := cmp.Compare(y.p, x.p); c != 0 {
			return c
		}
		return cmp.Compare(x.tool, y.tool)
	})
	return ranked
}

func (t *transitions) forget(session string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.last, session)
	delete(t.args, session)
}

type toolP struct {
	tool string
	p    float64
}

// orion pre-warms the k most likely next tools (tool-only predictions,
// which the engine turns into warm-ups).
type orion struct {
	t *transitions
	k int
}

// start warms the k most frequent first tools of the mining sessions.
func (o orion) start(string, *agent) []predict.Prediction { return o.warm(o.t.first()) }

func (o orion) predict(ev trace.Event, _ *agent) []predict.Prediction {
	ranked, _ := o.t.observe(ev)
	return o.warm(ranked)
}

func (o orion) warm(ranked []toolP) []predict.Prediction {
	var preds []predict.Prediction
	for _, tp := range ranked[:min(o.k, len(ranked))] {
		preds = append(preds, predict.Prediction{Tool: tp.tool, P: tp.p})
	}
	return preds
}

func (o orion) forget(session string) { o.t.forget(session) }

// specFaaS speculates the most likely next tool with the arguments of its
// previous call in the session; nothing if the session has not called it.
type specFaaS struct{ t *transitions }

// start predicts nothing: a session that has made no call has no previous
// arguments to reuse, and SpecFaaS speculates only with those.
func (specFaaS) start(string, *agent) []predict.Prediction { return nil }

func (s specFaaS) predict(ev trace.Event, _ *agent) []predict.Prediction {
	ranked, args := s.t.observe(ev)
	if len(ranked) == 0 {
		return nil
	}
	best := ranked[0]
	a, ok := args[best.tool]
	if !ok {
		return nil
	}
	// Repeating earlier calls is SpecFaaS's whole hypothesis: the engine
	// must not hold it back as it does ahead's own guesses of calls made.
	return []predict.Prediction{{Tool: best.tool, Args: a, P: best.p, Repeat: true}}
}

func (s specFaaS) forget(session string) { s.t.forget(session) }

// allWrong predicts, with full confidence, calls of the k most likely next
// tools whose arguments no recorded call has: every one runs (if the
// policy allows the tool), fails to match, and is wasted.
type allWrong struct {
	t *transitions
	k int

	mu sync.Mutex // protects n
	n  map[string]int
}

// wrongArg is the argument name no real tool call has.
const wrongArg = "__ahead_bench_all_wrong"

// start predicts the k most frequent first tools, wrongly, so that the
// control is wrong from the session's start like ahead may be.
func (w *allWrong) start(session string, _ *agent) []predict.Prediction {
	return w.wrong(session, w.t.first())
}

func (w *allWrong) predict(ev trace.Event, _ *agent) []predict.Prediction {
	ranked, _ := w.t.observe(ev)
	return w.wrong(ev.Session, ranked)
}

// wrong numbers its guesses by session, so that what they are (and the
// latency modelled for them) does not depend on the order in which
// sessions replayed at once happen to be predicted.
func (w *allWrong) wrong(session string, ranked []toolP) []predict.Prediction {
	var preds []predict.Prediction
	for _, tp := range ranked[:min(w.k, len(ranked))] {
		w.mu.Lock()
		w.n[session]++
		n := w.n[session]
		w.mu.Unlock()
		args := fmt.Appendf(nil, `{%q:"%s/%d"}`, wrongArg, session, n)
		preds = append(preds, predict.Prediction{Tool: tp.tool, Args: args, P: 1})
	}
	return preds
}

func (w *allWrong) forget(session string) { w.t.forget(session) }

// keyOf returns the call key of an event; ok is false for arguments that
// are not a canonicalisable JSON object.
func keyOf(ev trace.Event) (callkey.Key, bool) {
	k, err := callkey.Make(ev.Tool, ev.Args)
	return k, err == nil
}
