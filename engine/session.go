package engine

import (
	"time"

	"github.com/ahead-dev/ahead/backend"
	"github.com/ahead-dev/ahead/callkey"
	"github.com/ahead-dev/ahead/policy"
	"github.com/ahead-dev/ahead/predict"
	"github.com/ahead-dev/ahead/sched"
	"github.com/ahead-dev/ahead/trace"
)

// Outcome is the fate of a speculative entry.
type Outcome string

const (
	OutcomeReused      Outcome = "reused"         // handed to an authoritative call
	OutcomePromoted    Outcome = "promoted"       // became the authoritative execution
	OutcomeExpired     Outcome = "expired"        // TTL passed unclaimed
	OutcomeInvalidated Outcome = "invalidated"    // a write may have changed it
	OutcomeEvicted     Outcome = "evicted"        // dropped for memory
	OutcomePreempted   Outcome = "preempted"      // cancelled for an authoritative call
	OutcomeDropped     Outcome = "dropped"        // not started before its deadline
	OutcomeFailed      Outcome = "failed"         // error result or backend failure
	OutcomeCancelled   Outcome = "cancelled"      // session ended or engine closed
	OutcomeWarmed      Outcome = "warmed"         // a dry run or warm-up that ran
	OutcomeNeedsInput  Outcome = "input_required" // the tool asked for the user's input: discarded
)

// session is one agent session's state.
type session struct {
	id         string
	seq, step  int
	stepSeq    int // the seq of the current step's first call (Offer's lateness)
	inflight   int
	results    int       // authoritative results so far: the think window
	lastResult time.Time // when the previous authoritative result came back
	lastActive time.Time
	entries    map[callkey.Key]*entry
	running    map[callkey.Key]int  // authoritative calls in flight, by key
	warmed     map[string]time.Time // tool → last warm-up
	// served holds the calls whose results the agent has received since
	// the session's last write (bounded): speculating one again would
	// only fetch what the agent already has, unless the predictor says
	// it repeats (predict.Prediction.Repeat: polling).
	served map[callkey.Key]struct{}
	bytes  int64 // its entries' size
	// own is what the session holds beside its entries, as counted in
	// Engine.sessBytes: its overhead, msgs, served (servedBytes), the
	// names folded into it (aliasBytes), its orphans' results
	// (orphanBytes) and the predictor's state for it (predBytes, as last
	// measured).
	own, servedBytes, predBytes int64
	idleAt                      int           // position in Engine.idle, -1 if not there
	msgs                        []trace.Event // the window of recent conversation (Message)
	msgBytes                    int64         // content bytes in msgs
	gone                        bool          // dropped; late completions must not re-add state
	begun                       bool          // Begin was called
	aliases                     []string      // names folded into this session (Join)
	aliasBytes                  int64         // their size (aliasSize), part of own
	// thinkHeard says the model side measured this step's think time
	// (ThinkTime) since the last result: the step's own result→call
	// sample is then not counted again in Engine.thinks.
	thinkHeard bool
	// declared holds the digest of the tools last declared to the session,
	// by source (Tools): at most one per source, four.
	declared map[string]uint64
	// after is the prediction work queued for the session's predictor
	// goroutine (after.go), which runs while afterRun; afterDone, made
	// by the first to wait, is closed when it has drained the queue.
	after     []afterWork
	afterRun  bool
	afterDone chan struct{}
	// orphans are the session's calls whose requesters left while they
	// ran, that a re-issued call may join (orphan.go): at most maxOrphans,
	// oldest first; orphanBytes is what the finished ones hold, part of own.
	orphans     []*flight
	orphanBytes int64
}

// beginLocked accounts for an arriving call and returns the agent's think
// time before it (zero if unknown), and whether the model side already
// measured this step's think time. Calls arriving while another of the
// session is in flight belong to the same step.
func (s *session) beginLocked(now time.Time) (think time.Duration, heard bool) {
	s.lastActive = now
	if s.inflight == 0 {
		s.step++
		s.stepSeq = s.seq
		if !s.lastResult.IsZero() {
			think = now.Sub(s.lastResult)
		}
		heard, s.thinkHeard = s.thinkHeard, false
	}
	s.inflight++
	return think, heard
}

// emitAt is where a call the session's model emits now stands: the seq of
// the call it comes before, and the step it will make (the current one
// while calls are in flight, else the next).
func (s *session) emitAt() (seq, step int) {
	step = s.step
	if s.inflight == 0 {
		step++
	}
	return s.seq, step
}

