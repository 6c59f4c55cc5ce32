package sched

import (
	"context"
	"time"
)

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
	// NotCancellable jobs cannot be preempted, so on a backend with Slots
	// they start only if it keeps at least max(Reserve, 1) slots free for
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
	seq      uint64      // submission order, to break utility ties FIFO
	state    State       // guarded by s.mu
	promoted bool        // guarded by s.mu
	holds    bool        // holds a slot; guarded by s.mu
	waiter   *authWaiter // its entry in the authoritative queue while promoted and queued; guarded by s.mu
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

// Promote makes the job authoritative for session's call: a queued job
// joins its backend's authoritative queue as one of session's calls (ahead
// of all speculative work) and a running one can no longer be preempted;
// neither counts against the speculative budget any more. It reports false
// if the job already ended (finished, dropped, cancelled or preempted).
func (j *Job) Promote(session string) bool {
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
		// It queues as a call of session that has only just arrived. It
		// is not refused when the queue is full: it stands for a call
		// already accepted, and speculation's own bounds bound it.
		j.waiter = &authWaiter{job: j, session: session}
		j.b.queue.push(j.waiter, &s.seq)
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

func (s *Scheduler) cancelJob(j *Job, why State) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch j.state {
	case Queued:
		if j.promoted {
			j.b.queue.remove(j.waiter)
			j.waiter = nil
			j.state = why
			s.stats.Cancelled++
			close(j.done)
			s.dispatchLocked() // it may have been what held speculation back
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
