package learn

import (
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/ahead-dev/ahead/convo"
	"github.com/ahead-dev/ahead/mine"
	"github.com/ahead-dev/ahead/pattern"
	"github.com/ahead-dev/ahead/predict"
	"github.com/ahead-dev/ahead/trace"
)

// LearnerOptions configure a Learner. The zero value of each field means
// its default.
type LearnerOptions struct {
	// Online configures the predictor serving the pool (not Frozen: a
	// Learner learns).
	Online pattern.OnlineOptions
	// MaxCalls bounds the events kept for mining, calls and messages
	// alike (a checkpoint of 20,000 holds fewer calls than that where
	// the conversation is heard); the oldest sessions' events are
	// dropped first, those of the session in progress too. 0 means
	// 20000.
	MaxCalls int
	// MaxBytes bounds the memory of the calls kept for mining (arguments,
	// outputs, tool and session names, and keptOverhead bytes a call),
	// dropped as MaxCalls says. 0 means 64 MiB.
	MaxBytes int64
	// MaxSessionBytes bounds what one session's kept calls hold, so that
	// one long session with large outputs does not push every other out:
	// over it, the session's oldest calls are dropped (a call larger than
	// it is not kept). 0 means MaxBytes/4.
	MaxSessionBytes int64
	// Recorded, if set, returns recorded sessions (the trace store) to
	// mine with those observed: ahead mcp serves one session per process,
	// so only its recordings show a pattern recur. A session observed
	// replaces a recorded one of the same id (it may be recorded in
	// part).
	Recorded func() ([]trace.Session, error)
	// Logger receives the failures of relearning at checkpoints, which do
	// not stop the save; nil discards them.
	Logger *slog.Logger
	// Fleet, if set, learns with a fleet (fleet.go): Relearn mines only
	// while this replica holds the fleet's mining lease, from the fleet's
	// recent traffic instead of the calls kept here (which then only
	// carry live sessions over to a new pool), and shares the pool;
	// Adopt serves the pools the others share.
	Fleet Fleet
	// Default is the built-in default that predicts from the conversation
	// before a model is learnt and for the tools it has not learnt (nil:
	// convo.Builtin()); NoDefault leaves it out.
	Default   *convo.Default
	NoDefault bool
}

// Learner is an Online predictor that also finds new patterns. Online
// learning only updates the counts of patterns the pool has, so a new
// (empty) pool would never predict anything (issue 14). A Learner keeps
// the authoritative calls it observes (bounded), and Relearn mines them,
// adds the patterns the pool lacks (pattern.Merge), and serves the result
// from then on; Checkpoint relearns and saves.
//
// Swapping predictors keeps the sessions in progress: the new predictor
// is shown their calls again, without learning from them twice.
// Learner is safe for concurrent use.
type Learner struct {
	opts     LearnerOptions
	mineOpts mine.Options

	cur  atomic.Pointer[pattern.Online]
	conv relearnt // the conversation model, relearnt beside the patterns

	mu    sync.Mutex // protects the fields below, and the swap of cur
	log   map[string][]trace.Event
	order []string // sessions in log, oldest first
	live  map[string]bool
	kept  map[string]int64 // keptSize of each session's log
	// repeats counts how often a tool called again in a session had the
	// same arguments (repeat.go); at most maxRepeatTools tools.
	repeats map[string]repeatStat
	calls   int
	bytes   int64 // the sum of kept
	dirty   bool  // calls observed since the last Relearn
	// What the pool's header says it was learnt from (see headerLocked).
	base      pattern.Mined // the pool's header at start
	seen      pattern.Mined // sessions and calls observed since (Sessions, Calls)
	lastMined pattern.Mined // the input of the latest mining (Sessions, Calls)
	// With a fleet: the last pool shared (or the pool started from) and
	// the trace stream position its counts cover.
	fleetBase *pattern.Pool
	fleetMark uint64
	mineMu    sync.Mutex // one fleet mining at a time
	saveMu    sync.Mutex
}

var _ interface {
	Observe(trace.Event) []predict.Prediction
	Start(string) []predict.Prediction
	Forget(string)
} = (*Learner)(nil)

