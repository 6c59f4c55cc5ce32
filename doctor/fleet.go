package doctor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/ahead-dev/ahead/config"
	"github.com/ahead-dev/ahead/fleet"
)

// checkFleet joins the fleet of fc only to read (nothing is created or
// changed on the server unless create) and reports its stream; when the
// pool learns (learn), it also reports the fleet's learning resources, and
// when the policy marks a tool shared (shares), the shared results' bucket. Each
// must have the bounds a replica of this configuration sets (a replica
// with other bounds, or a server that changed them, fails the check); one
// not created yet is a warning (the first replica creates it), unless
// create: then it is created as a replica creates it at start (with the
// configured bounds, which it sets on those that exist). For an embedded
// server, it checks that its address is free, its store directory usable
// and, when the pool learns, that max_store can hold the learning's
// streams.
func checkFleet(ctx context.Context, fc *config.Fleet, learn, shares, create bool, timeout time.Duration, add func(Severity, string, string, ...any)) {
	if e := fc.Embedded; e != nil {
		ln, err := net.Listen("tcp", e.Listen)
		if err != nil {
			add(Fail, "fleet", "embedded server cannot listen on %s: %v", e.Listen, err)
		} else {
			ln.Close()
			add(OK, "fleet", "embedded server can listen on %s (other replicas join nats://%s)", e.Listen, e.Listen)
		}
		if err := os.MkdirAll(e.Dir, 0o700); err != nil {
			add(Fail, "fleet", "embedded server's store: %v", err)
		} else if f, err := os.CreateTemp(e.Dir, ".doctor-*"); err != nil {
			add(Fail, "fleet", "embedded server's store %s is not writable: %v", e.Dir, err)
		} else {
			f.Close()
			os.Remove(f.Name())
			add(OK, "fleet", "embedded server's store %s is writable", e.Dir)
		}
		if learn {
			need, bound := fleet.StoreBytes(nil), cmp.Or(e.MaxStore, fleet.DefaultMaxStore)
			if bound < need {
				add(Fail, "fleet", "embedded server's max_store (%d bytes) cannot hold the fleet's learning (trace stream, pool store and lease: %d bytes)", bound, need)
			} else {
				add(OK, "fleet", "embedded server's max_store (%d bytes) holds the fleet's learning (%d bytes)", bound, need)
			}
		}
		return
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	f, err := fleet.Join(ctx, &fleet.Options{URL: fc.URL, Name: fc.Name, MaxBytes: fc.MaxBytes, MaxAge: fc.MaxAge,
		Replica: "doctor", MustConnect: true, ReadOnly: !create, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		add(Fail, "fleet", "%v", err)
		return
	}
	defer f.Close()
	switch st, err := f.Stream(ctx); {
	case errors.Is(err, fleet.ErrNotCreated):
		add(Warn, "fleet", "joined %s; %v (the first replica creates it; ahead doctor --create-fleet creates it now)", f.URL(), err)
	case err != nil:
		add(Fail, "fleet", "%v", err)
		return
	default:
		add(OK, "fleet", "joined %s; stream %s holds %d announcements (%d bytes; bounds %d bytes, %s)",
			f.URL(), st.Name, st.Msgs, st.Bytes, st.MaxBytes, st.MaxAge)
	}
	if shares {
		checkFleetResults(ctx, f, create, add)
	}
	if learn {
		checkFleetLearning(ctx, f, fc, create, add)
	}
}

// checkFleetResults reads the shared results' bucket with the bounds a
// replica whose policy marks a tool shared sets, after creating it as such
// a replica does when create, and reports it.
func checkFleetResults(ctx context.Context, f *fleet.Fleet, create bool, add func(Severity, string, string, ...any)) {
	if create {
		if err := f.CreateResults(ctx); err != nil {
			add(Fail, "fleet", "%v", err)
			return
		}
	}
	switch st, err := f.ResultsState(ctx); {
	case errors.Is(err, fleet.ErrNotCreated):
		add(Warn, "fleet", "%v (the first replica whose policy marks a tool shared creates it; ahead doctor --create-fleet creates it now)", err)
	case err != nil:
		add(Fail, "fleet", "%v", err)
	default:
		add(OK, "fleet", "results bucket holds %d shared results (%d bytes; bounds %d bytes, %s)", st.Msgs, st.Bytes, st.MaxBytes, st.MaxAge)
	}
}

// checkFleetLearning reads the fleet's learning resources with the bounds
// of a replica whose pool learns (server.learnWithFleet: the same
// options), after creating them as such a replica does when create, and
// reports them.
func checkFleetLearning(ctx context.Context, f *fleet.Fleet, fc *config.Fleet, create bool, add func(Severity, string, string, ...any)) {
	lo := &fleet.LearningOptions{ShareConversation: fc.ShareConversation, LeaseTTL: fc.LeaseTTL}
	if create {
		lrn, err := f.Learning(ctx, lo)
		if err != nil {
			add(Fail, "fleet", "learning: %v", err)
			return
		}
		defer lrn.Close()
	}
	st, err := f.LearningState(ctx, lo)
	if errors.Is(err, fleet.ErrNotCreated) {
		add(Warn, "fleet", "learning: %v (the first replica whose pool learns creates it; ahead doctor --create-fleet creates it now)", err)
		return
	}
	if err != nil {
		add(Fail, "fleet", "learning: %v", err)
		return
	}
	add(OK, "fleet", "trace stream %s holds %d lines (%d bytes; bounds %d bytes, %s)",
		st.Traces.Name, st.Traces.Msgs, st.Traces.Bytes, st.Traces.MaxBytes, st.Traces.MaxAge)
	pool := "no pool shared yet"
	if st.Pool.Version > 0 {
		pool = fmt.Sprintf("pool version %d (%d bytes) mined by %s at %s", st.Pool.Version, st.Pool.Bytes, st.Pool.Miner, st.Pool.Mined.UTC().Format(time.RFC3339))
	}
	add(OK, "fleet", "pool store %s holds %d bytes (bound %d bytes): %s", st.PoolStore, st.PoolStoreBytes, st.PoolStoreMax, pool)
	miner := "no replica mines now"
	if st.Miner != "" {
		miner = "held by " + st.Miner
	}
	add(OK, "fleet", "mining lease %s expires %s after its holder's last renewal: %s", st.Lease, st.LeaseTTL, miner)
}
