package learn

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ahead-dev/ahead/convo"
	"github.com/ahead-dev/ahead/pattern"
	"github.com/ahead-dev/ahead/predict"
	"github.com/ahead-dev/ahead/tooldef"
	"github.com/ahead-dev/ahead/trace"
)

// Options say how a pool is served and how it learns. The zero value (or
// nil) serves the pool with online counts and learns no new patterns.
type Options struct {
	// Online configures the pattern predictor: Frozen keeps the counts
	// behind p those of the pool; MaxSessions should be the engine's,
	// which drops sessions and makes the predictor forget them.
	Online pattern.OnlineOptions
	// Learn keeps the calls observed (bounded: MaxCalls, MaxBytes) and
	// mines them for the patterns the pool lacks (a Learner), at every
	// checkpoint and every RelearnEvery ended sessions. It implies counts
	// learnt online (Online.Frozen is ignored). Open then takes a pool file
	// that does not exist yet as an empty pool.
	Learn bool
	// MaxCalls and MaxBytes bound the calls a Learner keeps
	// (LearnerOptions).
	MaxCalls int
	MaxBytes int64
	// Recorded, with Learn, returns the recorded sessions new patterns
	// are mined from besides those observed (LearnerOptions.Recorded).
	Recorded func() ([]trace.Session, error)
	// RelearnEvery, with Learn, relearns in Forget after every so many
	// ended sessions, synchronously: how ahead eval replays a running
	// ahead's checkpoints in file order. 0: only at checkpoints.
	RelearnEvery int
	// Checkpoint, with Learn, is the file the pool with what was learnt is
	// saved to every CheckpointEvery (which must then be positive) and at
	// Close; "" saves nothing: with a positive CheckpointEvery the
	// predictor then relearns in memory that often (a server without a
	// pool file, issue 24), else only as RelearnEvery says.
	Checkpoint      string
	CheckpointEvery time.Duration
	// Logger receives the missing-pool warning, what relearning found and
	// checkpoint failures; nil discards them.
	Logger *slog.Logger
	// Fleet, with Learn, learns with a fleet (LearnerOptions.Fleet).
	Fleet Fleet
	// Default is the built-in default that predicts from the conversation
	// where the pool's model has learnt nothing (no model, or a tool it
	// has not seen); nil means convo.Builtin(). NoDefault leaves it out.
	Default   *convo.Default
	NoDefault bool
}

// Predictor is a pool in use: its patterns (an online predictor, or a
// Learner that also finds new ones) joined with the conversation model
// the pool carries, if any (predict.Join), and the goroutine that
// checkpoints what it learns, which Close stops after a final checkpoint.
// It is safe for concurrent use.
type Predictor struct {
	joined   *predict.Joined
	patterns func() int
	learner  *Learner // nil unless Options.Learn
	every    int      // Options.RelearnEvery

	mu         sync.Mutex // protects ended and relearnErr
	ended      int
	relearnErr error // the first failed relearn in Forget

	stop     context.CancelFunc
	wg       sync.WaitGroup
	err      error // of the final checkpoint, set before wg is done
	failures atomic.Int64
}

var (
	_ predict.Predictor = (*Predictor)(nil)
	_ predict.Starter   = (*Predictor)(nil)
	_ predict.Hearer    = (*Predictor)(nil)
	_ predict.Declarer  = (*Predictor)(nil)
)

// Open loads the pool file at path and serves it (New). A pool file that
// does not exist yet is the normal first state of a pool that learns
// (issue 14): it starts empty, with one warning, and is written at the
// first checkpoint.
func Open(path string, opts *Options) (*Predictor, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	log := logger(o.Logger)
	pool, err := pattern.Load(path)
	if errors.Is(err, fs.ErrNotExist) && o.Learn {
		log.Warn("patterns: the pool file does not exist yet: starting with no patterns; what is learnt is written to it",
			"file", o.Checkpoint, "every", o.CheckpointEvery)
		pool, err = EmptyPool(), nil
	}
	if err != nil {
		return nil, fmt.Errorf("patterns: %w", err)
	}
	p, err := New(pool, &o)
	if err != nil {
		return nil, fmt.Errorf("patterns: %s: %w", path, err)
	}
	return p, nil
}