// NewLearner returns a Learner starting from pool (which may have no
// patterns). opts may be nil.
func NewLearner(pool *pattern.Pool, opts *LearnerOptions) (*Learner, error) {
	l := &Learner{log: make(map[string][]trace.Event), live: make(map[string]bool), kept: make(map[string]int64), repeats: make(map[string]repeatStat), base: pool.Mined, fleetBase: pool}
	if opts != nil {
		l.opts = *opts
	}
	l.opts.Online.Frozen = false
	if l.opts.MaxCalls <= 0 {
		l.opts.MaxCalls = 20000
	}
	if l.opts.MaxBytes <= 0 {
		l.opts.MaxBytes = 64 << 20
	}
	if l.opts.MaxSessionBytes <= 0 {
		l.opts.MaxSessionBytes = l.opts.MaxBytes / 4
	}
	if l.opts.Logger == nil {
		l.opts.Logger = slog.New(slog.DiscardHandler)
	}
	// New patterns are mined as the pool was, when it says how.
	l.mineOpts = mine.Options{
		MaxContext:    pool.Mined.MaxContext,
		MinSupport:    pool.Mined.MinSupport,
		MinConfidence: pool.Mined.MinConfidence,
		Horizon:       pool.Mined.Horizon,
	}
	o, err := pattern.NewOnline(pool, &l.opts.Online)
	if err != nil {
		return nil, err
	}
	l.cur.Store(o)
	conv, err := conversation(pool)
	if err != nil {
		return nil, err
	}
	if conv != nil {
		l.conv.cur.Store(conv)
	}
	if !l.opts.NoDefault {
		l.conv.fresh = convo.NewFresh(l.opts.Default, &convo.Options{MaxSessions: l.opts.Online.MaxSessions})
	}
	return l, nil
}

// Hear keeps a message for mining the conversation model (bounded with
// the calls); the patterns predict nothing from it.
func (l *Learner) Hear(msg trace.Event) []predict.Prediction {
	l.mu.Lock()
	l.keep(msg)
	l.mu.Unlock()
	return nil
}

// Observe keeps ev for mining and returns the predictions of the current
// pool.
func (l *Learner) Observe(ev trace.Event) []predict.Prediction {
	l.mu.Lock()
	l.countRepeatLocked(ev)
	l.keep(ev)
	o := l.cur.Load()
	l.mu.Unlock()
	return l.fillRepeats(ev.Session, o.Observe(ev))
}

// keptOverhead approximates what a kept call costs beside its payloads
// (the event struct and its slot in the session's log).
const keptOverhead = 256

// keptSize is what keeping ev costs, as MaxBytes counts it.
func keptSize(ev *trace.Event) int64 {
	return int64(len(ev.Args)+len(ev.Output)+len(ev.Content)+len(ev.Tool)+len(ev.Session)) + keptOverhead
}

// keep adds ev to its session's log, then drops calls until the bounds
// hold: the session's own oldest first while it is over MaxSessionBytes,
// then the oldest sessions' (the one in progress too: issue 23, a single
// session of large outputs grew without bound).
func (l *Learner) keep(ev trace.Event) {
	if _, ok := l.log[ev.Session]; !ok {
		l.order = append(l.order, ev.Session)
		// A session dropped from the log (MaxCalls) that calls again
		// counts twice: the log's bound keeps such sessions rare.
		l.seen.Sessions++
	}
	l.seen.Calls++
	l.log[ev.Session] = append(l.log[ev.Session], ev)
	n := keptSize(&ev)
	l.kept[ev.Session] += n
	l.live[ev.Session] = true
	l.calls++
	l.bytes += n
	l.dirty = true
	for l.kept[ev.Session] > l.opts.MaxSessionBytes {
		l.dropOldest(ev.Session)
	}
	for len(l.order) > 0 && (l.calls > l.opts.MaxCalls || l.bytes > l.opts.MaxBytes) {
		l.dropOldest(l.order[0])
	}
}

// dropOldest drops the oldest kept call of session, and the session from
// the log when it has none left.
func (l *Learner) dropOldest(session string) {
	evs := l.log[session]
	n := keptSize(&evs[0])
	evs[0] = trace.Event{} // release its payloads: the array outlives the slice
	l.calls--
	l.bytes -= n
	l.kept[session] -= n
	if len(evs) > 1 {
		l.log[session] = evs[1:]
		return
	}
	delete(l.log, session)
	delete(l.kept, session)
	delete(l.live, session)
	if i := slices.Index(l.order, session); i >= 0 {
		l.order = slices.Delete(l.order, i, i+1)
	}
}

// EndedBytes returns what the calls kept of the sessions forgotten hold
// (those of live sessions are in their SessionBytes). It takes time in
// the number of sessions kept: for stats, not for every call.
func (l *Learner) EndedBytes() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var n int64
	for s, b := range l.kept {
		if !l.live[s] {
			n += b
		}
	}
	return n
}

// KeptBytes returns what the calls kept for mining hold, as MaxBytes
// counts it.
func (l *Learner) KeptBytes() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.bytes
}

// Start returns the current pool's predictions of a session's first call.
func (l *Learner) Start(session string) []predict.Prediction { return l.cur.Load().Start(session) }

// Forget drops a session's prediction state; its calls stay for mining.
func (l *Learner) Forget(session string) {
	l.mu.Lock()
	delete(l.live, session)
	o := l.cur.Load()
	l.mu.Unlock()
	o.Forget(session)
}

// Patterns returns the number of patterns served.
func (l *Learner) Patterns() int { return l.cur.Load().Len() }

