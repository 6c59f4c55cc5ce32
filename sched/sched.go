// Package sched runs tool executions on backends, serving authoritative
// calls first and speculative work only on slack.
//
// A backend's Limits say what it may run at once. Without Slots, ahead
// does not limit the agent's own calls, as they were not limited without
// it, and speculation runs inside its own budget (Limits.SpecBudget, and
// Options.SpecBudget over all backends). With Slots, they bound both, real
// calls first.
//
// Invariants, all kept under Scheduler.mu:
//   - Authoritative calls and promoted speculative jobs have first claim
//     on a backend's slots and rate tokens. When a backend has no free
//     slot for one, the lowest-utility running preemptible speculative job
//     on it is cancelled at once and its slot handed over.
//   - Waiting authoritative work (only with Slots or Rate set) is served
//     fairly between sessions (fairQueue): one session's queued calls
//     delay another session's call by at most one tool execution per
//     session with calls waiting. The queue is bounded (Limits.Queue);
//     when it is full, a call is refused with a *QueueFullError, taken from
//     the session with the most calls waiting.
//   - Speculative jobs run only inside the budget: at most Options.SpecBudget
//     at once globally, at most Limits.SpecBudget per backend, never in the
//     backend's authoritative reserve, never while authoritative work
//     waits there, and never while the backend is backing off after a
//     429. Queued ones start in order of utility; one not started by its
//     deadline is dropped.
//   - Every goroutine the scheduler starts is waited for by Close.
package sched

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Errors reported by Do.
var (
	ErrClosed         = errors.New("sched: closed")
	ErrUnknownBackend = errors.New("sched: unknown backend")
	// ErrQueueFull is what a *QueueFullError matches (errors.Is).
	ErrQueueFull = errors.New("sched: queue full")
)

// QueueFullError is Do's answer when the backend's authoritative queue is
// full (Limits.Queue calls waiting) and the call's session already holds
// about the largest share of it. A front answers it with HTTP 503 and
// Retry-After.
type QueueFullError struct {
	Backend string
	Queue   int // the bound that was reached
	// RetryAfter is when a place is likely to be free again: how long
	// the backend takes, on average, to free a slot (or a rate token),
	// at least a second.
	RetryAfter time.Duration
}

func (e *QueueFullError) Error() string {
	return fmt.Sprintf("sched: backend %q is busy: %d calls are waiting for it (its queue bound); retry in %v",
		e.Backend, e.Queue, e.RetryAfter)
}

// Is reports whether target is ErrQueueFull.
func (e *QueueFullError) Is(target error) bool { return target == ErrQueueFull }

// Defaults of Limits.
const (
	// DefaultSpecBudget is a backend's speculative budget when neither
	// SpecBudget nor Slots is set.
	DefaultSpecBudget = 4
	// DefaultQueue is how many authoritative calls may wait for a
	// backend when Queue is not set.
	DefaultQueue = 256
)

// Limits are the capacity of one backend.
type Limits struct {
	// Slots is how many executions may run at once, authoritative and
	// speculative together, authoritative first. 0 means authoritative
	// calls are not limited (as without ahead): speculation is then
	// bounded by SpecBudget alone, and nothing preempts it.
	Slots int
	// Reserve is how many slots speculative work may never take (with
	// Slots only). 0 means none: preemption frees slots for
	// authoritative calls at once, so a reserve is only needed for
	// non-cancellable speculative tools.
	Reserve int
	// SpecBudget caps concurrent speculative executions on this backend;
	// 0 means Slots - Reserve, or DefaultSpecBudget without Slots.
	SpecBudget int
	// Rate limits executions per second (token bucket); 0 means no limit.
	Rate float64
	// Burst is the bucket size; 0 means max(1, Slots), or
	// DefaultSpecBudget without Slots.
	Burst int
	// RateReserve is how many tokens speculation leaves in the bucket for
	// authoritative calls; 0 means 1 when Rate is set.
	RateReserve int
	// Queue bounds the authoritative calls waiting for a slot or a rate
	// token (so only with Slots or Rate); 0 means DefaultQueue. A call
	// beyond it is refused with a *QueueFullError (see fairQueue.victim
	// for which one).
	Queue int
}

func (l Limits) withDefaults() Limits {
	l.Slots = max(l.Slots, 0)
	l.Reserve = min(max(l.Reserve, 0), l.Slots)
	room := l.Slots - l.Reserve
	if l.Slots == 0 {
		room = DefaultSpecBudget
	}
	if l.SpecBudget <= 0 || (l.Slots > 0 && l.SpecBudget > room) {
		l.SpecBudget = room
	}
	if l.Burst <= 0 {
		l.Burst = max(1, l.Slots)
		if l.Slots == 0 {
			l.Burst = DefaultSpecBudget
		}
	}
	if l.Rate > 0 && l.RateReserve <= 0 {
		l.RateReserve = 1
	}
	if l.Queue <= 0 {
		l.Queue = DefaultQueue
	}
	return l
}

