package fleet

import (
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// Presence: a replica that cannot announce its writes (cut off from the
// fleet while the others are not, or back from an outage before it has
// announced what it wrote meanwhile) must not let the others reuse results
// its writes made stale. Each replica says it is up every HeartbeatInterval
// on core NATS (NAME.hb.REPLICA), but only while it is connected, caught up
// and has no write waiting to be announced late. A replica heard within
// the last PresenceTTL but not within three intervals is missing: while
// any is, fences fail (fail closed). One unheard for PresenceTTL is gone
// (a replica killed: it writes no more), and one that closes says so.
//
// What remains is the partition's own window: a replica's writes made in
// the three intervals before the others notice it is missing, announced
// only when it is back. Bounded by 3 × HeartbeatInterval (600 ms by
// default), like any "heard within a bound" rule, and counted as Late.

const (
	hbUp  = "up"
	hbBye = "bye"
)

func (f *Fleet) hbSubject(replica string) string {
	return f.opts.Name + ".hb." + replica
}

// listen subscribes to the other replicas' heartbeats (a core subscription,
// restored by nats.go on every reconnect).
func (f *Fleet) listen() error {
	prefix := f.hbSubject("")
	sub, err := f.nc.Subscribe(prefix+"*", func(m *nats.Msg) {
		r := strings.TrimPrefix(m.Subject, prefix)
		if r == f.opts.Replica {
			return
		}
		f.mu.Lock()
		if string(m.Data) == hbBye {
			delete(f.heard, r)
		} else {
			f.heard[r] = time.Now()
		}
		f.mu.Unlock()
	})
	if err != nil {
		return err
	}
	// A replica is told of the others without waiting for their next
	// beat only if they beat: bound what a subscriber may queue.
	return sub.SetPendingLimits(4096, 1<<20)
}

// missingLocked reports whether a replica heard lately has gone quiet, and
// forgets the ones quiet for PresenceTTL.
func (f *Fleet) missingLocked(now time.Time) bool {
	missing := false
	for r, t := range f.heard {
		switch quiet := now.Sub(t); {
		case quiet >= f.opts.PresenceTTL:
			delete(f.heard, r)
		case quiet > 3*f.opts.HeartbeatInterval:
			missing = true
		}
	}
	return missing
}

// heartbeat says this replica is up, every HeartbeatInterval, while it is
// connected, caught up, and has announced every write it made, until Close.
func (f *Fleet) heartbeat() {
	t := time.NewTicker(f.opts.HeartbeatInterval)
	defer t.Stop()
	for {
		f.mu.Lock()
		up := f.synced && len(f.late) == 0 && len(f.lateAll) == 0 && !f.closed
		f.mu.Unlock()
		if up && f.up.Load() {
			_ = f.nc.Publish(f.hbSubject(f.opts.Replica), []byte(hbUp))
		}
		select {
		case <-f.stop:
			return
		case <-t.C:
		}
	}
}

// bye tells the others this replica is leaving, so that they do not wait
// for it.
func (f *Fleet) bye() {
	if f.nc.IsConnected() {
		_ = f.nc.Publish(f.hbSubject(f.opts.Replica), []byte(hbBye))
		_ = f.nc.FlushTimeout(time.Second)
	}
}
