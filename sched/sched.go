// Package sched runs tool executions on backends with limited slots, serving
// authoritative calls first and speculative work only on slack.
//
// Invariants, all kept under Scheduler.mu:
//   - Authoritative calls and promoted speculative jobs are served FIFO, in
//     the order they became authoritative, and have first claim on a
//     backend's slots. When a backend has no free slot
//     for one, the lowest-utility running preemptible speculative job on it
//     is cancelled at once and its slot handed over.
//   - Speculative jobs run only inside the budget: at most Options.SpecBudget
//     at once globally, at most Limits.SpecBudget per backend, never in the
//     backend's authoritative reserve, and never while the backend is backing
//     off after a 429. Queued ones start in order of utility; one not started
//     by its deadline is dropped.
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
)

// Limits are the capacity of one backend.
type Limits struct {
	// Slots is how many executions may run at once; 0 means 4.
	Slots int
	// Reserve is how many slots speculative work may never take. 0 means
	// none: preemption frees slots for authoritative calls at once, so a
	// reserve is only needed for non-cancellable speculative tools.
	Reserve int
	// SpecBudget caps concurrent speculative executions on this backend;
	// 0 means Slots - Reserve.
	SpecBudget int
	// Rate limits executions per second (token bucket); 0 means no limit.
	Rate float64
	// Burst is the bucket size; 0 means max(1, Slots).
	Burst int
	// RateReserve is how many tokens speculation leaves in the bucket for
	// authoritative calls; 0 means 1 when Rate is set.
	RateReserve int
}

func (l Limits) withDefaults() Limits {
	if l.Slots <= 0 {
		l.Slots = 4
	}
	if l.Reserve < 0 {
		l.Reserve = 0
	}
	if l.Reserve > l.Slots {
		l.Reserve = l.Slots
	}
	if l.SpecBudget <= 0 || l.SpecBudget > l.Slots-l.Reserve {
		l.SpecBudget = l.Slots - l.Reserve
	}
	if l.Burst <= 0 {
		l.Burst = max(1, l.Slots)
	}
	if l.Rate > 0 && l.RateReserve <= 0 {
		l.RateReserve = 1
	}
	return l
}

// Options configure a Scheduler.
type Options struct {
	// Backends maps backend names to their limits.
	Backends map[string]Limits
	// SpecBudget caps concurrent speculative executions over all
	// backends; 0 means 8.
	SpecBudget int
}

// State is where a speculative job is in its life.
type State int

const (
	Queued    State = iota // waiting for a slot
	Running                // executing
	Finished               // Run returned without being cancelled
	Dropped                // not started before its deadline, or refused
	Cancelled              // cancelled by its owner (Job.Cancel or Close)
	Preempted              // cancelled to free a slot for an authoritative call
)

var stateNames = [...]string{"queued", "running", "finished", "dropped", "cancelled", "preempted"}

func (s State) String() string { return stateNames[s] }

// Spec describes a speculative execution.
type Spec struct {
	// Backend names the backend it runs on.
	Backend string
	// Utility orders queued work (highest first) and chooses the victim of
	// preemption (lowest first).
	Utility float64
	// Deadline is when it must have started; zero means no deadline.
	Deadline time.Time
	// NotCancellable jobs cannot be preempted, so they start only if the
	// backend keeps at least max(Reserve, 1) slots free for
	// authoritative calls.
	NotCancellable bool
	// Run executes the work. Its context is cancelled on preemption,
	// cancellation or Close; Run must then return promptly.
	Run func(ctx context.Context)
}

// Job is a speculative execution handed to the scheduler.
type Job struct {
	s        *Scheduler
	spec     Spec
	b        *backendState
	done     chan struct{}
	timer    *time.Timer
	cancel   context.CancelFunc
	seq      uint64 // submission order, to break utility ties FIFO
	state    State  // guarded by s.mu
	promoted bool   // guarded by s.mu
	holds    bool   // holds a slot; guarded by s.mu
	started  time.Time
}

// Done is closed when the job has finished, was dropped, or was cancelled
// and its Run has returned.
func (j *Job) Done() <-chan struct{} { return j.done }

// State returns the job's state.
func (j *Job) State() State {
	j.s.mu.Lock()
	defer j.s.mu.Unlock()
	return j.state
}

