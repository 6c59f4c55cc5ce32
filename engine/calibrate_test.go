package engine_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ahead-dev/ahead/engine"
	"github.com/ahead-dev/ahead/policy"
	"github.com/ahead-dev/ahead/predict"
	"github.com/ahead-dev/ahead/trace"
)

// TestHonestP checks that the engine learns what each tool's guesses are
// worth: after every call a predictor guesses a read that never comes with
// p 0.6 and the true next call with p 0.3. The budget affords one
// execution per call, which the read takes while its p is believed; once
// its misses have made its p honest, the true next call gets the budget
// and is reused.
func TestHonestP(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		runs := map[string]int{}
		liar := predict.Func(func(ev trace.Event) []predict.Prediction {
			return []predict.Prediction{
				{Tool: "read", Args: json.RawMessage(fmt.Sprintf(`{"path":"never-%d"}`, ev.Seq)), P: 0.6},
				{Tool: "list", Args: json.RawMessage(fmt.Sprintf(`{"n":%d}`, ev.Seq+1)), P: 0.3},
			}
		})
		pol := readsPolicy()
		pol.Dedup.Strategy, pol.Dedup.MaxPerTool = policy.StrategyAll, 0
		eng := engine.New(&engine.Options{
			Backends:           map[string]engine.Backend{"b": {Backend: slowTools(100*time.Millisecond, runs)}},
			Policy:             pol,
			Predictor:          liar,
			Amplification:      1,
			AmplificationBurst: 1,
		})
		defer eng.Close()
		const calls = 40
		reused := 0
		for i := range calls {
			r, err := eng.Call(t.Context(), "s", "list", json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)))
			if err != nil {
				t.Fatal(err)
			}
			if r.Source == engine.Reused {
				reused++
			}
			time.Sleep(time.Second)
		}
		// The first guesses go to the read until its 0.6 has been seen to
		// be worth less than the list's 0.3. An unclaimed result counts
		// as a miss only when it expires (its TTL: the time the agent may
		// still ask for it), so that takes a few think times. Without
		// calibration the read takes every execution and nothing is
		// reused.
		if reused < calls/2 {
			t.Errorf("%d of %d calls reused, want at least %d: the read that never comes kept the budget", reused, calls, calls/2)
		}
	})
}
