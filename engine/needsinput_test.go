package engine_test

import (
	"context"
	"encoding/json"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ahead-dev/ahead/backend"
	"github.com/ahead-dev/ahead/engine"
)

// asking is a backend whose read takes a second and asks for the user's
// input (NeedsInput) when ask is set; it counts runs.
type asking struct {
	ask  bool
	runs int
}

func (a *asking) Call(ctx context.Context, req backend.Request) (backend.Response, error) {
	if req.Tool == "read" {
		a.runs++
	}
	select {
	case <-time.After(time.Second):
	case <-ctx.Done():
		return backend.Response{}, ctx.Err()
	}
	return backend.Response{Output: req.Tool + string(req.Args), NeedsInput: a.ask && req.Tool == "read"}, nil
}

// TestNeedsInputNeverReused: a speculative run that asks for the user's
// input is discarded, complete (reuse) or running (promotion): the agent's
// call executes itself, and the discarded run is counted apart from
// failures and never as saved time.
func TestNeedsInputNeverReused(t *testing.T) {
	for _, tc := range []struct {
		name  string
		think time.Duration
	}{
		{"completed before the call", 2 * time.Second},
		{"running when the call came", 400 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := &asking{ask: true}
				eng := engine.New(&engine.Options{
					Backends:  map[string]engine.Backend{"b": {Backend: b}},
					Policy:    readsPolicy(),
					Predictor: next,
				})
				defer eng.Close()
				if _, err := eng.Call(t.Context(), "s1", "list", json.RawMessage(`{}`)); err != nil {
					t.Fatal(err)
				}
				time.Sleep(tc.think)
				res, err := eng.Call(t.Context(), "s1", "read", json.RawMessage(`{"path":"a"}`))
				if err != nil {
					t.Fatal(err)
				}
				if res.Source != engine.Executed {
					t.Errorf("source = %s, want executed (never a speculative request for input)", res.Source)
				}
				if b.runs != 2 {
					t.Errorf("read ran %d times, want 2 (speculated, then the agent's own)", b.runs)
				}
				st := eng.Stats()
				if n := st.Outcomes[engine.OutcomeNeedsInput]; n != 1 {
					t.Errorf("outcomes = %v, want one %s", st.Outcomes, engine.OutcomeNeedsInput)
				}
				if st.Reused+st.Promoted != 0 || st.Saved != 0 || st.Outcomes[engine.OutcomeFailed] != 0 {
					t.Errorf("reused %d, promoted %d, saved %v, failed %d; want none",
						st.Reused, st.Promoted, st.Saved, st.Outcomes[engine.OutcomeFailed])
				}
			})
		})
	}
}

// TestContinueIsItsOwnCall: a call continued with the user's input never
// takes the speculative result of the call without it, which stays for
// the agent's plain call.
func TestContinueIsItsOwnCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &asking{}
		eng := engine.New(&engine.Options{
			Backends:  map[string]engine.Backend{"b": {Backend: b}},
			Policy:    readsPolicy(),
			Predictor: next,
		})
		defer eng.Close()
		if _, err := eng.Call(t.Context(), "s1", "list", json.RawMessage(`{}`)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second)
		res, err := eng.Continue(t.Context(), "s1", "read", json.RawMessage(`{"path":"a"}`))
		if err != nil {
			t.Fatal(err)
		}
		if res.Source != engine.Executed || b.runs != 2 {
			t.Errorf("continued call: source %s after %d runs, want executed after 2", res.Source, b.runs)
		}
		res, err = eng.Call(t.Context(), "s1", "read", json.RawMessage(`{"path":"a"}`))
		if err != nil {
			t.Fatal(err)
		}
		if res.Source != engine.Reused {
			t.Errorf("plain call after it: source %s, want reused", res.Source)
		}
	})
}
