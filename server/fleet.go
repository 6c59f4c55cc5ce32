package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ahead-dev/ahead/config"
	"github.com/ahead-dev/ahead/engine"
	"github.com/ahead-dev/ahead/fleet"
	"github.com/ahead-dev/ahead/httpapi"
	"github.com/ahead-dev/ahead/learn"
	"github.com/ahead-dev/ahead/pattern"
	"github.com/ahead-dev/ahead/policy"
	"github.com/ahead-dev/ahead/trace"
)

// joinFleet joins the fleet of fc (nil: none, and no NATS code runs) for
// the backends whose state is shared, and says so in the log. The caller
// builds the engine with it as Options.Fleet, then calls Start with the
// engine, and closes it after the engine.
func joinFleet(ctx context.Context, fc *config.Fleet, backends map[string]engine.Backend, pol *policy.Policy, reg prometheus.Registerer, logger *slog.Logger) (*fleet.Fleet, error) {
	if fc == nil {
		return nil, nil
	}
	var shared []string
	for _, name := range slices.Sorted(maps.Keys(backends)) {
		if !backends[name].PerSession {
			shared = append(shared, name)
		}
	}
	o := &fleet.Options{
		URL:             fc.URL,
		Name:            fc.Name,
		Backends:        shared,
		ShareResults:    pol.AnyShared(),
		FenceTimeout:    fc.FenceTimeout,
		AnnounceTimeout: fc.AnnounceTimeout,
		MaxBytes:        fc.MaxBytes,
		MaxAge:          fc.MaxAge,
		Logger:          logger,
		Registerer:      reg,
	}
	if e := fc.Embedded; e != nil {
		o.Embedded = &fleet.Embedded{Listen: e.Listen, Dir: e.Dir, MaxStore: e.MaxStore}
	}
	f, err := fleet.Join(ctx, o)
	if err != nil {
		return nil, err
	}
	how := "joined"
	if fc.Embedded != nil {
		how = "serving"
	}
	logger.Info("fleet "+how, "fleet", f.Name(), "url", f.URL(), "replica", f.Replica(), "shared_backends", shared)
	return f, nil
}

// fleetStats returns f's state for /v1/stats (lrn: its learning, or nil).
func fleetStats(f *fleet.Fleet, lrn *fleet.Learning) func() *httpapi.FleetStats {
	return func() *httpapi.FleetStats {
		st := f.Stats()
		var ls *httpapi.FleetLearningStats
		if lrn != nil {
			l := lrn.Stats()
			ls = &httpapi.FleetLearningStats{PoolVersion: l.Pool.Version, PoolMiner: l.Pool.Miner, PoolMark: l.Pool.Mark,
				Lag: l.Lag, Published: l.Published, Dropped: l.Dropped, Trimmed: l.Trimmed, Queued: l.Queued, Mined: l.Mined, Loaded: l.Loaded}
			if !l.Pool.Mined.IsZero() {
				ls.PoolMined = l.Pool.Mined.UTC().Format(time.RFC3339)
			}
		}
		return &httpapi.FleetStats{Learning: ls,
			Name: f.Name(), Replica: f.Replica(), URL: f.URL(), Connected: f.Connected(), AppliedSeq: f.AppliedSeq(),
			Announced: st.Announced, Late: st.Late, LateSent: st.LateSent, Applied: st.Applied, Fences: st.Fences,
			FencesRefused: map[string]int64{"down": st.FenceDown, "absent": st.FenceAbsent, "timeout": st.FenceMissed},
			Resyncs:       st.Resyncs,
			SharedResults: map[string]int64{"hits": st.SharedHits, "refused": st.SharedRefused, "puts": st.SharedPuts,
				"purges": st.SharedPurges, "dropped": st.ShareDropped, "too_big": st.ShareTooBig, "superseded": st.ShareSuperseded},
			SharedRefused: st.SharedRefusedBy,
		}
	}
}

// learnWithFleet starts this replica's part in the fleet's learning when
// its pool learns (nil otherwise): what the engine records is published
// (Record), and the predictor built with it (learn.Options.Fleet) mines
// the fleet's traffic when it holds the lease.
func learnWithFleet(ctx context.Context, f *fleet.Fleet, fc *config.Fleet, pc *config.Patterns) (*fleet.Learning, error) {
	if f == nil || pc == nil || !pc.Learn {
		return nil, nil
	}
	lrn, err := f.Learning(ctx, &fleet.LearningOptions{ShareConversation: fc.ShareConversation, LeaseTTL: fc.LeaseTTL})
	if err != nil {
		return nil, fmt.Errorf("fleet learning: %w", err)
	}
	return lrn, nil
}

// adoptFleetPool serves the fleet's current pool at once (a replica that
// starts predicts what the others learnt on its first session), then
// every newer one as it is shared.
func adoptFleetPool(ctx context.Context, lrn *fleet.Learning, p *learn.Predictor, logger *slog.Logger) error {
	pool, pi, err := lrn.Load(ctx)
	if err != nil {
		return err
	}
	if pool != nil {
		if err := p.Adopt(pool, pi.Mark); err != nil {
			return fmt.Errorf("fleet pool version %d: %w", pi.Version, err)
		}
		lrn.Adopted(pi)
		logger.Info("fleet pool loaded", "version", pi.Version, "miner", pi.Miner, "patterns", len(pool.Patterns))
	}
	return lrn.Watch(func(pool *pattern.Pool, pi fleet.PoolInfo) error {
		if err := p.Adopt(pool, pi.Mark); err != nil {
			return err
		}
		logger.Info("fleet pool loaded", "version", pi.Version, "miner", pi.Miner, "patterns", len(pool.Patterns))
		return nil
	})
}

// recorders records each event with every one of them (the trace files
// and the fleet's trace stream).
type recorders []engine.Recorder

func (rs recorders) Record(ev trace.Event) error {
	var errs []error
	for _, r := range rs {
		if err := r.Record(ev); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