// Options configure a Scheduler. The zero value of each field is valid.
type Options struct {
	// Backends maps backend names to their limits; more can be added
	// with AddBackend.
	Backends map[string]Limits
	// SpecBudget caps concurrent speculative executions over all
	// backends; 0 means 8.
	SpecBudget int
}

type backendState struct {
	name        string
	lim         Limits
	limiter     *rate.Limiter
	queue       fairQueue // authoritative calls and promoted jobs waiting
	specQ       []*Job
	running     map[*Job]struct{} // speculative jobs running, not promoted
	specRunning int               // running, not promoted
	authRunning int               // authoritative calls and promoted jobs holding slots
	backoff     time.Time         // no speculation before this
	// exec is a moving average of authoritative executions' durations,
	// for QueueFullError.RetryAfter.
	exec    time.Duration
	refused int64 // calls refused because the queue was full
}

func (b *backendState) used() int { return b.specRunning + b.authRunning }

func (b *backendState) removeSpec(j *Job) {
	for i, q := range b.specQ {
		if q == j {
			b.specQ = append(b.specQ[:i], b.specQ[i+1:]...)
			return
		}
	}
}

// retryAfter estimates when a full queue has room again: one slot freed
// (the mean execution over the slots) or one rate token, at least 1 s.
func (b *backendState) retryAfter() time.Duration {
	d := time.Second
	if b.lim.Slots > 0 {
		d = max(d, b.exec/time.Duration(b.lim.Slots))
	}
	if b.lim.Rate > 0 {
		d = max(d, time.Duration(float64(time.Second)/b.lim.Rate))
	}
	return d
}

// Scheduler runs jobs on backends. Create it with New and stop it with
// Close.
type Scheduler struct {
	budget int

	mu          sync.Mutex // protects everything below and the state of every Job
	backends    map[string]*backendState
	specRunning int
	seq         uint64 // numbers speculative submissions and queue arrivals
	closed      bool
	retry       *time.Timer // re-dispatch after a backoff or rate wait
	retryAt     time.Time
	wg          sync.WaitGroup
	stats       Stats
}

// Stats counts what happened to speculative jobs, and the authoritative
// calls refused because a queue was full.
type Stats struct {
	Submitted, Started, Finished, Dropped, Cancelled, Preempted, Promoted int64
	Refused                                                               int64
}

// New returns a Scheduler; nil opts means no backends yet and the
// defaults.
func New(opts *Options) *Scheduler {
	var o Options
	if opts != nil {
		o = *opts
	}
	s := &Scheduler{
		budget:   o.SpecBudget,
		backends: make(map[string]*backendState),
	}
	if s.budget <= 0 {
		s.budget = 8
	}
	for name, lim := range o.Backends {
		s.addLocked(name, lim)
	}
	return s
}

// AddBackend adds or reconfigures a backend.
func (s *Scheduler) AddBackend(name string, lim Limits) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b, ok := s.backends[name]; ok {
		b.lim = lim.withDefaults()
		b.limiter = newLimiter(b.lim)
		s.dispatchLocked()
		return
	}
	s.addLocked(name, lim)
}

func (s *Scheduler) addLocked(name string, lim Limits) {
	lim = lim.withDefaults()
	s.backends[name] = &backendState{
		name:    name,
		lim:     lim,
		limiter: newLimiter(lim),
		running: make(map[*Job]struct{}),
	}
}

func newLimiter(l Limits) *rate.Limiter {
	if l.Rate <= 0 {
		return nil
	}
	return rate.NewLimiter(rate.Limit(l.Rate), l.Burst)
}

// Do runs fn as an authoritative execution of session on backend, in the
// caller's goroutine. Without Slots or Rate on the backend it runs at
// once. Otherwise it waits, fairly between sessions, for a slot
// (preempting speculative work if none is free) and a rate token; if
// Limits.Queue calls are already waiting, it may instead return a
// *QueueFullError at once. It returns ctx.Err() without running fn if ctx
// ends first.
func (s *Scheduler) Do(ctx context.Context, backend, session string, fn func(ctx context.Context)) error {
	s.mu.Lock()
	b, ok := s.backends[backend]
	if !ok {
		s.mu.Unlock()
		return fmt.Errorf("%w %q", ErrUnknownBackend, backend)
	}
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	if now := time.Now(); b.queue.len() == 0 && (b.lim.Slots == 0 || b.used() < b.lim.Slots) &&
		(b.limiter == nil || b.limiter.TokensAt(now) >= 1) {
		// Nothing waits and there is room (always, without Slots or
		// Rate): what dispatch would do, without a queue entry.
		fair := b.lim.Slots > 0 || b.limiter != nil // else nothing ever waits
		if b.limiter != nil {
			b.limiter.AllowN(now, 1)
		}
		if fair {
			b.queue.serve(session)
		}
		b.authRunning++
		s.mu.Unlock()
		s.run(ctx, b, session, fair, fn)
		return nil
	}
	if b.queue.calls >= b.lim.Queue {
		v := b.queue.victim(session)
		if v == nil {
			s.stats.Refused++
			b.refused++
			err := &QueueFullError{Backend: backend, Queue: b.lim.Queue, RetryAfter: b.retryAfter()}
			s.mu.Unlock()
			return err
		}
		b.queue.remove(v)
		s.stats.Refused++
		b.refused++
		v.err = &QueueFullError{Backend: backend, Queue: b.lim.Queue, RetryAfter: b.retryAfter()}
		close(v.ready)
	}
	w := &authWaiter{session: session, ready: make(chan struct{})}
	b.queue.push(w, &s.seq)
	s.dispatchLocked()
	s.mu.Unlock()

	select {
	case <-w.ready:
		if w.err != nil {
			return w.err
		}
	case <-ctx.Done():
		s.mu.Lock()
		if w.ok {
			// Granted just as we gave up: give the slot back.
			b.authRunning--
			b.queue.done(session)
		} else {
			b.queue.remove(w) // (no-op if it was refused meanwhile)
		}
		s.dispatchLocked()
		s.mu.Unlock()
		return ctx.Err()
	}
	s.run(ctx, b, session, true, fn)
	return nil
}

