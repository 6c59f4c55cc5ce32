package learn

import (
	"context"
	"errors"
	"fmt"

	"github.com/ahead-dev/ahead/convo"
	"github.com/ahead-dev/ahead/pattern"
	"github.com/ahead-dev/ahead/trace"
)

// Fleet is how a Learner learns with the other replicas of a fleet
// (fleet.Learning is one): what every replica records is on the fleet's
// trace stream, one replica at a time mines it, and every replica serves
// the pool it shares.
type Fleet interface {
	// Lease reports whether this replica is to mine now (it holds the
	// fleet's mining lease).
	Lease(ctx context.Context) bool
	// Recent returns the fleet's recent sessions; fresh[i] is the index
	// of the first call of sessions[i] recorded after the stream position
	// since; mark is the position of the last line returned.
	Recent(ctx context.Context, since uint64) (sessions []trace.Session, fresh []int, mark uint64, err error)
	// Share gives the fleet a pool mined from its traffic up to mark; it
	// fails when this replica no longer holds the lease.
	Share(ctx context.Context, pool *pattern.Pool, mark uint64) error
}

// relearnFleet is Relearn with a fleet: only the lease holder mines, from
// the fleet's recent traffic, and shares the pool; every replica (the
// miner too) then serves it (Adopt).
//
// Online counts of all replicas are merged, not overwritten: the new pool
// starts from the last one shared (whose counts cover the fleet's traffic
// up to its mark) and the miner replays every call recorded since, by any
// replica, through its online counter, so each call is counted once,
// whoever served it. A replica's own online counts between two pools
// serve its predictions until the next pool, which has counted the same
// calls from the stream. New patterns are then mined from the recent
// traffic (pattern.Merge), and the conversation model from its messages
// (those replicas shared: fleet share_conversation).
func (l *Learner) relearnFleet() (int, error) {
	l.mineMu.Lock()
	defer l.mineMu.Unlock()
	ctx := context.Background()
	f := l.opts.Fleet
	if !f.Lease(ctx) {
		return 0, nil // another replica mines
	}
	l.mu.Lock()
	base, since, dirty := l.fleetBase, l.fleetMark, l.dirty
	l.dirty = false
	l.mu.Unlock()
	sessions, fresh, mark, err := f.Recent(ctx, since)
	if err != nil {
		return 0, fmt.Errorf("learn: reading the fleet's traffic: %w", err)
	}
	if mark == since && !dirty {
		return 0, nil
	}
	counter, err := pattern.NewOnline(base, &pattern.OnlineOptions{MaxPredictions: l.opts.Online.MaxPredictions})
	if err != nil {
		return 0, err
	}
	// The last calls before the mark whose predictions a call after it
	// may settle: the next call their hits, the next Horizon calls their
	// Soon credits.
	resume := max(base.Mined.Horizon, 1)
	newSessions, newCalls := 0, 0
	for i, s := range sessions {
		if fresh[i] == 0 && len(s.Events) > 0 {
			counter.Start(s.ID)
			newSessions++
		}
		for j, ev := range s.Events {
			switch {
			case j < fresh[i]-resume:
				counter.Warm(ev)
			case j < fresh[i]:
				// One of the last calls before the mark: the calls
				// after it settle its predictions, so that a session
				// straddling the mark counts each pair across it once
				// (Warm alone would count them never).
				counter.Resume(ev)
			default:
				counter.Observe(ev)
				newCalls++
			}
		}
		counter.Forget(s.ID)
	}
	counted := counter.Snapshot()
	counted.Mined = base.Mined
	counted.Mined.Sessions += newSessions
	counted.Mined.Calls += newCalls
	counted.Conversation = base.Conversation

	opts := l.mineOpts
	if len(counted.Patterns) > 0 {
		opts.Discriminators = counted.Discriminators
		if opts.Discriminators == nil {
			opts.Discriminators = []pattern.Discriminator{}
		}
	}
	merged := counted
	if len(sessions) > 0 {
		mined, _, err := Mine(sessions, &opts)
		if err != nil {
			return 0, fmt.Errorf("learn: mining the fleet's traffic: %w", err)
		}
		if merged, err = pattern.Merge(counted, mined); err != nil {
			return 0, err
		}
		// How it was mined, and from all it counted.
		merged.Mined = mined.Mined
		merged.Mined.Sessions, merged.Mined.Calls = counted.Mined.Sessions, counted.Mined.Calls
		if len(mined.Conversation) > 0 {
			merged.Conversation = mined.Conversation
		}
	}
	if err := f.Share(ctx, merged, mark); err != nil {
		return 0, fmt.Errorf("learn: sharing the pool: %w", err)
	}
	before := l.Patterns()
	if err := l.Adopt(merged, mark); err != nil {
		return 0, err
	}
	return l.Patterns() - before, nil
}

// ErrStale is returned by Adopt for a pool older than the one served.
var ErrStale = errors.New("learn: pool older than the one served")

// Adopt serves pool, shared by the fleet and mined from its traffic up to
// mark, in place of the current one: its patterns, counts and
// conversation model. Sessions in progress keep their state (their calls
// are shown to the new pool again, without learning from them twice).
func (l *Learner) Adopt(pool *pattern.Pool, mark uint64) error {
	o, err := pattern.NewOnline(pool, &l.opts.Online)
	if err != nil {
		return fmt.Errorf("learn: the fleet's pool: %w", err)
	}
	conv, err := conversation(pool)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if mark < l.fleetMark {
		return ErrStale
	}
	for id := range l.live {
		for _, ev := range l.log[id] {
			if ev.Kind != trace.KindMessage {
				o.Warm(ev)
			}
		}
		if conv != nil {
			replay(conv, l.log[id])
		}
	}
	l.cur.Store(o)
	if conv != nil {
		l.conv.cur.Store(conv)
	} else {
		l.conv.cur.Store((*convo.Predictor)(nil))
	}
	l.fleetBase, l.fleetMark = pool, mark
	l.lastMined.Sessions, l.lastMined.Calls = pool.Mined.Sessions, pool.Mined.Calls
	return nil
}
