package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/ahead-dev/ahead/predict"
	"github.com/ahead-dev/ahead/trace"
)

// Prediction runs after the result, not before it: an authoritative call
// returns its result to the agent, and Message returns to its sender, as
// soon as the event is accounted for and recorded; what the predictor
// makes of the event (tens of microseconds for a conversation model and a
// long message) is worked out by a goroutine of the session's own, in the
// order the events came, while the agent reads the result and the model
// thinks.
//
// Nothing is speculated later than before: a call that arrives while its
// session still has prediction pending waits for it before it looks for
// its speculative counterpart (waitPredictedLocked). An agent that sends
// its next call the moment it has a result therefore finds everything the
// previous result predicted, exactly as when prediction ran before the
// result was returned, and waits no longer than it did then; an agent that
// thinks first (any model) waits not at all.

// afterWork is one event the predictor is still to see.
type afterWork struct {
	kind afterKind
	ev   trace.Event // the call or message (afterObserve, afterHear)
	seq  int         // the call its predictions are for
}

type afterKind uint8

const (
	afterObserve afterKind = iota // a call's result: Predictor.Observe
	afterHear                     // a message: predict.Hearer.Hear
	afterStart                    // a session's start: Starter.Start
	afterDeclare                  // tools declared: predict.Declarer.Declare
)

// maxAfter bounds the events a session may have waiting for the
// predictor; a Message beyond it waits for the queue to drain.
const maxAfter = 16

// afterLocked queues w for s's predictor goroutine, starting it if none
// runs. It reports false when the engine is closed (no goroutine may start
// then): the caller runs the work itself.
func (e *Engine) afterLocked(s *session, w afterWork) bool {
	if e.st.closed {
		return false
	}
	s.after = append(s.after, w)
	if !s.afterRun {
		s.afterRun = true
		// A go statement with arguments, not wg.Go with a closure: one
		// allocation less on every result.
		e.wg.Add(1)
		go e.predictAfter(s)
	}
	return true
}

// predictAfter is s's predictor goroutine: it runs the queued work in
// order until none is left. The engine owns it (Close waits for it).
func (e *Engine) predictAfter(s *session) {
	defer e.wg.Done()
	for {
		e.lock()
		// Work queued before the session was dropped or the engine
		// closed is still done, as it was when prediction came before
		// the result: the predictor learns from every result it was
		// given, and speculate declines to run anything for a dropped
		// session or a closed engine.
		if len(s.after) == 0 {
			s.after = nil
			s.afterRun = false
			if s.afterDone != nil {
				e.st.tail.wake = s.afterDone
				s.afterDone = nil
			}
			e.unlock()
			return
		}
		w := s.after[0]
		s.after[0] = afterWork{} // the event's output may be large
		s.after = s.after[1:]
		e.unlock()
		e.predict(s, w)
	}
}

// predict runs one piece of prediction work and speculates on its
// predictions.
func (e *Engine) predict(s *session, w afterWork) {
	var preds []predict.Prediction
	switch w.kind {
	case afterObserve:
		preds = e.opts.Predictor.Observe(w.ev)
	case afterHear:
		preds = e.opts.Predictor.(predict.Hearer).Hear(w.ev)
	case afterStart:
		preds = e.opts.Predictor.(predict.Starter).Start(s.id)
	case afterDeclare:
		preds = e.opts.Predictor.(predict.Declarer).Declare(w.ev)
	}
	e.speculate(s, w.seq, preds, e.predictorBytes(s.id))
}

// afterDoneLocked returns the channel closed when s's predictor goroutine
// has drained its queue, made when someone first waits for it (most
// results have nobody waiting).
func (s *session) afterDoneLocked() chan struct{} {
	if s.afterDone == nil {
		s.afterDone = make(chan struct{})
	}
	return s.afterDone
}

// waitPredictedLocked waits, inside the door (state.go) on entry and on return, while
// more than max events of session s wait for the predictor (the one it is
// working on counts). The session may have been dropped and made again
// meanwhile: it returns the session as it is now. It returns ctx's error
// if the caller left first, ErrClosed if the engine closed.
func (e *Engine) waitPredictedLocked(ctx context.Context, s *session, max int, now time.Time) (*session, error) {
	for s.afterRun && len(s.after)+1 > max {
		done := s.afterDoneLocked()
		e.unlock()
		select {
		case <-done:
		case <-ctx.Done():
			e.lock()
			return s, ctx.Err()
		}
		e.lock()
		if e.st.closed {
			return s, ErrClosed
		}
		s = e.sessionLocked(s.id, now)
	}
	return s, nil
}

// Predicted waits until the predictor has caught up with every event the
// engine was handed before the call, and what it predicted was offered
// for speculation, or until ctx is done. A session's calls never need it
// (each waits for its own session's prediction); it is for tests and
// tools that look at the engine's state right after an event.
func (e *Engine) Predicted(ctx context.Context) error {
	e.lock()
	var waits []chan struct{}
	for _, s := range e.st.sessions {
		if s.afterRun {
			waits = append(waits, s.afterDoneLocked())
		}
	}
	e.unlock()
	for _, done := range waits {
		select {
		case <-done:
		case <-ctx.Done():
			return fmt.Errorf("waiting for prediction: %w", ctx.Err())
		}
	}
	return nil
}