// Started returns when the job started running (zero if it has not).
func (j *Job) Started() time.Time {
	j.s.mu.Lock()
	defer j.s.mu.Unlock()
	return j.started
}

// Promote makes the job authoritative: a queued job joins its backend's
// authoritative queue (FIFO, ahead of all speculative work) and a running
// one can no longer be preempted; neither counts against the speculative budget any more. It
// reports false if the job already ended (finished, dropped, cancelled or
// preempted).
func (j *Job) Promote() bool {
	s := j.s
	s.mu.Lock()
	defer s.mu.Unlock()
	switch j.state {
	case Queued:
		if j.promoted {
			return true
		}
		j.promoted = true
		j.stopTimer()
		j.b.removeSpec(j)
		// It joins the authoritative queue behind the calls already
		// waiting: the call it stands for has only just arrived.
		j.b.authQ = append(j.b.authQ, &authWaiter{job: j})
		s.dispatchLocked()
		return true
	case Running:
		if !j.promoted {
			j.promoted = true
			j.b.specRunning--
			s.specRunning--
			delete(j.b.running, j)
			j.b.authRunning++
			s.dispatchLocked() // budget freed
		}
		return true
	}
	return false
}

// Cancel stops the job: a queued one never starts, a running one has its
// context cancelled. It has no effect on a job that already ended.
func (j *Job) Cancel() { j.s.cancelJob(j, Cancelled) }

func (j *Job) stopTimer() {
	if j.timer != nil {
		j.timer.Stop()
		j.timer = nil
	}
}

// authWaiter is an entry of the authoritative queue: a caller of Do
// waiting for a slot, or a promoted job waiting to start.
type authWaiter struct {
	job   *Job          // the promoted job; nil for a caller of Do
	ready chan struct{} // closed when a caller is granted a slot
	ok    bool          // granted; guarded by s.mu
}

