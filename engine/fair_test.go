package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ahead-dev/ahead/backend"
	"github.com/ahead-dev/ahead/engine"
	"github.com/ahead-dev/ahead/sched"
)

// sleepers is a backend whose tool "slow" takes slow and "quick" takes
// quick.
func sleepers(slow, quick time.Duration) backend.Funcs {
	sleep := func(d time.Duration) func(context.Context, json.RawMessage) (string, error) {
		return func(ctx context.Context, _ json.RawMessage) (string, error) {
			select {
			case <-time.After(d):
				return "ok", nil
			case <-ctx.Done():
				return "", ctx.Err()
			}
		}
	}
	return backend.Funcs{"slow": sleep(slow), "quick": sleep(quick)}
}

// Issue 23: ten concurrent 2 s calls to one backend took 2, 4 and 6 s
// through ahead with the default configuration (4 slots per backend) and
// 2 s directly. With the defaults, ahead does not limit the agent's calls.
func TestDefaultsDoNotQueueConcurrentCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := engine.New(&engine.Options{Backends: map[string]engine.Backend{"b": {Backend: sleepers(2*time.Second, 0)}}})
		defer e.Close()
		start := time.Now()
		took := make([]time.Duration, 10)
		var wg sync.WaitGroup
		for i := range took {
			wg.Go(func() {
				if _, err := e.Call(t.Context(), "s", "slow", json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))); err != nil {
					t.Error(err)
				}
				took[i] = time.Since(start)
			})
		}
		wg.Wait()
		for i, d := range took {
			// Direct, each takes 2 s: within 5% of it is what issue 23
			// asks; under synctest it is exact.
			if d != 2*time.Second {
				t.Errorf("call %d took %v through ahead, want 2s as directly", i, d)
			}
		}
	})
}

// Issue 23: one session with 100 calls in flight made another session's
// 1 ms call wait 49.6 s. With the defaults the other session's calls take
// their 1 ms (p99 ≤ 10 ms is the target); with slots, they wait at most one
// tool execution for a slot, however many calls the first session queued.
func TestSessionNotDelayedByAnother(t *testing.T) {
	const slow, quick = 2 * time.Second, time.Millisecond
	for _, c := range []struct {
		name  string
		lim   sched.Limits
		bound time.Duration // the light session's slowest call, at most (so its p99 too)
	}{
		{"default", sched.Limits{}, 10 * time.Millisecond},
		{"slots 4", sched.Limits{Slots: 4}, slow + quick},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := engine.New(&engine.Options{Backends: map[string]engine.Backend{"b": {Backend: sleepers(slow, quick), Limits: c.lim}}})
				defer e.Close()
				// The greedy session keeps 100 calls in flight until the
				// light one is done: each of its agents calls again as
				// soon as a call returns.
				stop := make(chan struct{})
				var greedy sync.WaitGroup
				defer greedy.Wait()
				defer close(stop)
				for i := range 100 {
					greedy.Go(func() {
						for n := 0; ; n++ {
							select {
							case <-stop:
								return
							default:
							}
							if _, err := e.Call(t.Context(), "greedy", "slow", json.RawMessage(fmt.Sprintf(`{"i":%d,"n":%d}`, i, n))); err != nil {
								t.Error(err)
							}
						}
					})
				}
				synctest.Wait()
				var took []time.Duration
				for i := range 100 {
					start := time.Now()
					if _, err := e.Call(t.Context(), "light", "quick", json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))); err != nil {
						t.Fatal(err)
					}
					took = append(took, time.Since(start))
				}
				slices.Sort(took)
				p99 := took[(len(took)*99+99)/100-1]
				if slowest := took[len(took)-1]; slowest > c.bound {
					t.Errorf("light session's slowest call took %v (p99 %v) with 100 calls of another in flight, want at most %v", slowest, p99, c.bound)
				}
				t.Logf("light session's p99 = %v", p99)
			})
		})
	}
}
