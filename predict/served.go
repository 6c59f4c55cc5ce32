package predict

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ahead-dev/ahead/pattern"
	"github.com/ahead-dev/ahead/trace"
)

// PoolOptions say which pool a Served predictor serves and how it learns.
type PoolOptions struct {
	// Path is the pool file (from ahead mine).
	Path string
	// Learn learns counts and new patterns from live traffic (a Learner)
	// and saves them to Checkpoint every CheckpointEvery and at Close;
	// then a Path that does not exist yet is an empty pool. Otherwise the
	// pool is served frozen and must exist.
	Learn           bool
	Checkpoint      string
	CheckpointEvery time.Duration
	// MaxPredictions caps the predictions per event (0: the default).
	MaxPredictions int
	// MaxSessions bounds the sessions tracked (0: the default); give the
	// engine's, which drops sessions and makes the predictor forget them.
	MaxSessions int
	// Recorded, with Learn, returns the recorded sessions new patterns
	// are mined from besides those observed (LearnerOptions.Recorded).
	Recorded func() ([]trace.Session, error)
	// Logger receives the missing-pool warning and checkpoint failures;
	// nil discards them.
	Logger *slog.Logger
	// Parts, if set, builds more predictors from the same pool file (the
	// conversation model it may carry, package convo), joined with the
	// patterns' (Join).
	Parts func(pool *pattern.Pool) ([]Part, error)
}

// Served is a pool served to the engine: a frozen Online predictor, or a
// Learner with the goroutine that checkpoints it, which Close stops after
// a final checkpoint.
type Served struct {
	predictor
	patterns func() int
	stop     context.CancelFunc
	wg       sync.WaitGroup
	err      error // of the final checkpoint, set before wg is done
	failures atomic.Int64
}

// CheckpointFailures counts the periodic checkpoints that failed (each is
// logged; the final one's error is Close's).
func (s *Served) CheckpointFailures() int64 { return s.failures.Load() }

type predictor interface {
	Observe(trace.Event) []Prediction
	Start(string) []Prediction
	Forget(string)
}

// Serve loads the pool of opts and starts serving it. A pool file that
// does not exist yet is the normal first state of a pool that learns
// (issue 14): it starts empty, with one warning, and is written at the
// first checkpoint.
func Serve(opts PoolOptions) (*Served, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	pool, err := pattern.Load(opts.Path)
	if errors.Is(err, fs.ErrNotExist) && opts.Learn {
		log.Warn("patterns: the pool file does not exist yet: starting with no patterns; what is learnt is written to it",
			"file", opts.Checkpoint, "every", opts.CheckpointEvery)
		pool, err = EmptyPool(), nil
	}
	if err != nil {
		return nil, fmt.Errorf("patterns: %w", err)
	}
	s := &Served{stop: func() {}}
	if !opts.Learn {
		o, err := NewOnline(pool, &OnlineOptions{Frozen: true, MaxPredictions: opts.MaxPredictions, MaxSessions: opts.MaxSessions})
		if err != nil {
			return nil, fmt.Errorf("patterns: %s: %w", opts.Path, err)
		}
		s.predictor, s.patterns = o, o.Index().Len
		return s, s.join(pool, opts)
	}
	l, err := NewLearner(pool, &LearnerOptions{Online: OnlineOptions{MaxPredictions: opts.MaxPredictions, MaxSessions: opts.MaxSessions}, Recorded: opts.Recorded, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("patterns: %s: %w", opts.Path, err)
	}
	s.predictor, s.patterns = l, l.Patterns
	if err := s.join(pool, opts); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.stop = cancel
	s.wg.Go(func() {
		s.err = l.CheckpointEvery(ctx, opts.Checkpoint, opts.CheckpointEvery, func(err error) {
			s.failures.Add(1)
			log.Error("checkpointing patterns", "file", opts.Checkpoint, "err", err)
		})
		if s.err != nil {
			log.Error("checkpointing patterns", "file", opts.Checkpoint, "err", s.err)
		}
	})
	return s, nil
}

// join adds the predictors opts.Parts builds from pool.
func (s *Served) join(pool *pattern.Pool, opts PoolOptions) error {
	if opts.Parts == nil {
		return nil
	}
	parts, err := opts.Parts(pool)
	if err != nil {
		return fmt.Errorf("patterns: %s: %w", opts.Path, err)
	}
	if len(parts) > 0 {
		s.predictor = Join(append([]Part{s.predictor}, parts...)...)
	}
	return nil
}

// Hear passes a message to the parts that listen to the conversation.
func (s *Served) Hear(msg trace.Event) []Prediction {
	if h, ok := s.predictor.(Hearer); ok {
		return h.Hear(msg)
	}
	return nil
}

// Patterns returns the number of patterns served.
func (s *Served) Patterns() int { return s.patterns() }

// Close stops checkpointing after a final checkpoint, and returns its
// error. Call it after the engine is closed, so nothing is learnt later.
func (s *Served) Close() error {
	s.stop()
	s.wg.Wait()
	if s.err != nil {
		return fmt.Errorf("patterns: final checkpoint: %w", s.err)
	}
	return nil
}

// sessionSizer is a predictor that can say what it keeps for a session.
type sessionSizer interface {
	SessionBytes(session string) int64
}

// SessionBytes is what the served predictors keep for the session, as far
// as they can say (the engine counts it in its memory budget).
func (s *Served) SessionBytes(session string) int64 {
	if z, ok := s.predictor.(sessionSizer); ok {
		return z.SessionBytes(session)
	}
	return 0
}
