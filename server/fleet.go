package server

import (
	"context"
	"log/slog"
	"maps"
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ahead-dev/ahead/config"
	"github.com/ahead-dev/ahead/engine"
	"github.com/ahead-dev/ahead/fleet"
	"github.com/ahead-dev/ahead/httpapi"
)

// joinFleet joins the fleet of fc (nil: none, and no NATS code runs) for
// the backends whose state is shared, and says so in the log. The caller
// builds the engine with it as Options.Fleet, then calls Start with the
// engine, and closes it after the engine.
func joinFleet(ctx context.Context, fc *config.Fleet, backends map[string]engine.Backend, reg prometheus.Registerer, logger *slog.Logger) (*fleet.Fleet, error) {
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

// fleetStats returns f's state for /v1/stats.
func fleetStats(f *fleet.Fleet) func() *httpapi.FleetStats {
	return func() *httpapi.FleetStats {
		st := f.Stats()
		return &httpapi.FleetStats{
			Name: f.Name(), Replica: f.Replica(), URL: f.URL(), Connected: f.Connected(), AppliedSeq: f.AppliedSeq(),
			Announced: st.Announced, Late: st.Late, LateSent: st.LateSent, Applied: st.Applied, Fences: st.Fences,
			FencesRefused: map[string]int64{"down": st.FenceDown, "absent": st.FenceAbsent, "timeout": st.FenceMissed},
			Resyncs:       st.Resyncs,
			SharedResults: map[string]int64{"hits": st.SharedHits, "refused": st.SharedRefused, "puts": st.SharedPuts,
				"purges": st.SharedPurges, "dropped": st.ShareDropped, "too_big": st.ShareTooBig},
		}
	}
}