type backendState struct {
	name        string
	lim         Limits
	limiter     *rate.Limiter
	authQ       []*authWaiter
	specQ       []*Job
	running     map[*Job]struct{} // preemptible-or-not speculative jobs running
	specRunning int               // running, not promoted
	authRunning int               // authoritative calls and promoted jobs holding slots
	backoff     time.Time         // no speculation before this
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

// Scheduler runs jobs on backends. Create it with New and stop it with
// Close.
type Scheduler struct {
	budget int

	mu          sync.Mutex // protects everything below and the state of every Job
	backends    map[string]*backendState
	specRunning int
	seq         uint64
	closed      bool
	retry       *time.Timer // re-dispatch after a backoff or rate wait
	retryAt     time.Time
	wg          sync.WaitGroup
	stats       Stats
}

// Stats counts what happened to speculative jobs.
type Stats struct {
	Submitted, Started, Finished, Dropped, Cancelled, Preempted, Promoted int64
}

// New returns a Scheduler for the given backends.
func New(opts Options) *Scheduler {
	s := &Scheduler{
		budget:   opts.SpecBudget,
		backends: make(map[string]*backendState),
	}
	if s.budget <= 0 {
		s.budget = 8
	}
	for name, lim := range opts.Backends {
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

// Do runs fn as an authoritative execution on backend: it waits (FIFO) for a
// slot, preempting speculative work if none is free, and for a rate token,
// then calls fn in the caller's goroutine. It returns ctx.Err() without
// running fn if ctx ends first.
func (s *Scheduler) Do(ctx context.Context, backend string, fn func(ctx context.Context)) error {
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
	limiter := b.limiter
	s.mu.Unlock()

	// Take the rate token before queueing for a slot, so a slot is never
	// held idle while waiting for the bucket to refill.
	if limiter != nil {
		if err := limiter.Wait(ctx); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
	}

	w := &authWaiter{ready: make(chan struct{})}
	s.mu.Lock()
	b.authQ = append(b.authQ, w)
	s.dispatchLocked()
	s.mu.Unlock()

	select {
	case <-w.ready:
	case <-ctx.Done():
		s.mu.Lock()
		if w.ok {
			// Granted just as we gave up: give the slot back.
			b.authRunning--
		} else {
			for i, q := range b.authQ {
				if q == w {
					b.authQ = append(b.authQ[:i], b.authQ[i+1:]...)
					break
				}
			}
		}
		s.dispatchLocked()
		s.mu.Unlock()
		return ctx.Err()
	}
	defer func() {
		s.mu.Lock()
		b.authRunning--
		s.dispatchLocked()
		s.mu.Unlock()
	}()
	fn(ctx)
	return nil
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
			AuthQueued:  len(b.authQ),
			SpecQueued:  len(b.specQ),
		}
	}
	return m
}

// Close cancels all speculative work, refuses new work, and waits for the
// goroutines it started. Authoritative calls in progress are not
// interrupted (their callers own them).
func (s *Scheduler) Close() {
	s.mu.Lock()
	s.closed = true
	for _, b := range s.backends {
		for _, j := range append([]*Job(nil), b.specQ...) {
			s.endQueuedLocked(j, Cancelled)
		}
		kept := b.authQ[:0]
		for _, w := range b.authQ {
			if w.job == nil {
				kept = append(kept, w) // callers of Do own their calls
				continue
			}
			w.job.state = Cancelled
			s.stats.Cancelled++
			close(w.job.done)
		}
		b.authQ = kept
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

func (s *Scheduler) cancelJob(j *Job, why State) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch j.state {
	case Queued:
		if j.promoted {
			for i, w := range j.b.authQ {
				if w.job == j {
					j.b.authQ = append(j.b.authQ[:i], j.b.authQ[i+1:]...)
					break
				}
			}
			j.state = why
			s.stats.Cancelled++
			close(j.done)
			return
		}
		s.endQueuedLocked(j, why)
	case Running:
		s.cancelRunningLocked(j, why)
		s.dispatchLocked()
	}
}

// endQueuedLocked ends a queued, unpromoted job that never ran.
func (s *Scheduler) endQueuedLocked(j *Job, why State) {
	j.stopTimer()
	j.b.removeSpec(j)
	j.state = why
	switch why {
	case Dropped:
		s.stats.Dropped++
	default:
		s.stats.Cancelled++
	}
	close(j.done)
}

// cancelRunningLocked cancels a running job and frees its slot at once: the
// slot goes to whoever needs it now, even though Run may take a moment to
// notice. Trading a brief overshoot of the backend's concurrency for never
// making an authoritative call wait on speculative work is the point of
// preemption. Done is closed when Run returns.
func (s *Scheduler) cancelRunningLocked(j *Job, why State) {
	if j.state != Running {
		return
	}
	j.state = why
	if why == Preempted {
		s.stats.Preempted++
	} else {
		s.stats.Cancelled++
	}
	j.cancel()
	s.releaseLocked(j)
}

func (s *Scheduler) releaseLocked(j *Job) {
	if !j.holds {
		return
	}
	j.holds = false
	if j.promoted {
		j.b.authRunning--
	} else {
		j.b.specRunning--
		s.specRunning--
		delete(j.b.running, j)
	}
}

// dispatchLocked hands free slots to waiting work: on every backend,
// authoritative and promoted work first (preempting speculation if needed),
// then speculative work by utility within the budgets.
func (s *Scheduler) dispatchLocked() {
	for _, b := range s.backends {
		s.dispatchAuthLocked(b)
	}
	if s.closed {
		return
	}
	now := time.Now()
	for s.specRunning < s.budget {
		b, j := s.bestSpecLocked(now)
		if j == nil {
			return
		}
		s.startLocked(b, j)
	}
}

func (s *Scheduler) dispatchAuthLocked(b *backendState) {
	for len(b.authQ) > 0 {
		if b.used() >= b.lim.Slots && !s.preemptLocked(b) {
			return
		}
		w := b.authQ[0]
		b.authQ = b.authQ[1:]
		if w.job != nil {
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
		if len(b.authQ) > 0 {
			continue
		}
		if now.Before(b.backoff) {
			s.armRetryLocked(b.backoff)
			continue
		}
		free := b.lim.Slots - b.used()
		if free <= 0 || b.specRunning >= b.lim.SpecBudget || b.used() >= b.lim.Slots-b.lim.Reserve {
			continue
		}
		for _, j := range b.specQ {
			if j.spec.NotCancellable && free-1 < max(b.lim.Reserve, 1) {
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
