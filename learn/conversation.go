package learn

import (
	"slices"
	"sync/atomic"

	"github.com/ahead-dev/ahead/convo"
	"github.com/ahead-dev/ahead/predict"
	"github.com/ahead-dev/ahead/trace"
)

// relearnt is the conversation model a Learner serves beside its
// patterns: relearning swaps it atomically, as it swaps the patterns
// (issue 24 item 1). Before any model (no messages heard yet), and for
// the tools the model has not learnt, the built-in default speaks
// (fresh, when set: issue 24 item 2).
type relearnt struct {
	cur   atomic.Pointer[convo.Predictor]
	fresh *convo.Fresh
}

var (
	_ predict.Predictor = (*relearnt)(nil)
	_ predict.Starter   = (*relearnt)(nil)
	_ predict.Hearer    = (*relearnt)(nil)
)

// join merges the model's predictions with the default's for the tools
// the model has not learnt.
func (r *relearnt) join(p *convo.Predictor, learnt, def []predict.Prediction) []predict.Prediction {
	if p != nil && len(def) > 0 {
		def = slices.DeleteFunc(def, func(d predict.Prediction) bool { return p.Knows(d.Tool) })
	}
	switch {
	case len(def) == 0:
		return learnt
	case len(learnt) == 0:
		return def
	}
	return predict.Merge(learnt, def)
}

func (r *relearnt) Observe(ev trace.Event) []predict.Prediction {
	p := r.cur.Load()
	var learnt, def []predict.Prediction
	if p != nil {
		learnt = p.Observe(ev)
	}
	if r.fresh != nil {
		def = r.fresh.Observe(ev)
	}
	return r.join(p, learnt, def)
}

func (r *relearnt) Start(session string) []predict.Prediction {
	p := r.cur.Load()
	var learnt, def []predict.Prediction
	if p != nil {
		learnt = p.Start(session)
	}
	if r.fresh != nil {
		def = r.fresh.Start(session)
	}
	return r.join(p, learnt, def)
}

func (r *relearnt) Hear(msg trace.Event) []predict.Prediction {
	p := r.cur.Load()
	var learnt, def []predict.Prediction
	if p != nil {
		learnt = p.Hear(msg)
	}
	if r.fresh != nil {
		def = r.fresh.Hear(msg)
	}
	return r.join(p, learnt, def)
}

func (r *relearnt) Forget(session string) {
	if p := r.cur.Load(); p != nil {
		p.Forget(session)
	}
	if r.fresh != nil {
		r.fresh.Forget(session)
	}
}

// replay shows p a live session's kept messages and calls in the order
// they came (a message's Seq is the number of calls before it), so that
// a swapped-in model keeps the session's state.
func replay(p *convo.Predictor, log []trace.Event) {
	for _, ev := range log {
		if ev.Kind == trace.KindMessage {
			p.Hear(ev)
		} else {
			p.Observe(ev)
		}
	}
}

// SessionBytes is what the default keeps for a session (the model's
// window is bounded by its MaxBytes, as before the default).
func (r *relearnt) SessionBytes(session string) int64 {
	if r.fresh == nil {
		return 0
	}
	return r.fresh.SessionBytes(session)
}