// run runs fn in a slot b granted to session, and gives the slot back;
// fair says the queue accounts for the session's running calls.
func (s *Scheduler) run(ctx context.Context, b *backendState, session string, fair bool, fn func(ctx context.Context)) {
	start := time.Now()
	defer func() {
		d := time.Since(start)
		s.mu.Lock()
		b.authRunning--
		if fair {
			b.queue.done(session)
		}
		if b.exec == 0 {
			b.exec = d
		} else {
			b.exec += (d - b.exec) / 8
		}
		s.dispatchLocked()
		s.mu.Unlock()
	}()
	fn(ctx)
}

// Submit queues speculative work. The returned Job is never nil; if the
// scheduler is closed or the backend unknown it is already Dropped.
func (s *Scheduler) Submit(spec Spec) *Job {
	j := &Job{s: s, spec: spec, done: make(chan struct{})}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats.Submitted++
	b, ok := s.backends[spec.Backend]
	if !ok || s.closed {
		j.state = Dropped
		s.stats.Dropped++
		close(j.done)
		return j
	}
	j.b = b
	s.seq++
	j.seq = s.seq
	b.specQ = append(b.specQ, j)
	if !spec.Deadline.IsZero() {
		j.timer = time.AfterFunc(time.Until(spec.Deadline), func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if j.state == Queued && !j.promoted {
				s.endQueuedLocked(j, Dropped)
			}
		})
	}
	s.dispatchLocked()
	return j
}

// Backoff stops speculation on backend for d (after a 429 or Retry-After).
// Authoritative calls are not held back.
func (s *Scheduler) Backoff(backend string, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.backends[backend]
	if !ok || d <= 0 {
		return
	}
	until := time.Now().Add(d)
	if until.After(b.backoff) {
		b.backoff = until
	}
	s.armRetryLocked(until)
}

// Stats returns counts of what happened to speculative jobs.
func (s *Scheduler) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// Load reports, for a backend, the slots in use by authoritative and
// speculative work and the lengths of its queues.
type Load struct {
	Slots, AuthRunning, SpecRunning, AuthQueued, SpecQueued int
	// Refused counts the authoritative calls refused since start
	// because the backend's queue was full.
	Refused int64
}

// Load returns the current load of every backend.
func (s *Scheduler) Load() map[string]Load {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := make(map[string]Load, len(s.backends))
	for name, b := range s.backends {
		m[name] = Load{
			Slots:       b.lim.Slots,
			AuthRunning: b.authRunning,
			SpecRunning: b.specRunning,
			AuthQueued:  b.queue.len(),
			SpecQueued:  len(b.specQ),
			Refused:     b.refused,
		}
	}
	return m
}

// Close cancels all speculative work, refuses new work (calls waiting in a
// queue get ErrClosed), and waits for the goroutines it started.
// Authoritative calls in progress are not interrupted (their callers own
// them).
func (s *Scheduler) Close() {
	s.mu.Lock()
	s.closed = true
	for _, b := range s.backends {
		for _, j := range append([]*Job(nil), b.specQ...) {
			s.endQueuedLocked(j, Cancelled)
		}
		// Nothing waiting starts any more: callers of Do are told
		// (their calls never ran), promoted jobs are cancelled.
		for _, w := range append([]*authWaiter(nil), b.queue.h...) {
			b.queue.remove(w)
			if w.job == nil {
				w.err = ErrClosed
				close(w.ready)
				continue
			}
			w.job.waiter = nil
			w.job.state = Cancelled
			s.stats.Cancelled++
			close(w.job.done)
		}
		for j := range b.running {
			s.cancelRunningLocked(j, Cancelled)
		}
	}
	if s.retry != nil {
		s.retry.Stop()
	}
	s.mu.Unlock()
	s.wg.Wait()
}
