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
	"github.com/ahead-dev/ahead/policy"
	"github.com/ahead-dev/ahead/predict"
	"github.com/ahead-dev/ahead/sched"
	"github.com/ahead-dev/ahead/trace"
)

// halfWrong predicts, after a client's call of p<i>, its next call p<i+1>
// (right) and wrong calls (wrong-1 ... wrong-n), all equally likely: with
// one wrong, half of the speculation is wasted.
func halfWrong(wrong int) predict.Func {
	return func(ev trace.Event) []predict.Prediction {
		var a struct{ I int }
		json.Unmarshal(ev.Args, &a)
		ps := []predict.Prediction{{Tool: "read", Args: json.RawMessage(fmt.Sprintf(`{"i":%d}`, a.I+1)), P: 0.9}}
		for w := range wrong {
			ps = append(ps, predict.Prediction{Tool: "read", Args: json.RawMessage(fmt.Sprintf(`{"i":%d,"wrong":%d}`, a.I, w)), P: 0.9})
		}
		return ps
	}
}

var readAll = &policy.Policy{Tools: map[string]policy.Tool{"read": {Allow: true}}, Dedup: policy.Dedup{Strategy: policy.StrategyAll}}

// startLog is a backend whose calls take d, and windDown more to return
// once cancelled (a backend does not stop at once); it logs when each call
// started, by session and arguments, speculative or not.
type startLog struct {
	d, windDown time.Duration
	mu          sync.Mutex
	auth, spec  map[string]time.Time
}

func (l *startLog) Call(ctx context.Context, req backend.Request) (backend.Response, error) {
	l.mu.Lock()
	k := req.Session + string(req.Args)
	if req.Speculative {
		l.spec[k] = time.Now()
	} else {
		l.auth[k] = time.Now()
	}
	l.mu.Unlock()
	select {
	case <-time.After(l.d):
		return backend.Response{Output: string(req.Args)}, nil
	case <-ctx.Done():
		time.Sleep(l.windDown)
		return backend.Response{}, ctx.Err()
	}
}

// Issue 13, non-interference measured: under heavy speculation (at least
// one speculative start per call, half of them wrong, every slot busy), no
// authoritative call waits for a slot that speculation holds.
//
// The bound: the preemption latency, the time from an authoritative call's
// arrival to its start when every slot is held by speculation, is zero.
// The scheduler cancels the lowest-utility speculative execution and hands
// its slot over at once; it does not wait for the cancelled backend call to
// return (here windDown, 5 ms, later). Authoritative calls never wait for
// each other either (as many clients as slots), so every call whose
// execution starts after it arrives must start the instant it arrives.
func TestNoAuthoritativeWaitForSpeculation(t *testing.T) {
	const (
		slots, clients, calls = 4, 4, 100
		toolTime, think       = 10 * time.Millisecond, 3 * time.Millisecond
		windDown              = 5 * time.Millisecond
		bound                 = 0 // the preemption latency, see above
	)
	synctest.Test(t, func(t *testing.T) {
		log := &startLog{d: toolTime, windDown: windDown, auth: map[string]time.Time{}, spec: map[string]time.Time{}}
		eng := engine.New(&engine.Options{
			Backends:      map[string]engine.Backend{"b": {Backend: log, Limits: sched.Limits{Slots: slots}}},
			Policy:        readAll,
			Predictor:     halfWrong(1),
			Amplification: -1,
		})
		defer eng.Close()
		type arrival struct {
			key    string
			at     time.Time
			source engine.Source
		}
		var mu sync.Mutex
		var arrivals []arrival
		var wg sync.WaitGroup
		for c := range clients {
			wg.Go(func() {
				s := fmt.Sprintf("c%d", c)
				for i := range calls {
					args := fmt.Sprintf(`{"i":%d}`, i)
					at := time.Now()
					res, err := eng.Call(t.Context(), s, "read", json.RawMessage(args))
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					arrivals = append(arrivals, arrival{s + args, at, res.Source})
					mu.Unlock()
					time.Sleep(think)
				}
			})
		}
		wg.Wait()
		synctest.Wait()

		log.mu.Lock()
		defer log.mu.Unlock()
		var waited []string
		for _, a := range arrivals {
			var start time.Time
			switch a.source {
			case engine.Executed:
				start = log.auth[a.key]
			case engine.Promoted:
				start = log.spec[a.key] // promoted while queued: started as authoritative
			default:
				continue
			}
			if w := start.Sub(a.at); w > bound {
				waited = append(waited, fmt.Sprintf("%s (%s) waited %v", a.key, a.source, w))
			}
		}
		if len(waited) > 0 {
			t.Errorf("%d of %d calls waited longer than the preemption latency (%v) for a slot:\n%v", len(waited), len(arrivals), time.Duration(bound), waited[:min(10, len(waited))])
		}
		st := eng.Stats()
		t.Logf("calls %d: executed %d, promoted %d, reused %d; speculative starts %d, preempted %d",
			st.Calls, st.Executed, st.Promoted, st.Reused, st.SpecStarted, st.Outcomes[engine.OutcomePreempted])
		// The test means something only if speculation was heavy and
		// held the slots when calls came.
		if st.SpecStarted < st.Calls {
			t.Errorf("%d speculative starts in %d calls, want at least one per call", st.SpecStarted, st.Calls)
		}
		if st.Outcomes[engine.OutcomePreempted] == 0 {
			t.Error("no speculative execution was preempted: the slots were never all held by speculation")
		}
	})
}

