package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ahead-dev/ahead/policy"
)

// Announce publishes a write on backend, with what it may change, and waits
// for the stream to acknowledge it, within AnnounceTimeout. On failure (or
// at once while disconnected) the write is queued to be announced late and
// the error says so; the caller forwards the write anyway.
func (f *Fleet) Announce(ctx context.Context, backend string, ef policy.Effect) error {
	if ef.ReadOnly {
		return nil
	}
	a := newAnnouncement(f.opts.Replica, backend, ef)
	err := ErrDown
	if f.up.Load() {
		err = f.bounded(ctx, f.opts.AnnounceTimeout, func(ctx context.Context) error {
			_, err := f.js.Publish(ctx, f.subject(backend), encode(a))
			return err
		})
	}
	if err == nil {
		f.stats.announced.Add(1)
		f.purgeResults(backend, ef)
		return nil
	}
	f.stats.late.Add(1)
	f.mu.Lock()
	switch {
	case f.lateAll[backend]:
	case len(f.late) >= f.opts.MaxLate:
		f.lateAll[backend] = true
	default:
		f.late = append(f.late, lateWrite{backend: backend, ef: ef})
	}
	f.mu.Unlock()
	f.wake(f.wakeKeep)
	return fmt.Errorf("announcing a write on %s (forwarded, to be announced late): %w", backend, err)
}

// Completed announces a write again once it has completed (see Announce):
// what other replicas speculated while it ran may have read the old state.
func (f *Fleet) Completed(ctx context.Context, backend string, ef policy.Effect) error {
	return f.Announce(ctx, backend, ef)
}

// Fence returns nil once this replica has applied every announcement made
// before the call (on its backends' subjects), so that a speculative result
// of backend that survived them may be handed over. It joins the next
// shared fence of the replica. It fails with ErrDown at once while the
// replica is not caught up, and with ErrFenceTimeout after FenceTimeout.
func (f *Fleet) Fence(ctx context.Context, backend string) error {
	start := time.Now()
	t := time.NewTimer(f.opts.FenceTimeout)
	defer t.Stop()
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return ErrClosed
	}
	if !f.synced {
		f.mu.Unlock()
		f.stats.fenceDown.Add(1)
		return ErrDown
	}
	if !f.noPresence && f.missingLocked(time.Now()) {
		f.mu.Unlock()
		f.stats.fenceAbsent.Add(1)
		return ErrAbsent
	}
	if f.next == nil {
		f.next = &flight{done: make(chan struct{})}
		f.wake(f.wakeFence)
	}
	fl := f.next
	f.mu.Unlock()
	select {
	case <-fl.done:
		switch {
		case fl.err == nil:
			f.stats.fences.Add(1)
			if f.fenceTime != nil {
				f.fenceTime.Observe(time.Since(start).Seconds())
			}
		case errors.Is(fl.err, ErrDown):
			f.stats.fenceDown.Add(1)
		default:
			f.stats.fenceMissed.Add(1)
		}
		return fl.err
	case <-t.C:
		f.stats.fenceMissed.Add(1)
		return ErrFenceTimeout
	case <-ctx.Done():
		return ctx.Err()
	}
}

// fencer runs the shared fences, one at a time, until Close. Callers that
// arrive while one runs wait for the next (f.next), whose sequence is read
// after they arrived.
func (f *Fleet) fencer() {
	for {
		select {
		case <-f.stop:
			return
		case <-f.wakeFence:
		}
		f.mu.Lock()
		fl := f.next
		f.next = nil
		f.mu.Unlock()
		if fl == nil {
			continue
		}
		fl.err = f.fence()
		close(fl.done)
	}
}

// fence reads the last sequence of this replica's subjects from the
// stream's leader and waits until the consumer has applied it.
func (f *Fleet) fence() error {
	ctx, cancel := context.WithTimeout(context.Background(), f.opts.FenceTimeout)
	defer cancel()
	f.mu.Lock()
	gen, str := f.gen, f.str
	f.mu.Unlock()
	if str == nil {
		return ErrDown
	}
	var target uint64
	for _, subj := range f.subjects {
		m, err := str.GetLastMsgForSubject(ctx, subj)
		switch {
		case errors.Is(err, jetstream.ErrMsgNotFound):
		case err != nil:
			if ctx.Err() != nil {
				return ErrFenceTimeout
			}
			return fmt.Errorf("%w: %w", ErrDown, err)
		default:
			target = max(target, m.Sequence)
		}
	}
	for {
		f.mu.Lock()
		if !f.synced || f.gen != gen {
			// Reconnected meanwhile: the sequence read may be of an old
			// stream.
			f.mu.Unlock()
			return ErrDown
		}
		if f.applied >= target {
			f.mu.Unlock()
			return nil
		}
		ch := f.changed
		f.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ErrFenceTimeout
		case <-f.stop:
			return ErrClosed
		}
	}
}

// keeper (re)starts the consumer when asked (at Start, after a reconnect or
// a consumer error) and announces late writes, until Close.
func (f *Fleet) keeper() {
	retry := time.NewTicker(time.Second)
	defer retry.Stop()
	for {
		select {
		case <-f.stop:
			return
		case <-f.wakeKeep:
		case <-retry.C:
		}
		if !f.up.Load() {
			continue
		}
		if f.resync.Load() {
			if err := f.restart(); err != nil {
				f.opts.Logger.Warn("fleet: restarting the invalidation consumer", "fleet", f.opts.Name, "err", err)
				continue
			}
		}
		f.flushLate()
	}
}

