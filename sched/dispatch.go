package sched

import (
	"context"
	"time"
)

// dispatchLocked hands free slots to waiting work: on every backend,
// authoritative and promoted work first (preempting speculation if needed),
// then speculative work by utility within the budgets.
func (s *Scheduler) dispatchLocked() {
	now := time.Now()
	for _, b := range s.backends {
		s.dispatchAuthLocked(b, now)
	}
	if s.closed {
		return
	}
	for s.specRunning < s.budget {
		b, j := s.bestSpecLocked(now)
		if j == nil {
			return
		}
		s.startLocked(b, j)
	}
}

func (s *Scheduler) dispatchAuthLocked(b *backendState, now time.Time) {
	for b.queue.len() > 0 {
		// A slot is taken only with a token in hand, and the other way
		// round, so neither is held idle waiting for the other.
		if b.limiter != nil {
			if tokens := b.limiter.TokensAt(now); tokens < 1 {
				wait := time.Duration((1 - tokens) / float64(b.limiter.Limit()) * float64(time.Second))
				s.armRetryLocked(now.Add(max(wait, time.Nanosecond)))
				return
			}
		}
		if b.lim.Slots > 0 && b.used() >= b.lim.Slots && !s.preemptLocked(b) {
			return
		}
		if b.limiter != nil {
			b.limiter.AllowN(now, 1)
		}
		w := b.queue.pop()
		if w.job != nil {
			w.job.waiter = nil
			s.startLocked(b, w.job)
			continue
		}
		b.authRunning++
		w.ok = true
		close(w.ready)
	}
}

// preemptLocked cancels the lowest-utility preemptible speculative job
// running on b, and reports whether it freed a slot.
func (s *Scheduler) preemptLocked(b *backendState) bool {
	var victim *Job
	for j := range b.running {
		if j.spec.NotCancellable || j.promoted {
			continue
		}
		if victim == nil || j.spec.Utility < victim.spec.Utility ||
			(j.spec.Utility == victim.spec.Utility && j.seq > victim.seq) {
			victim = j
		}
	}
	if victim == nil {
		return false
	}
	s.cancelRunningLocked(victim, Preempted)
	return true
}

// bestSpecLocked returns the highest-utility queued speculative job that may
// start now, dropping expired ones on the way.
func (s *Scheduler) bestSpecLocked(now time.Time) (*backendState, *Job) {
	var bb *backendState
	var best *Job
	for _, b := range s.backends {
		if len(b.specQ) == 0 {
			continue
		}
		// Authoritative work waiting means no slack here.
		if b.queue.len() > 0 {
			continue
		}
		if now.Before(b.backoff) {
			s.armRetryLocked(b.backoff)
			continue
		}
		if b.specRunning >= b.lim.SpecBudget {
			continue
		}
		free := 0 // slots free beyond the ones speculation would take, with Slots
		if b.lim.Slots > 0 {
			free = b.lim.Slots - b.used()
			if free <= 0 || b.used() >= b.lim.Slots-b.lim.Reserve {
				continue
			}
		}
		for _, j := range b.specQ {
			// Without Slots, real calls never wait for a slot: a job
			// that cannot be preempted takes nothing from them.
			if j.spec.NotCancellable && b.lim.Slots > 0 && free-1 < max(b.lim.Reserve, 1) {
				continue
			}
			if best == nil || j.spec.Utility > best.spec.Utility ||
				(j.spec.Utility == best.spec.Utility && j.seq < best.seq) {
				best, bb = j, b
			}
		}
	}
	if best != nil && bb.limiter != nil {
		if bb.limiter.TokensAt(now) < float64(1+bb.lim.RateReserve) {
			// Not enough surplus tokens: try again when one more arrives.
			s.armRetryLocked(now.Add(time.Duration(float64(time.Second) / float64(bb.limiter.Limit()))))
			return nil, nil
		}
		bb.limiter.AllowN(now, 1)
	}
	return bb, best
}

func (s *Scheduler) startLocked(b *backendState, j *Job) {
	j.stopTimer()
	if !j.promoted {
		b.removeSpec(j)
		b.specRunning++
		s.specRunning++
		b.running[j] = struct{}{}
	} else {
		b.authRunning++
	}
	j.state = Running
	j.holds = true
	j.started = time.Now()
	s.stats.Started++
	ctx, cancel := context.WithCancel(context.Background())
	j.cancel = cancel
	s.wg.Go(func() {
		defer cancel()
		j.spec.Run(ctx)
		s.mu.Lock()
		defer s.mu.Unlock()
		if j.state == Running {
			j.state = Finished
			s.stats.Finished++
			if j.promoted {
				s.stats.Promoted++
			}
			s.releaseLocked(j)
			s.dispatchLocked()
		}
		close(j.done)
	})
}

// armRetryLocked makes sure dispatch runs again at t.
func (s *Scheduler) armRetryLocked(t time.Time) {
	if s.closed {
		return
	}
	if s.retry != nil && !s.retryAt.After(t) && s.retryAt.After(time.Now()) {
		return
	}
	if s.retry != nil {
		s.retry.Stop()
	}
	s.retryAt = t
	s.retry = time.AfterFunc(time.Until(t), func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.retry = nil
		s.dispatchLocked()
	})
}
