package learn

import (
	"sync/atomic"

	"github.com/ahead-dev/ahead/convo"
	"github.com/ahead-dev/ahead/predict"
	"github.com/ahead-dev/ahead/trace"
)

// relearnt is the conversation model a Learner serves beside its
// patterns: relearning swaps it atomically, as it swaps the patterns
// (issue 24 item 1). Before any model (no messages heard yet) it predicts
// nothing.
type relearnt struct {
	cur atomic.Pointer[convo.Predictor]
}

var (
	_ predict.Predictor = (*relearnt)(nil)
	_ predict.Starter   = (*relearnt)(nil)
	_ predict.Hearer    = (*relearnt)(nil)
)

func (r *relearnt) Observe(ev trace.Event) []predict.Prediction {
	if p := r.cur.Load(); p != nil {
		return p.Observe(ev)
	}
	return nil
}

func (r *relearnt) Start(session string) []predict.Prediction {
	if p := r.cur.Load(); p != nil {
		return p.Start(session)
	}
	return nil
}

func (r *relearnt) Hear(msg trace.Event) []predict.Prediction {
	if p := r.cur.Load(); p != nil {
		return p.Hear(msg)
	}
	return nil
}

func (r *relearnt) Forget(session string) {
	if p := r.cur.Load(); p != nil {
		p.Forget(session)
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
