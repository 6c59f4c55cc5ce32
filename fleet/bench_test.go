package fleet_test

import (
	"slices"
	"testing"
	"time"

	"github.com/ahead-dev/ahead/fleet"
	"github.com/ahead-dev/ahead/policy"
)

// benchFleet is a replica alone on an embedded server, on loopback.
func benchFleet(b *testing.B) *fleet.Fleet {
	b.Helper()
	f, err := fleet.Join(b.Context(), &fleet.Options{
		Name: "bench", Replica: "a", Backends: []string{"store"}, FenceTimeout: time.Second,
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

// reportPercentiles adds p50 and p99 of ds as metrics.
func reportPercentiles(b *testing.B, ds []time.Duration) {
	slices.Sort(ds)
	if len(ds) == 0 {
		return
	}
	b.ReportMetric(float64(ds[len(ds)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(ds[len(ds)*99/100].Microseconds()), "p99-µs")
}

// BenchmarkFence: one fence at a time (no sharing), after a write was
// announced, so each reads the stream's last sequence and waits for it.
func BenchmarkFence(b *testing.B) {
	f := benchFleet(b)
	ctx := b.Context()
	ef := policy.Effect{Resources: []string{"k"}}
	var ds []time.Duration
	for b.Loop() {
		if err := f.Announce(ctx, "store", ef); err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		if err := f.Fence(ctx, "store"); err != nil {
			b.Fatal(err)
		}
		ds = append(ds, time.Since(t0))
	}
	reportPercentiles(b, ds)
}

// BenchmarkAnnouncedWrite: what the fleet adds to a write, its two
// announcements (before it is forwarded, and when it completed).
func BenchmarkAnnouncedWrite(b *testing.B) {
	f := benchFleet(b)
	ctx := b.Context()
	ef := policy.Effect{Resources: []string{"k"}}
	var ds []time.Duration
	for b.Loop() {
		t0 := time.Now()
		if err := f.Announce(ctx, "store", ef); err != nil {
			b.Fatal(err)
		}
		if err := f.Announce(ctx, "store", ef); err != nil {
			b.Fatal(err)
		}
		ds = append(ds, time.Since(t0))
	}
	reportPercentiles(b, ds)
}