// restart drops all shared-state speculation of the engine and consumes
// the stream from its current end: whatever happened while the replica was
// away (announcements it missed, a server that lost its store) cannot reach
// a result that no longer exists.
func (f *Fleet) restart() error {
	f.resync.Store(false)
	f.mu.Lock()
	f.synced = false
	f.gen++
	gen := f.gen
	old := f.cc
	f.cc = nil
	app := f.app
	f.signalLocked()
	f.mu.Unlock()
	if old != nil {
		old.Stop()
	}
	fail := func(err error) error {
		f.resync.Store(true)
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := f.ensureStream(ctx); err != nil {
		return fail(err)
	}
	s, err := f.js.Stream(ctx, f.stream)
	if err != nil {
		return fail(fmt.Errorf("stream %s: %w", f.stream, err))
	}
	last := s.CachedInfo().State.LastSeq
	var kv jetstream.KeyValue
	var ks jetstream.Stream
	var kerr error
	if f.opts.ShareResults {
		kv, ks, kerr = f.ensureBucket(ctx)
	}
	if kerr != nil {
		// Results are then not shared; writes still are.
		f.opts.Logger.Warn("fleet: results are not shared", "fleet", f.opts.Name, "err", kerr)
	}
	for _, b := range f.backend {
		app.Invalidate(b, policy.Effect{All: true})
	}
	f.mu.Lock()
	f.applied = last
	f.str = s
	f.res.kv, f.res.stream = kv, ks
	f.res.epoch = s.CachedInfo().Created.UnixNano()
	for _, b := range f.backend {
		f.res.clocks[b] = &clock{floor: last}
	}
	f.mu.Unlock()
	if len(f.subjects) > 0 {
		cons, err := f.js.OrderedConsumer(ctx, f.stream, jetstream.OrderedConsumerConfig{
			FilterSubjects: f.subjects,
			DeliverPolicy:  jetstream.DeliverByStartSequencePolicy,
			OptStartSeq:    last + 1,
		})
		if err != nil {
			return fail(fmt.Errorf("consumer on %s: %w", f.stream, err))
		}
		cc, err := cons.Consume(func(m jetstream.Msg) { f.handle(gen, m) },
			jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
				f.opts.Logger.Debug("fleet: consumer", "fleet", f.opts.Name, "err", err)
			}))
		if err != nil {
			return fail(fmt.Errorf("consuming %s: %w", f.stream, err))
		}
		f.mu.Lock()
		if f.closed || f.gen != gen {
			f.mu.Unlock()
			cc.Stop()
			return nil
		}
		f.cc = cc
		f.mu.Unlock()
	}
	f.mu.Lock()
	if !f.closed && f.gen == gen && !f.resync.Load() {
		f.synced = true
		f.signalLocked()
	}
	f.mu.Unlock()
	f.stats.resyncs.Add(1)
	return nil
}

// handle applies one announcement of consumer generation gen.
func (f *Fleet) handle(gen int, m jetstream.Msg) {
	meta, err := m.Metadata()
	if err != nil {
		return
	}
	var a announcement
	if err := json.Unmarshal(m.Data(), &a); err != nil {
		// Not ours to understand: be safe, anything may have changed.
		a = announcement{Backend: f.backend[m.Subject()], All: true}
	}
	f.mu.Lock()
	app := f.app
	stale := f.gen != gen
	f.mu.Unlock()
	if stale {
		return
	}
	if a.Replica != f.opts.Replica {
		b, ok := f.backend[m.Subject()]
		if ok {
			app.Invalidate(b, a.effect())
			f.stats.applied.Add(1)
		}
	}
	f.mu.Lock()
	if f.gen == gen && meta.Sequence.Stream > f.applied {
		if c := f.res.clocks[f.backend[m.Subject()]]; c != nil {
			// Its own writes too: a result another replica put may
			// predate them.
			c.applyLocked(meta.Sequence.Stream, a.effect())
		}
		f.applied = meta.Sequence.Stream
		f.signalLocked()
	}
	f.mu.Unlock()
}

// flushLate announces the writes that could not be announced in time,
// oldest first; each leaves the queue once acknowledged, so that the
// replica says it is up (presence.go) only when all are.
func (f *Fleet) flushLate() {
	f.mu.Lock()
	for b := range f.lateAll {
		if len(f.late) < f.opts.MaxLate {
			f.late = append(f.late, lateWrite{backend: b, ef: policy.Effect{All: true}})
			delete(f.lateAll, b)
		}
	}
	f.mu.Unlock()
	for {
		f.mu.Lock()
		if len(f.late) == 0 {
			f.mu.Unlock()
			return
		}
		w := f.late[0]
		f.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		a := newAnnouncement(f.opts.Replica, w.backend, w.ef)
		_, err := f.js.Publish(ctx, f.subject(w.backend), encode(a))
		cancel()
		if err != nil {
			return // retried on the next wake
		}
		f.mu.Lock()
		f.late = f.late[1:]
		f.mu.Unlock()
		f.stats.lateSent.Add(1)
	}
}