// New serves pool, and starts checkpointing it when opts say so. opts may
// be nil.
func New(pool *pattern.Pool, opts *Options) (*Predictor, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	log := logger(o.Logger)
	if o.Learn && o.Checkpoint != "" {
		// The checkpoint's folder is made now, as the traces' is (issue
		// 27: a pool in a folder that did not exist lost everything
		// learnt, at every checkpoint), and a folder that cannot be made
		// fails the start rather than every checkpoint.
		if err := os.MkdirAll(filepath.Dir(o.Checkpoint), 0o755); err != nil {
			return nil, fmt.Errorf("patterns: the checkpoint's folder: %w", err)
		}
	}
	p := &Predictor{stop: func() {}, every: o.RelearnEvery}
	var part predict.Predictor
	if o.Learn {
		l, err := NewLearner(pool, &LearnerOptions{Online: o.Online, MaxCalls: o.MaxCalls, MaxBytes: o.MaxBytes, Recorded: o.Recorded, Logger: log, Fleet: o.Fleet,
			Default: o.Default, NoDefault: o.NoDefault})
		if err != nil {
			return nil, err
		}
		part, p.patterns, p.learner = l, l.Patterns, l
	} else {
		on, err := pattern.NewOnline(pool, &o.Online)
		if err != nil {
			return nil, err
		}
		part, p.patterns = on, on.Len
	}
	// The tools declared to a session predict calls of tools neither
	// part has seen (issue 24); where none are declared it says nothing.
	defs := tooldef.New(nil)
	switch {
	case p.learner != nil:
		// The Learner relearns the conversation model beside the
		// patterns, and hears the messages to mine them.
		p.joined = predict.Join(part, &p.learner.conv, defs)
	default:
		conv, err := conversation(pool)
		if err != nil {
			return nil, err
		}
		r := &relearnt{}
		if !o.NoDefault {
			r.fresh = convo.NewFresh(o.Default, &convo.Options{MaxSessions: o.Online.MaxSessions})
		}
		switch {
		case conv == nil && r.fresh == nil:
			p.joined = predict.Join(part, defs)
		case r.fresh == nil:
			p.joined = predict.Join(part, conv, defs)
		default:
			r.cur.Store(conv)
			p.joined = predict.Join(part, r, defs)
		}
	}
	if o.Learn && o.Checkpoint == "" && o.CheckpointEvery > 0 {
		ctx, cancel := context.WithCancel(context.Background())
		p.stop = cancel
		p.wg.Go(func() { relearnEvery(ctx, p.learner, o.CheckpointEvery, log) })
	}
	if o.Learn && o.Checkpoint != "" {
		ctx, cancel := context.WithCancel(context.Background())
		p.stop = cancel
		p.wg.Go(func() {
			p.err = checkpointEvery(ctx, p.learner.Checkpoint, o.Checkpoint, o.CheckpointEvery, func(err error) {
				p.failures.Add(1)
				log.Error("checkpointing patterns", "file", o.Checkpoint, "err", err)
			})
			if p.err != nil {
				log.Error("checkpointing patterns", "file", o.Checkpoint, "err", p.err)
			}
		})
	}
	return p, nil
}

func logger(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}

// Observe asks every part.
func (p *Predictor) Observe(ev trace.Event) []predict.Prediction { return p.joined.Observe(ev) }

// Start predicts a session's first call.
func (p *Predictor) Start(session string) []predict.Prediction { return p.joined.Start(session) }

// Hear passes a message to the parts that listen to the conversation.
func (p *Predictor) Hear(msg trace.Event) []predict.Prediction { return p.joined.Hear(msg) }

