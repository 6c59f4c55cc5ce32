package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ahead-dev/ahead/backend"
	"github.com/ahead-dev/ahead/engine"
	"github.com/ahead-dev/ahead/policy"
	"github.com/ahead-dev/ahead/predict"
	"github.com/ahead-dev/ahead/sched"
	"github.com/ahead-dev/ahead/trace"
)

var instant = backend.Funcs{
	"list": func(context.Context, json.RawMessage) (string, error) { return `["a","b"]`, nil },
	"read": func(_ context.Context, a json.RawMessage) (string, error) { return string(a), nil },
}

// BenchmarkCallMiss is the engine's overhead on an authoritative call with
// no speculative counterpart, on an instant in-process backend.
func BenchmarkCallMiss(b *testing.B) {
	eng := engine.New(&engine.Options{
		Backends: map[string]engine.Backend{"b": {Backend: instant}},
		Policy:   readsPolicy(),
	})
	defer eng.Close()
	ctx := context.Background()
	args := json.RawMessage(`{"path": "a/b/c.txt", "limit": 100}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := eng.Call(ctx, "s", "read", args); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCallMissOwned is BenchmarkCallMiss with a context marked
// KeepRunning, as the HTTP API and 2026-07-28 requests to /mcp pass: the
// call is then served on a goroutine of its own, so that the requester may
// leave while it runs (orphan.go). Side by side with a call served inline:
// the difference is what orphaning costs a call.
func BenchmarkCallMissOwned(b *testing.B) {
	for _, tc := range []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
	}{
		{"inline", func() (context.Context, context.CancelFunc) { return context.Background(), func() {} }},
		{"owned", func() (context.Context, context.CancelFunc) {
			return context.WithCancel(engine.KeepRunning(context.Background()))
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			eng := engine.New(&engine.Options{
				Backends: map[string]engine.Backend{"b": {Backend: instant}},
				Policy:   readsPolicy(),
			})
			defer eng.Close()
			ctx, cancel := tc.ctx()
			defer cancel()
			args := json.RawMessage(`{"path": "a/b/c.txt", "limit": 100}`)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := eng.Call(ctx, "s", "read", args); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCallReuse is the cost of an authoritative call served from a
// completed speculative result. Results are prepared in batches with the
// timer stopped, so it uses the b.N loop rather than b.Loop.
func BenchmarkCallReuse(b *testing.B) {
	pred := predict.Func(func(ev trace.Event) []predict.Prediction {
		if ev.Tool == "list" {
			// Repeat: each batch reads again what the last one was served
			// (the no-rerun rule would decline it otherwise).
			return []predict.Prediction{{Tool: "read", Args: json.RawMessage(`{"path": "a/b/c.txt", "limit": 100}`), P: 0.9, Repeat: true}}
		}
		return nil
	})
	const batch = 1000
	eng := engine.New(&engine.Options{
		// More slots than the budget: setup calls must not preempt.
		Backends:   map[string]engine.Backend{"b": {Backend: instant, Limits: sched.Limits{Slots: 128}}},
		Policy:     readsPolicy(),
		Predictor:  pred,
		SpecBudget: 64,
		MaxEntries: batch,
		// Setup runs on a busy machine; no prepared job may miss its start.
		StartDeadline: time.Hour,
		// What is measured is the reuse, not the budget or the lifetime:
		// no result may be declined or expire while a batch is prepared.
		Amplification: -1,
		DefaultTTL:    time.Hour,
	})
	defer eng.Close()
	// Told each time a result is filed, under the engine's lock: room
	// for a whole batch, so the engine never waits on the benchmark.
	filed := make(chan struct{}, batch)
	engine.OnFiled(eng, func() { filed <- struct{}{} })
	ctx := context.Background()
	args := json.RawMessage(`{"limit": 100, "path": "a/b/c.txt"}`)
	sessions := make([]string, batch)
	b.ReportAllocs()
	for done := 0; done < b.N; done += batch {
		b.StopTimer()
		// New sessions per batch: a session that already read the file
		// is not speculated the same read again.
		for i := range sessions {
			sessions[i] = fmt.Sprintf("s%d-%d", done, i)
		}
		n := min(batch, b.N-done)
		for _, s := range sessions[:n] {
			if _, err := eng.Call(ctx, s, "list", nil); err != nil {
				b.Fatal(err)
			}
		}
		timeout := time.NewTimer(time.Minute)
		for range n {
			select {
			case <-filed:
			case <-timeout.C:
				b.Fatalf("speculation did not complete: %+v", eng.Stats().Totals)
			}
		}
		timeout.Stop()
		b.StartTimer()
		for _, s := range sessions[:n] {
			res, err := eng.Call(ctx, s, "read", args)
			if err != nil || res.Source != engine.Reused {
				b.Fatalf("session %s: %v %s", s, err, res.Source)
			}
		}
	}
}

// BenchmarkNonInterference measures authoritative latency with the backend
// saturated, speculation off and on with a predictor that is always wrong
// (three predictions per call). It reports p50 and p99 of each and the
// ratio on/off, which must stay ≤ 1.05.
func BenchmarkNonInterference(b *testing.B) {
	const slots, clients, toolTime = 4, 8, 2 * time.Millisecond
	slow := backend.Funcs{"read": func(ctx context.Context, a json.RawMessage) (string, error) {
		select {
		case <-time.After(toolTime):
			return string(a), nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}}
	wrong := predict.Func(func(ev trace.Event) []predict.Prediction {
		var ps []predict.Prediction
		for i := range 3 {
			ps = append(ps, predict.Prediction{Tool: "read", Args: json.RawMessage(fmt.Sprintf(`{"path":"wrong-%d-%d"}`, ev.Seq, i)), P: 0.9})
		}
		return ps
	})
	pol := &policy.Policy{Tools: map[string]policy.Tool{"read": {Allow: true}}, Dedup: policy.Dedup{Strategy: policy.StrategyAll}}
	run := func(pred predict.Predictor, calls int) []time.Duration {
		eng := engine.New(&engine.Options{
			Backends:  map[string]engine.Backend{"b": {Backend: slow, Limits: sched.Limits{Slots: slots}}},
			Policy:    pol,
			Predictor: pred,
		})
		defer eng.Close()
		var mu sync.Mutex
		var lat []time.Duration
		var wg sync.WaitGroup
		for c := range clients {
			wg.Go(func() {
				for i := range calls / clients {
					t0 := time.Now()
					_, err := eng.Call(context.Background(), fmt.Sprintf("c%d", c), "read", json.RawMessage(fmt.Sprintf(`{"path":"p%d"}`, i)))
					d := time.Since(t0)
					if err != nil {
						b.Error(err)
						return
					}
					mu.Lock()
					lat = append(lat, d)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		slices.Sort(lat)
		return lat
	}
	pct := func(l []time.Duration, p float64) time.Duration { return l[int(p*float64(len(l)-1))] }
	var off, on []time.Duration
	for b.Loop() {
		// Interleave the two so machine noise hits both alike.
		off = append(off, run(nil, 400)...)
		on = append(on, run(wrong, 400)...)
	}
	slices.Sort(off)
	slices.Sort(on)
	b.ReportMetric(float64(pct(off, 0.5).Microseconds()), "off-p50-µs")
	b.ReportMetric(float64(pct(off, 0.99).Microseconds()), "off-p99-µs")
	b.ReportMetric(float64(pct(on, 0.5).Microseconds()), "on-p50-µs")
	b.ReportMetric(float64(pct(on, 0.99).Microseconds()), "on-p99-µs")
	b.ReportMetric(float64(pct(on, 0.5))/float64(pct(off, 0.5)), "p50-ratio")
	b.ReportMetric(float64(pct(on, 0.99))/float64(pct(off, 0.99)), "p99-ratio")
}