// Snapshot returns the pool served, with the counts learnt so far and a
// header that says what they were learnt from (see header).
func (l *Learner) Snapshot() *pattern.Pool {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := l.cur.Load().Snapshot()
	p.Mined.Sessions, p.Mined.Calls = l.headerLocked()
	return p
}

// headerLocked returns the sessions and calls the pool was learnt from,
// for its header (issue 27: merging kept the first mining's, so after ten
// learning sessions the pool still said "mined from 1 sessions"): those
// of the pool it started from plus those observed since, or the input of
// the latest mining if larger (recordings of runs that did not learn into
// this pool).
func (l *Learner) headerLocked() (sessions, calls int) {
	return max(l.base.Sessions+l.seen.Sessions, l.lastMined.Sessions), max(l.base.Calls+l.seen.Calls, l.lastMined.Calls)
}

// Relearn mines the calls observed (if any arrived since the last time),
// adds the patterns the pool lacks, and serves the result. It returns how
// many patterns were added.
func (l *Learner) Relearn() (int, error) {
	if l.opts.Fleet != nil {
		return l.relearnFleet()
	}
	l.mu.Lock()
	if !l.dirty {
		l.mu.Unlock()
		return 0, nil
	}
	l.dirty = false
	var sessions []trace.Session
	for _, id := range l.order {
		// A copy: keep drops calls in place while this one is mined.
		s := trace.Session{ID: id}
		for _, ev := range l.log[id] {
			if ev.Kind == trace.KindMessage {
				s.Messages = append(s.Messages, ev)
			} else {
				s.Events = append(s.Events, ev)
			}
		}
		sessions = append(sessions, s)
	}
	base := l.cur.Load().Snapshot()
	l.mu.Unlock()
	if l.opts.Recorded != nil {
		rec, err := l.opts.Recorded()
		if err != nil {
			return 0, fmt.Errorf("learn: reading recorded sessions: %w", err)
		}
		seen := make(map[string]bool, len(sessions))
		for _, s := range sessions {
			seen[s.ID] = true
		}
		rec = slices.DeleteFunc(rec, func(s trace.Session) bool { return seen[s.ID] })
		sessions = append(rec, sessions...)
	}

	// Mining takes a while: calls go on meanwhile, on the current pool.
	opts := l.mineOpts
	if len(base.Patterns) > 0 {
		opts.Discriminators = base.Discriminators
		if opts.Discriminators == nil {
			opts.Discriminators = []pattern.Discriminator{}
		}
	}
	// The messages heard are mined with the calls, under convo's privacy
	// rules, as ahead mine does.
	mined, heard, err := Mine(sessions, &opts)
	if err != nil {
		return 0, fmt.Errorf("learn: mining observed calls: %w", err)
	}
	var conv *convo.Predictor
	if heard {
		if conv, err = conversation(mined); err != nil {
			return 0, err
		}
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	l.lastMined.Sessions, l.lastMined.Calls = mined.Mined.Sessions, mined.Mined.Calls
	old := l.cur.Load()
	// Counts learnt while mining are in this snapshot, not in base.
	merged, err := pattern.Merge(old.Snapshot(), mined)
	if err != nil {
		return 0, err
	}
	if conv != nil {
		// Swapped in beside the patterns; the live sessions are heard
		// again so that they keep their state.
		for id := range l.live {
			replay(conv, l.log[id])
		}
		raw := mined.Conversation
		l.conv.cur.Store(conv)
		merged.Conversation = raw
	}
	added := len(merged.Patterns) - old.Len()
	if added == 0 && conv == nil {
		return 0, nil
	}
	o, err := pattern.NewOnline(merged, &l.opts.Online)
	if err != nil {
		return 0, err
	}
	for id := range l.live {
		for _, ev := range l.log[id] {
			if ev.Kind != trace.KindMessage {
				o.Warm(ev)
			}
		}
	}
	l.cur.Store(o)
	return added, nil
}

// Checkpoint relearns, then saves the pool with the counts learnt so far
// to path, atomically. A failed relearn (an unreadable recording) is
// logged and does not stop the save: what was learnt online is kept.
func (l *Learner) Checkpoint(path string) error {
	l.saveMu.Lock()
	defer l.saveMu.Unlock()
	if added, err := l.Relearn(); err != nil {
		l.opts.Logger.Warn("patterns: mining the recorded calls", "err", err)
	} else if added > 0 {
		l.opts.Logger.Info("patterns: learnt new patterns", "added", added, "patterns", l.Patterns())
	}
	return l.Snapshot().Save(path)
}

// SessionBytes is what the Learner keeps for the session: the served
// patterns' state (Online.SessionBytes) and the session's calls kept for
// mining, so that the engine counts both in its memory budget while the
// session lives. (A session's kept calls outlive it, for mining, within
// MaxBytes.)
func (l *Learner) SessionBytes(session string) int64 {
	l.mu.Lock()
	kept := l.kept[session]
	l.mu.Unlock()
	return l.cur.Load().SessionBytes(session) + kept
}
