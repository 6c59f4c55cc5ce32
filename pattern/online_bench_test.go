package pattern_test

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/ahead-dev/ahead/callkey"
	"github.com/ahead-dev/ahead/mine"
	"github.com/ahead-dev/ahead/pattern"
	"github.com/ahead-dev/ahead/trace"
)

// sharedTraces returns the shared real traces (AHEAD_TRACES, or the
// team's checkout), skipping the benchmark if they are absent, except in
// CI, where their absence is a failure.
func sharedTraces(b *testing.B) []string {
	dir := os.Getenv("AHEAD_TRACES")
	if dir == "" {
		dir = filepath.Join("..", "..", "shared", "traces")
	}
	files := []string{
		filepath.Join(dir, "tau2-airline-retail-train.jsonl.gz"),
		filepath.Join(dir, "minisweagent-train.jsonl.gz"),
	}
	for _, f := range files {
		if _, err := os.Stat(f); err != nil {
			if os.Getenv("CI") == "true" {
				b.Fatalf("shared traces missing (set AHEAD_TRACES): %v", err)
			}
			b.Skipf("shared traces missing (set AHEAD_TRACES): %v", err)
		}
	}
	return files
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkObserve replays both shared trace files through a predictor
// serving a pool mined from them, one event per op (with canonical
// arguments, as the engine passes them), and reports the latency
// percentiles of Observe (which includes predicting) and the memory of the
// compiled pool.
func BenchmarkObserve(b *testing.B) {
	files := sharedTraces(b)
	ss, err := trace.Collect(trace.NewReader(nil).Events(files...))
	if err != nil {
		b.Fatal(err)
	}
	pool, err := mine.Mine(ss, nil)
	if err != nil {
		b.Fatal(err)
	}
	before := heapInUse()
	o, err := pattern.NewOnline(pool, nil)
	if err != nil {
		b.Fatal(err)
	}
	poolBytes := heapInUse() - before
	var events []trace.Event
	var ids []string
	for _, s := range ss {
		for _, ev := range s.Events {
			// The engine observes canonical arguments.
			if c, err := callkey.Canonical(ev.Args); err == nil {
				ev.Args = c
			}
			events = append(events, ev)
		}
		ids = append(ids, s.ID)
	}
	// What mining held is garbage now; collect it, so the loop's GC
	// cycles cost what a serving process's would.
	ss, pool = nil, nil
	runtime.GC()
	lat := make([]time.Duration, 0, 1<<16)
	// best[j] is event j's fastest Observe over the replays: the shared
	// machine's stalls (tens of µs, a few % of any short measurement) do
	// not repeat on the same event, so the p99 of the bests is the cost.
	best := make([]time.Duration, len(events))
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		j := i % len(events)
		ev := events[j]
		if j == 0 && i > 0 {
			for _, id := range ids {
				o.Forget(id)
			}
		}
		i++
		start := time.Now()
		o.Observe(ev)
		d := time.Since(start)
		lat = append(lat, d)
		if best[j] == 0 || d < best[j] {
			best[j] = d
		}
	}
	slices.Sort(lat)
	q := func(lat []time.Duration, f float64) float64 {
		return float64(lat[int(f*float64(len(lat)-1))].Nanoseconds()) / 1e3
	}
	b.ReportMetric(q(lat, 0.5), "p50-µs")
	b.ReportMetric(q(lat, 0.99), "p99-µs")
	b.ReportMetric(q(lat, 1), "max-µs")
	if i >= 2*len(events) { // every event seen at least twice
		slices.Sort(best)
		b.ReportMetric(q(best, 0.99), "p99-best-µs")
	}
	b.ReportMetric(float64(poolBytes)/(1<<20), "pool-MiB")
	b.ReportMetric(float64(o.Len()), "patterns")
	runtime.KeepAlive(o)
}
