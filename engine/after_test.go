package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ahead-dev/ahead/engine"
	"github.com/ahead-dev/ahead/predict"
	"github.com/ahead-dev/ahead/trace"
)

// gated predicts as listener does, once its gate is open: until then
// each Observe and Hear blocks. It notes the events in the order it saw
// them.
type gated struct {
	gate chan struct{}
	mu   sync.Mutex
	seen []string
}

func newGated() *gated { return &gated{gate: make(chan struct{})} }

func (g *gated) note(s string) {
	g.mu.Lock()
	g.seen = append(g.seen, s)
	g.mu.Unlock()
}

func (g *gated) Seen() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.seen)
}

func (g *gated) Observe(ev trace.Event) []predict.Prediction {
	g.note(ev.Tool)
	<-g.gate
	return next(ev)
}

func (g *gated) Hear(msg trace.Event) []predict.Prediction {
	g.note(msg.Content)
	<-g.gate
	return listener{}.Hear(msg)
}

func (g *gated) Forget(string) {}

// start runs f in a goroutine and returns a channel closed when it returned.
func start(f func()) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	return done
}

func returned(done <-chan struct{}) bool {
	synctest.Wait()
	select {
	case <-done:
		return true
	default:
		return false
	}
}

// TestResultBeforePrediction: the agent has its result while the
// predictor still works on it, and its next call waits for the
// predictions, so that they serve it as if prediction had come first.
func TestResultBeforePrediction(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		runs := map[string]int{}
		g := newGated()
		eng := engine.New(&engine.Options{
			Backends:  map[string]engine.Backend{"b": {Backend: slowTools(time.Second, runs)}},
			Policy:    readsPolicy(),
			Predictor: g,
		})
		defer eng.Close()
		ctx := t.Context()
		var err error
		first := start(func() { _, err = eng.Call(ctx, "s", "list", nil) })
		time.Sleep(time.Second)
		if !returned(first) {
			t.Fatal("the call waits for the predictor")
		}
		if err != nil {
			t.Fatal(err)
		}
		var res engine.Result
		second := start(func() { res, err = eng.Call(ctx, "s", "read", json.RawMessage(`{"path":"a"}`)) })
		if returned(second) {
			t.Fatal("the next call did not wait for the previous result's predictions")
		}
		close(g.gate)
		<-second
		if err != nil {
			t.Fatal(err)
		}
		if res.Source != engine.Promoted {
			t.Errorf("next call served by %s, want promoted (its prediction came before it looked)", res.Source)
		}
		if got := runs[`read{"path":"a"}`]; got != 1 {
			t.Errorf("read ran %d times, want 1", got)
		}
	})
}

// TestMessageBeforeHearing: Message returns before the predictor has
// heard the message; the session's first call still finds what it
// predicted.
func TestMessageBeforeHearing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		runs := map[string]int{}
		g := newGated()
		eng := engine.New(&engine.Options{
			Backends:  map[string]engine.Backend{"b": {Backend: slowTools(time.Second, runs)}},
			Policy:    readsPolicy(),
			Predictor: g,
		})
		defer eng.Close()
		ctx := t.Context()
		var err error
		sent := start(func() { err = eng.Message(ctx, "s", trace.RoleUser, "open b.txt") })
		if !returned(sent) {
			t.Fatal("Message waits for the predictor")
		}
		if err != nil {
			t.Fatal(err)
		}
		close(g.gate)
		time.Sleep(2 * time.Second) // the model thinks
		res, err := eng.Call(ctx, "s", "read", json.RawMessage(`{"path":"b.txt"}`))
		if err != nil {
			t.Fatal(err)
		}
		if res.Source != engine.Reused {
			t.Errorf("first call served by %s, want reused", res.Source)
		}
	})
}

// TestPredictorOrder: the predictor sees a session's messages and
// results in the order the engine had them, though it sees them later.
func TestPredictorOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGated()
		close(g.gate)
		eng := engine.New(&engine.Options{
			Backends:  map[string]engine.Backend{"b": {Backend: slowTools(0, map[string]int{})}},
			Policy:    readsPolicy(),
			Predictor: g,
		})
		defer eng.Close()
		ctx := t.Context()
		var want []string
		for i, step := range []string{"sys", "u1", "list", "read", "a1", "u2", "u3", "list", "a2", "read", "list"} {
			if step == "list" || step == "read" {
				if _, err := eng.Call(ctx, "s", step, json.RawMessage(`{"path":"a"}`)); err != nil {
					t.Fatal(err)
				}
			} else {
				role := trace.RoleUser
				if i == 0 {
					role = trace.RoleSystem
				}
				if err := eng.Message(ctx, "s", role, step); err != nil {
					t.Fatal(err)
				}
			}
			want = append(want, step)
		}
		synctest.Wait()
		if got := g.Seen(); !slices.Equal(got, want) {
			t.Errorf("predictor saw %q, want %q", got, want)
		}
	})
}

// TestWaitForPredictionCancelled: a call waiting for its session's
// prediction leaves when its context is done.
func TestWaitForPredictionCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGated()
		eng := engine.New(&engine.Options{
			Backends:  map[string]engine.Backend{"b": {Backend: slowTools(0, map[string]int{})}},
			Policy:    readsPolicy(),
			Predictor: g,
		})
		defer eng.Close()
		defer close(g.gate) // before Close, which waits for the predictor
		if _, err := eng.Call(t.Context(), "s", "list", nil); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		var err error
		waiting := start(func() { _, err = eng.Call(ctx, "s", "read", json.RawMessage(`{"path":"a"}`)) })
		if returned(waiting) {
			t.Fatal("the call did not wait for the predictor")
		}
		cancel()
		<-waiting
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want context.Canceled", err)
		}
	})
}

// TestCloseWaitsForPrediction: the predictor goroutine is the engine's:
// Close returns only after it stopped.
func TestCloseWaitsForPrediction(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGated()
		eng := engine.New(&engine.Options{
			Backends:  map[string]engine.Backend{"b": {Backend: slowTools(0, map[string]int{})}},
			Policy:    readsPolicy(),
			Predictor: g,
		})
		if _, err := eng.Call(t.Context(), "s", "list", nil); err != nil {
			t.Fatal(err)
		}
		closed := start(eng.Close)
		if returned(closed) {
			t.Fatal("Close returned while the predictor was still running")
		}
		close(g.gate)
		<-closed
		if got := g.Seen(); !slices.Equal(got, []string{"list"}) {
			t.Errorf("predictor saw %q, want [list]", got)
		}
	})
}