// entry is one speculative execution and, once done, its result.
type entry struct {
	key     callkey.Key
	sess    *session // nil for a shared entry
	rule    policy.Tool
	level   policy.Level
	fp      policy.Footprint // what its result depends on
	window  int              // from's results when it was offered (volatile tools)
	p       float64
	origins origins // what predicted it
	// raw is the p each origin gave it (by its bit), before calibration.
	raw     [maxOrigins]float32
	utility float64
	// utilityAt and filedAt are its positions in Engine.byUtility and
	// Engine.filed, -1 when not there.
	utilityAt, filedAt int
	job                *sched.Job
	backend            string
	req                backend.Request // what actually runs (a dry run's variant)

	// Set by the job when it finishes, before its Done channel closes.
	done     bool
	resp     backend.Response
	err      error
	started  time.Time
	finished time.Time
	expires  time.Time
	size     int64

	from   string // the session that predicted it
	seq    int    // the position in from it was predicted for
	latest int    // the latest position it was predicted for (again)
	reuses int    // times a shared result was read
	// refreshes counts the runs before this one of the same prediction
	// whose results expired unclaimed (refreshLocked); refreshing is set
	// on an expired entry that a fresh run replaces.
	refreshes  int
	refreshing bool
	// saved is what the claiming call did not wait: the whole run when
	// reused, the part before it arrived when promoted.
	saved   time.Duration
	ran     bool // Run started
	removed bool // out of its table
	outcome Outcome
	settled bool // outcome counted and recorded
}

func (en *entry) reusableLocked(now time.Time) bool {
	return en.done && en.err == nil && !en.resp.IsError && !en.resp.NeedsInput && en.level == policy.LevelFull && now.Before(en.expires)
}

func (en *entry) expiredLocked(now time.Time) bool {
	return en.done && !now.Before(en.expires)
}

func (e *Engine) sessionLocked(id string, now time.Time) *session {
	s, ok := e.st.sessions[id]
	if !ok {
		e.admitSessionLocked()
		s = &session{
			id:         id,
			idleAt:     -1,
			lastActive: now,
			entries:    make(map[callkey.Key]*entry),
			running:    make(map[callkey.Key]int),
			warmed:     make(map[string]time.Time),
			served:     make(map[callkey.Key]struct{}),
		}
		e.st.sessions[id] = s
		e.idleLocked(s)
		e.resizeLocked(s)
	}
	return s
}

// detachLocked takes an entry out of its table and its memory accounting.
// Its outcome is decided by the caller.
func (e *Engine) detachLocked(en *entry) {
	if en.removed {
		return
	}
	en.removed = true
	e.st.hazards.remove(en)
	e.st.byUtility.remove(en)
	e.st.filed.remove(en)
	if en.sess != nil {
		if en.sess.entries[en.key] == en {
			delete(en.sess.entries, en.key)
		}
		en.sess.bytes -= en.size
	} else if e.st.shared[en.key] == en {
		delete(e.st.shared, en.key)
	}
	e.st.count--
	e.st.bytes -= en.size
}

// removeLocked takes an entry out of its table with an outcome, cancelling
// its job if it has not finished. A dry run that warmed a cache is left to
// finish, and so is a running execution of a tool that is not cancellable:
// its result, no longer in any table, is discarded when it ends.
func (e *Engine) removeLocked(en *entry, why Outcome) {
	if en.removed {
		return
	}
	e.detachLocked(en)
	if !en.done && en.job != nil && why != OutcomeWarmed && (en.rule.IsCancellable() || !en.ran) {
		en.job.Cancel()
	}
	e.settleLocked(en, why)
}

func (e *Engine) dropSessionLocked(s *session, why Outcome) {
	for _, en := range s.entries {
		e.removeLocked(en, why)
	}
	e.busyLocked(s)
	e.unfoldLocked(s)
	e.st.sessBytes -= s.own
	s.own = 0
	s.gone = true
	delete(e.st.sessions, s.id)
	if e.opts.Predictor != nil || e.opts.SessionEnded != nil {
		e.st.tail.forget = append(e.st.tail.forget, s.id)
	}
}

// Begin announces a session before its first call (an MCP session's
// initialize), so that its first call can be speculated on too, if the
// predictor is a Starter. It does nothing for a session that has already
// made calls or begun, or when nothing may be speculated.
func (e *Engine) Begin(sessionID string) {
	_, ok := e.opts.Predictor.(predict.Starter)
	if !ok || e.policy.Load() == nil {
		return
	}
	e.lock()
	if e.st.closed {
		e.unlock()
		return
	}
	s := e.sessionLocked(sessionID, time.Now())
	if s.seq == 0 && !s.begun {
		// In order with what the session says before its first call.
		e.afterLocked(s, afterWork{kind: afterStart})
	}
	s.begun = true
	e.unlock()
}

// EndSession drops a session: its speculative work is cancelled and its
// results discarded. Ending an unknown session does nothing.
func (e *Engine) EndSession(sessionID string) {
	e.lock()
	s, ok := e.st.sessions[sessionID]
	if ok {
		e.dropSessionLocked(s, OutcomeCancelled)
	}
	e.unlock() // the predictor forgets it
}
