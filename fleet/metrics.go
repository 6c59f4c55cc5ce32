package fleet

import (
	"github.com/prometheus/client_golang/prometheus"
)

// fenceBuckets are the fence times the histogram tells apart, in seconds:
// from 50 µs (a fence joined while its sequence was already applied) to
// beyond any sane FenceTimeout.
var fenceBuckets = []float64{50e-6, 100e-6, 200e-6, 500e-6, 1e-3, 2e-3, 5e-3, 10e-3, 50e-3}

// register exposes the fleet's state and counters on reg (nil: nowhere)
// and returns the fence time histogram (nil when unregistered).
func (f *Fleet) register(reg prometheus.Registerer) prometheus.Histogram {
	if reg == nil {
		return nil
	}
	counter := func(name, help string, v func() int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(v()) })
	}
	fence := func(result string, v func() int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "ahead_fleet_fences_total", Help: "Fences before reusing a shared-state result, by result (ok; down: not connected or not caught up; absent: a replica missing; timeout).",
			ConstLabels: prometheus.Labels{"result": result},
		}, func() float64 { return float64(v()) })
	}
	shared := func(result string, v func() int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "ahead_fleet_shared_results_total", Help: "Results of shared tools through the fleet's bucket, by what happened (hit: reused from it; refused: found, but a write since or expired; put; dropped: not sent; too_big: kept local; superseded: not sent, a later put of the same result or a write since came first).",
			ConstLabels: prometheus.Labels{"result": result},
		}, func() float64 { return float64(v()) })
	}
	for i, reason := range refusedNames {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "ahead_fleet_shared_refused_total", Help: "Results found in the fleet's bucket but refused, by reason (write: a write applied since may change it; resync: valid only before this replica's last resync; epoch: of a stream the server lost; expired; down: this replica not caught up).",
			ConstLabels: prometheus.Labels{"reason": reason},
		}, func() float64 { return float64(f.stats.sharedRefused[i].Load()) }))
	}
	h := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "ahead_fleet_fence_seconds", Help: "Time of the fences that succeeded.", Buckets: fenceBuckets,
	})
	reg.MustRegister(h,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "ahead_fleet_connected", Help: "1 while this replica is connected to its fleet and caught up (fences can succeed)."},
			func() float64 {
				if f.Connected() {
					return 1
				}
				return 0
			}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "ahead_fleet_applied_sequence", Help: "The last sequence of the invalidation stream this replica has applied."},
			func() float64 { return float64(f.AppliedSeq()) }),
		counter("ahead_fleet_announced_total", "Writes announced in time.", f.stats.announced.Load),
		counter("ahead_fleet_late_total", "Writes forwarded before they could be announced.", f.stats.late.Load),
		counter("ahead_fleet_late_sent_total", "Late writes announced since.", f.stats.lateSent.Load),
		counter("ahead_fleet_applied_total", "Writes of other replicas applied.", f.stats.applied.Load),
		counter("ahead_fleet_resyncs_total", "Times the replica dropped its shared-state speculation and resumed at the stream's end.", f.stats.resyncs.Load),
		shared("hit", f.stats.sharedHits.Load),
		shared("refused", f.sharedRefusedTotal),
		shared("put", f.stats.sharedPuts.Load),
		shared("dropped", f.stats.shareDropped.Load),
		shared("too_big", f.stats.shareTooBig.Load),
		shared("superseded", f.stats.shareSuperseded.Load),
		counter("ahead_fleet_shared_purges_total", "Writes whose shared results were purged from the bucket.", f.stats.sharedPurges.Load),
		fence("ok", f.stats.fences.Load),
		fence("down", f.stats.fenceDown.Load),
		fence("absent", f.stats.fenceAbsent.Load),
		fence("timeout", f.stats.fenceMissed.Load),
	)
	return h
}

// AppliedSeq returns the last stream sequence this replica has applied.
func (f *Fleet) AppliedSeq() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.applied
}

func (f *Fleet) sharedRefusedTotal() int64 {
	var n int64
	for i := range f.stats.sharedRefused {
		n += f.stats.sharedRefused[i].Load()
	}
	return n
}
