package learn

import (
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"

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
	// MaxCalls bounds the calls kept for mining; the oldest sessions are
	// dropped first. 0 means 20000.
	MaxCalls int
	// MaxBytes bounds the arguments and outputs kept for mining. 0 means
	// 64 MiB.
	MaxBytes int64
	// Recorded, if set, returns recorded sessions (the trace store) to
	// mine with those observed: ahead mcp serves one session per process,
	// so only its recordings show a pattern recur. A session observed
	// replaces a recorded one of the same id (it may be recorded in
	// part).
	Recorded func() ([]trace.Session, error)
	// Logger receives the failures of relearning at checkpoints, which do
	// not stop the save; nil discards them.
	Logger *slog.Logger
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

	cur atomic.Pointer[pattern.Online]

	mu     sync.Mutex // protects the fields below, and the swap of cur
	log    map[string][]trace.Event
	order  []string // sessions in log, oldest first
	live   map[string]bool
	calls  int
	bytes  int64
	dirty  bool // calls observed since the last Relearn
	saveMu sync.Mutex
}

var _ interface {
	Observe(trace.Event) []predict.Prediction
	Start(string) []predict.Prediction
	Forget(string)
} = (*Learner)(nil)

// NewLearner returns a Learner starting from pool (which may have no
// patterns). opts may be nil.
func NewLearner(pool *pattern.Pool, opts *LearnerOptions) (*Learner, error) {
	l := &Learner{log: make(map[string][]trace.Event), live: make(map[string]bool)}
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
	return l, nil
}

// Observe keeps ev for mining and returns the predictions of the current
// pool.
func (l *Learner) Observe(ev trace.Event) []predict.Prediction {
	l.mu.Lock()
	l.keep(ev)
	o := l.cur.Load()
	l.mu.Unlock()
	return o.Observe(ev)
}

func (l *Learner) keep(ev trace.Event) {
	if _, ok := l.log[ev.Session]; !ok {
		l.order = append(l.order, ev.Session)
	}
	l.log[ev.Session] = append(l.log[ev.Session], ev)
	l.live[ev.Session] = true
	l.calls++
	l.bytes += int64(len(ev.Args) + len(ev.Output))
	l.dirty = true
	for len(l.order) > 1 && (l.calls > l.opts.MaxCalls || l.bytes > l.opts.MaxBytes) {
		old := l.order[0]
		l.order = l.order[1:]
		for _, e := range l.log[old] {
			l.calls--
			l.bytes -= int64(len(e.Args) + len(e.Output))
		}
		delete(l.log, old)
		delete(l.live, old)
	}
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

// Snapshot returns the pool served, with the counts learnt so far.
func (l *Learner) Snapshot() *pattern.Pool { return l.cur.Load().Snapshot() }

// Relearn mines the calls observed (if any arrived since the last time),
// adds the patterns the pool lacks, and serves the result. It returns how
// many patterns were added.
func (l *Learner) Relearn() (int, error) {
	l.mu.Lock()
	if !l.dirty {
		l.mu.Unlock()
		return 0, nil
	}
	l.dirty = false
	var sessions []trace.Session
	for _, id := range l.order {
		sessions = append(sessions, trace.Session{ID: id, Events: slices.Clip(l.log[id])})
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
	mined, err := mine.Mine(sessions, &opts)
	if err != nil {
		return 0, fmt.Errorf("learn: mining observed calls: %w", err)
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	old := l.cur.Load()
	// Counts learnt while mining are in this snapshot, not in base.
	merged, err := pattern.Merge(old.Snapshot(), mined)
	if err != nil {
		return 0, err
	}
	added := len(merged.Patterns) - old.Len()
	if added == 0 {
		return 0, nil
	}
	o, err := pattern.NewOnline(merged, &l.opts.Online)
	if err != nil {
		return 0, err
	}
	for id := range l.live {
		for _, ev := range l.log[id] {
			o.Warm(ev)
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
	return l.cur.Load().Snapshot().Save(path)
}

// SessionBytes is what the served patterns keep for the session
// (Online.SessionBytes).
func (l *Learner) SessionBytes(session string) int64 { return l.cur.Load().SessionBytes(session) }