// Declare passes the tools declared to a session to the parts that read
// tool definitions.
func (p *Predictor) Declare(tools trace.Event) []predict.Prediction { return p.joined.Declare(tools) }

// Forget ends a session; with Options.RelearnEvery, every so many ended
// sessions it relearns (the first failure is Close's error).
func (p *Predictor) Forget(session string) {
	p.joined.Forget(session)
	if p.learner == nil || p.every <= 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ended++; p.ended%p.every == 0 && p.relearnErr == nil {
		if _, err := p.learner.Relearn(); err != nil {
			p.relearnErr = fmt.Errorf("relearning after %d sessions: %w", p.ended, err)
		}
	}
}

// SessionBytes is what the parts keep for the session, as far as they can
// say (the engine counts it in its memory budget).
func (p *Predictor) SessionBytes(session string) int64 { return p.joined.SessionBytes(session) }

// EndedBytes is what the calls kept for mining of sessions already
// forgotten hold (Learner.EndedBytes; 0 without Learn): what no live
// session's SessionBytes counts.
func (p *Predictor) EndedBytes() int64 {
	if p.learner == nil {
		return 0
	}
	return p.learner.EndedBytes()
}

// KeptBytes is what the calls kept for mining hold (Learner.KeptBytes; 0
// without Learn).
func (p *Predictor) KeptBytes() int64 {
	if p.learner == nil {
		return 0
	}
	return p.learner.KeptBytes()
}

// Patterns returns the number of patterns served.
func (p *Predictor) Patterns() int { return p.patterns() }

// Relearn relearns now, as a checkpoint does (Learner.Relearn); without
// Learn it does nothing.
func (p *Predictor) Relearn() (int, error) {
	if p.learner == nil {
		return 0, nil
	}
	return p.learner.Relearn()
}

// Adopt serves a pool the fleet shared (Learner.Adopt); without Learn it
// fails.
func (p *Predictor) Adopt(pool *pattern.Pool, mark uint64) error {
	if p.learner == nil {
		return errors.New("learn: a pool that does not learn cannot adopt the fleet's")
	}
	return p.learner.Adopt(pool, mark)
}

// CheckpointFailures counts the periodic checkpoints that failed (each is
// logged; the final one's error is Close's).
func (p *Predictor) CheckpointFailures() int64 { return p.failures.Load() }

// Close stops checkpointing after a final checkpoint, and returns its
// error, or the first failed relearn of Forget. Call it after the engine
// is closed, so nothing is learnt later.
func (p *Predictor) Close() error {
	p.stop()
	p.wg.Wait()
	if p.err != nil {
		return fmt.Errorf("patterns: final checkpoint: %w", p.err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.relearnErr
}

// checkpointEvery calls checkpoint(path) every interval until ctx is done,
// then once more; it returns the final checkpoint's error. A failed
// periodic checkpoint is given to failed (nil: dropped) and retried at
// the next tick.
func checkpointEvery(ctx context.Context, checkpoint func(string) error, path string, interval time.Duration, failed func(error)) error {
	if interval <= 0 {
		return errors.New("learn: checkpoint interval must be positive")
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return checkpoint(path)
		case <-t.C:
			if err := checkpoint(path); err != nil && failed != nil {
				failed(err)
			}
		}
	}
}

// relearnEvery relearns l every interval until ctx is done: what a
// Learner without a pool file does in place of checkpoints (nothing is
// saved, so there is no final one). A failed relearn is logged and
// retried at the next tick.
func relearnEvery(ctx context.Context, l *Learner, interval time.Duration, log *slog.Logger) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if added, err := l.Relearn(); err != nil {
				log.Warn("patterns: relearning in memory", "err", err)
			} else if added > 0 {
				log.Info("patterns: learnt new patterns", "added", added, "patterns", l.Patterns())
			}
		}
	}
}