// BenchmarkNonInterferenceHeavy measures authoritative latency on a
// saturated backend (8 clients on 4 slots) with speculation off and on,
// side by side, where speculation is heavy: every call predicts its
// client's next call and a wrong one (half wasted), with no amplification
// cap. It reports p50 and p99 of each, their ratios on/off, and the
// speculative starts per call.
func BenchmarkNonInterferenceHeavy(b *testing.B) {
	const slots, clients, calls, toolTime, think = 4, 8, 800, 2 * time.Millisecond, time.Millisecond
	slow := backend.Funcs{"read": func(ctx context.Context, a json.RawMessage) (string, error) {
		select {
		case <-time.After(toolTime):
			return string(a), nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}}
	run := func(pred predict.Predictor) ([]time.Duration, engine.Stats) {
		eng := engine.New(&engine.Options{
			Backends:      map[string]engine.Backend{"b": {Backend: slow, Limits: sched.Limits{Slots: slots}}},
			Policy:        readAll,
			Predictor:     pred,
			Amplification: -1,
		})
		defer eng.Close()
		var mu sync.Mutex
		var lat []time.Duration
		var wg sync.WaitGroup
		for c := range clients {
			wg.Go(func() {
				for i := range calls / clients {
					t0 := time.Now()
					_, err := eng.Call(context.Background(), fmt.Sprintf("c%d", c), "read", json.RawMessage(fmt.Sprintf(`{"i":%d}`, i)))
					d := time.Since(t0)
					if err != nil {
						b.Error(err)
						return
					}
					mu.Lock()
					lat = append(lat, d)
					mu.Unlock()
					time.Sleep(think)
				}
			})
		}
		wg.Wait()
		return lat, eng.Stats()
	}
	pct := func(l []time.Duration, p float64) time.Duration { return l[int(p*float64(len(l)-1))] }
	var off, on []time.Duration
	var starts, served int64
	for b.Loop() {
		// Interleave the two so machine noise hits both alike.
		l, _ := run(nil)
		off = append(off, l...)
		l, st := run(halfWrong(1))
		on = append(on, l...)
		starts += st.SpecStarted
		served += st.Calls
	}
	slices.Sort(off)
	slices.Sort(on)
	b.ReportMetric(float64(starts)/float64(served), "spec-starts/call")
	b.ReportMetric(float64(pct(off, 0.5).Microseconds()), "off-p50-µs")
	b.ReportMetric(float64(pct(off, 0.99).Microseconds()), "off-p99-µs")
	b.ReportMetric(float64(pct(on, 0.5).Microseconds()), "on-p50-µs")
	b.ReportMetric(float64(pct(on, 0.99).Microseconds()), "on-p99-µs")
	b.ReportMetric(float64(pct(on, 0.5))/float64(pct(off, 0.5)), "p50-ratio")
	b.ReportMetric(float64(pct(on, 0.99))/float64(pct(off, 0.99)), "p99-ratio")
}
