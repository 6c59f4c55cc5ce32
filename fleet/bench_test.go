package fleet_test

import (
	"io"
	"net"
	"runtime/metrics"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/ahead-dev/ahead/fleet"
	"github.com/ahead-dev/ahead/policy"
)

// benchFleet is a replica alone on an embedded server, on loopback. Its
// bounds are generous: a benchmark measures the times, it does not cut
// them off.
func benchFleet(b *testing.B) *fleet.Fleet {
	b.Helper()
	f, err := fleet.Join(b.Context(), &fleet.Options{
		Name: "bench", Replica: "a", Backends: []string{"store"}, FenceTimeout: time.Second, AnnounceTimeout: time.Second,
		Embedded: &fleet.Embedded{Listen: "127.0.0.1:0", Dir: b.TempDir()},
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(f.Close)
	f.Start(applierFunc(func(string, policy.Effect) {}))
	if err := f.Ready(b.Context()); err != nil {
		b.Fatal(err)
	}
	return f
}

// tail records sample times and what the process went through meanwhile,
// to tell what makes the slow ones slow: a garbage collection during the
// sample, or goroutines waiting to run (the scheduler's latencies, which
// include the time the OS gives the process's threads no CPU).
type tail struct {
	ds      []time.Duration
	gcs     []bool // a GC cycle ended during the sample
	preempt []bool // the OS took a CPU from one of the process's threads during the sample
	ms      []metrics.Sample
	sched0  *metrics.Float64Histogram
	gcStart uint64
}

func newTail() *tail {
	t := &tail{ms: []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}, {Name: "/sched/latencies:seconds"}}}
	metrics.Read(t.ms)
	t.sched0 = t.ms[1].Value.Float64Histogram()
	t.sched0 = &metrics.Float64Histogram{Counts: slices.Clone(t.sched0.Counts), Buckets: t.sched0.Buckets}
	return t
}

func (t *tail) gcCount() uint64 {
	metrics.Read(t.ms[:1])
	return t.ms[0].Value.Uint64()
}

// time runs fn and records how long it took.
func (t *tail) time(fn func()) {
	g0, p0 := t.gcCount(), involuntarySwitches()
	t0 := time.Now()
	fn()
	t.ds = append(t.ds, time.Since(t0))
	t.gcs = append(t.gcs, t.gcCount() != g0)
	t.preempt = append(t.preempt, involuntarySwitches() != p0)
}

// report adds p50 and p99 of the samples, p99 of those no GC overlapped,
// the share of samples over 1 ms a GC overlapped, and the p99 of the
// goroutine scheduling latency over the run.
func (t *tail) report(b *testing.B) {
	if len(t.ds) == 0 {
		return
	}
	pct := func(ds []time.Duration, p int) float64 {
		if len(ds) == 0 {
			return 0
		}
		ds = slices.Clone(ds)
		slices.Sort(ds)
		return float64(ds[len(ds)*p/100].Microseconds())
	}
	var noGC []time.Duration
	slow, slowGC, slowPre := 0, 0, 0
	for i, d := range t.ds {
		if !t.gcs[i] {
			noGC = append(noGC, d)
		}
		if d > time.Millisecond {
			slow++
			if t.gcs[i] {
				slowGC++
			}
			if t.preempt[i] {
				slowPre++
			}
		}
	}
	b.ReportMetric(pct(t.ds, 50), "p50-µs")
	b.ReportMetric(pct(t.ds, 99), "p99-µs")
	b.ReportMetric(pct(noGC, 99), "p99-noGC-µs")
	b.ReportMetric(float64(slow)/float64(len(t.ds))*100, "%>1ms")
	if slow > 0 {
		b.ReportMetric(float64(slowGC)/float64(slow)*100, "%>1ms-in-GC")
		b.ReportMetric(float64(slowPre)/float64(slow)*100, "%>1ms-preempted")
	}
	metrics.Read(t.ms)
	h := t.ms[1].Value.Float64Histogram()
	var total uint64
	counts := make([]uint64, len(h.Counts))
	for i := range h.Counts {
		counts[i] = h.Counts[i] - t.sched0.Counts[i]
		total += counts[i]
	}
	var acc uint64
	for i, c := range counts {
		acc += c
		if acc*100 >= total*99 {
			b.ReportMetric(h.Buckets[i+1]*1e6, "sched-p99-µs")
			break
		}
	}
}

// BenchmarkFence: one fence at a time (no sharing), after a write was
// announced, so each reads the stream's last sequence and waits for it.
func BenchmarkFence(b *testing.B) {
	f := benchFleet(b)
	ctx := b.Context()
	ef := policy.Effect{Resources: []string{"k"}}
	tl := newTail()
	for b.Loop() {
		if err := f.Announce(ctx, "store", ef); err != nil {
			b.Fatal(err)
		}
		tl.time(func() {
			if err := f.Fence(ctx, "store"); err != nil {
				b.Fatal(err)
			}
		})
	}
	tl.report(b)
}

// BenchmarkAnnouncedWrite: what the fleet adds to a write, its two
// announcements (before it is forwarded, and when it completed), and one
// announcement alone.
func BenchmarkAnnouncedWrite(b *testing.B) {
	for _, n := range []int{2, 1} {
		b.Run(map[int]string{1: "once", 2: "twice"}[n], func(b *testing.B) {
			f := benchFleet(b)
			ctx := b.Context()
			ef := policy.Effect{Resources: []string{"k"}}
			tl := newTail()
			for b.Loop() {
				tl.time(func() {
					if err := f.Announce(ctx, "store", ef); err != nil {
						b.Fatal(err)
					}
					if n == 2 {
						if err := f.Completed(ctx, "store", ef); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
			tl.report(b)
		})
	}
}

// involuntarySwitches counts the times the OS took a CPU from one of the
// process's threads (getrusage's ru_nivcsw).
func involuntarySwitches() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Nivcsw
}

// BenchmarkLoopbackEcho: the machine's own tail, for comparison: a 100-byte
// round trip over a loopback TCP connection to a goroutine that echoes it
// (what a request to the stream's leader costs before NATS does anything).
func BenchmarkLoopbackEcho(b *testing.B) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		io.Copy(c, c)
	}()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	msg := make([]byte, 100)
	buf := make([]byte, 100)
	tl := newTail()
	for b.Loop() {
		tl.time(func() {
			if _, err := c.Write(msg); err != nil {
				b.Fatal(err)
			}
			if _, err := io.ReadFull(c, buf); err != nil {
				b.Fatal(err)
			}
		})
	}
	tl.report(b)
	c.Close()
	<-done
}
