package engine

import (
	"container/list"
	"time"

	"github.com/ahead-dev/ahead/callkey"
	"github.com/ahead-dev/ahead/predict"
	"github.com/ahead-dev/ahead/trace"
)

// The one door into the engine's state.
//
// Everything the engine changes while it serves calls lives in state,
// guarded by Engine.mu, and is read and changed only between e.lock() and
// e.unlock(). Methods named *Locked are steps taken inside the door; they
// change the state and put what must follow the change into its tail:
// the waiters to wake, the sessions the predictor must forget, the
// records to write, the debug lines, the metrics of a finished call or a
// started execution. unlock releases the lock and then does the tail, in
// that order, so that nothing that may block or call out of the engine (a
// recorder's I/O, a predictor's Forget, a log handler) runs under the lock,
// and nothing that follows a change can be forgotten at one of the places
// that change it. Counters are counted in place, with the change:
// Prometheus counters neither block nor call out.

// state is the engine's mutable state (see above).
type state struct {
	sessions map[string]*session
	shared   map[callkey.Key]*entry // results of shared tools, any session
	hazards  hazardIndex            // entries other sessions' writes can reach (hazard.go)
	thinks   thinkTimes             // recent think times, for default TTLs
	disabled rule                   // freshness rules turned off (mutation check only)
	tools    map[string]*toolStats
	origins  map[predict.Origin]*OriginStats
	count    int   // speculative entries, all sessions and shared
	bytes    int64 // their size
	// sessBytes is what sessions hold beside their entries (session.own):
	// with bytes, what MaxBytes bounds.
	sessBytes int64
	byUtility entryHeap   // every entry, lowest utility first (memory.go)
	filed     entryHeap   // entries holding a result, lowest utility first
	idle      sessionHeap // sessions without a call in flight, least recent first
	totals    Totals
	tokens    float64 // speculative executions that may start (Amplification)
	// writes counts the writes applied (invalidateLocked): an orphaned
	// read is joined only if none came since it arrived (orphan.go).
	writes uint64
	// orphansRunning counts the orphans still running (orphan.go), and
	// orphanReading the bytes of output they have read (orphanBudget):
	// with bytes and sessBytes, what MaxBytes bounds.
	orphansRunning int
	orphanReading  int64
	quiet          bool // Quiesce was called: no new speculation
	closed         bool

	// folded maps the names Join folded away to their fold (in folds,
	// oldest first): the session each stands for now (link.go).
	folded map[string]*list.Element
	folds  *list.List

	// onFiled, if set (tests only, export_test.go), is told each time a
	// speculative result is filed.
	onFiled func()

	tail tail // what follows the changes made since the lock was taken
}

func newState(opts Options) state {
	st := state{
		sessions: make(map[string]*session),
		shared:   make(map[callkey.Key]*entry),
		tools:    make(map[string]*toolStats),
		origins:  make(map[predict.Origin]*OriginStats),
		tokens:   opts.AmplificationBurst,
	}
	st.byUtility.at = func(en *entry) *int { return &en.utilityAt }
	st.filed.at = func(en *entry) *int { return &en.filedAt }
	return st
}

// tail is what follows the changes of one stay inside the door, done by
// unlock once the lock is released, in the order of its fields.
type tail struct {
	// forget: sessions dropped; the predictor forgets them. A session
	// dropped here may have been started again since: it then loses what
	// the predictor knew of it, no more.
	forget []string
	// records: events to record, in the order they happened (speculative
	// executions as they settle, calls, messages, emitted calls).
	records []trace.Event
	// logs: speculative executions whose outcome was fixed, for the
	// debug log (only when it is on).
	logs []settled
	// call: the authoritative call finished (hasCall), for the metrics.
	call    callDone
	hasCall bool
	// started: the tool of a speculative execution that started.
	started    string
	hasStarted bool
	// wake: a channel to close (the waiters on a session's prediction;
	// one stay inside the door drains at most one session's queue).
	wake chan struct{}
}

// callDone is a finished authoritative call, as the metrics count it.
type callDone struct {
	tool        string
	source      Source
	took, saved time.Duration
	err         error
}

// settled is a speculative execution whose outcome was fixed, as the
// debug log sees it.
type settled struct {
	tool, from, args string // args: canonical, digested for the log
	origins          origins
	p                float64
	why              Outcome
	ran              bool
	took             time.Duration // how long it ran, if it ran
}

// lock opens the door: the state may be read and changed until unlock.
func (e *Engine) lock() { e.mu.Lock() }

// unlock closes the door: it releases the lock, then does what the changes
// made since lock left in the tail.
func (e *Engine) unlock() {
	t := e.st.tail
	e.st.tail = tail{}
	e.mu.Unlock()
	if t.forget == nil && t.records == nil && t.logs == nil &&
		!t.hasCall && !t.hasStarted && t.wake == nil {
		return
	}
	e.doTail(&t)
}

// doTail does a tail, outside the lock.
func (e *Engine) doTail(t *tail) {
	if t.wake != nil {
		close(t.wake)
	}
	for _, id := range t.forget {
		if e.opts.Predictor != nil {
			e.opts.Predictor.Forget(id)
		}
		if e.opts.SessionEnded != nil {
			e.opts.SessionEnded(id)
		}
	}
	if e.opts.Recorder != nil {
		for _, ev := range t.records {
			if err := e.opts.Recorder.Record(ev); err != nil {
				e.recordFailed(ev, err)
			}
		}
	}
	for _, s := range t.logs {
		e.logSpeculation(s)
	}
	m := e.metrics
	if t.hasStarted {
		m.specStarted.WithLabelValues(m.tool(t.started)).Inc()
	}
	if t.hasCall {
		c := t.call
		m.observeCall(c.tool, c.source, c.took, c.saved, c.err)
	}
}

// recordLocked queues an event for the recorder (nothing without one).
func (e *Engine) recordLocked(ev trace.Event) {
	if e.opts.Recorder != nil {
		e.st.tail.records = append(e.st.tail.records, ev)
	}
}

// recordFailed logs an event the recorder refused.
func (e *Engine) recordFailed(ev trace.Event, err error) {
	switch ev.Kind {
	case trace.KindSpeculative:
		e.opts.Logger.Warn("recording speculative call", "session", ev.Session, "tool", ev.Tool, "err", err)
	case trace.KindMessage:
		e.opts.Logger.Warn("recording message", "session", ev.Session, "role", ev.Role, "err", err)
	case trace.KindEmitted:
		e.opts.Logger.Warn("recording an emitted call", "session", ev.Session, "tool", ev.Tool, "err", err)
	case trace.KindTools:
		e.opts.Logger.Warn("recording declared tools", "session", ev.Session, "from", ev.From, "err", err)
	default:
		e.opts.Logger.Warn("recording call", "session", ev.Session, "tool", ev.Tool, "err", err)
	}
}
