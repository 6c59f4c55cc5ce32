package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"sync"
	"time"

	"github.com/ahead-dev/ahead/config"
	"github.com/ahead-dev/ahead/engine"
	"github.com/ahead-dev/ahead/pattern"
	"github.com/ahead-dev/ahead/predict"
	"github.com/ahead-dev/ahead/trace"
)

// none, given for a file (--patterns none, --policy none), turns what
// the file would give off.
const none = "none"

// onlinePredictor is what serves a pool: predict.Online (frozen) or
// predict.Learner (learning).
type onlinePredictor interface {
	engine.Predictor
	engine.Starter
	CheckpointEvery(ctx context.Context, path string, interval time.Duration) error
}

// patternPredictor is the online predictor serving a pattern pool, with
// the goroutine that checkpoints what it learns.
type patternPredictor struct {
	onlinePredictor
	patterns func() int
	stop     context.CancelFunc
	wg       sync.WaitGroup
	err      error // of the final checkpoint, set before wg is done
}

var _ engine.Predictor = (*patternPredictor)(nil)

// loadPredictor loads the pool named by pc (a file written by ahead mine)
// and starts the predictor. With learning on, the pool learns counts and
// new patterns from live traffic (predict.Learner), checkpointed
// atomically every pc.CheckpointEvery and once more by close; a pool file
// that does not exist yet is the normal first state (issue 14): it starts
// empty, with one warning, and is written at the first checkpoint.
//
// New patterns are mined from the calls of this run and, when tracesDir is
// set, from the most recent recordings there: ahead mcp serves one
// session per process, so only the recordings show a pattern recur.
func loadPredictor(pc *config.Patterns, tracesDir string, logger *slog.Logger) (*patternPredictor, error) {
	pool, err := pattern.Load(pc.Pool)
	if errors.Is(err, fs.ErrNotExist) && pc.Learn {
		logger.Warn("patterns: the pool file does not exist yet: starting with no patterns; what is learnt is written to it",
			"file", pc.Checkpoint, "every", pc.CheckpointEvery)
		pool, err = predict.EmptyPool(), nil
	}
	if err != nil {
		return nil, fmt.Errorf("patterns: %w", err)
	}
	p := &patternPredictor{stop: func() {}}
	if !pc.Learn {
		o, err := predict.NewOnline(pool, &predict.OnlineOptions{Frozen: true, MaxPredictions: pc.MaxPredictions})
		if err != nil {
			return nil, fmt.Errorf("patterns: %s: %w", pc.Pool, err)
		}
		p.onlinePredictor, p.patterns = o, o.Index().Len
		return p, nil
	}
	lo := &predict.LearnerOptions{Online: predict.OnlineOptions{MaxPredictions: pc.MaxPredictions}, MaxCalls: learnCalls}
	if tracesDir != "" {
		lo.Recorded = func() ([]trace.Session, error) { return trace.Recent(learnCalls, tracesDir) }
	}
	l, err := predict.NewLearner(pool, lo)
	if err != nil {
		return nil, fmt.Errorf("patterns: %s: %w", pc.Pool, err)
	}
	p.onlinePredictor, p.patterns = l, l.Patterns
	ctx, cancel := context.WithCancel(context.Background())
	p.stop = cancel
	p.wg.Go(func() {
		p.err = l.CheckpointEvery(ctx, pc.Checkpoint, pc.CheckpointEvery)
		if p.err != nil {
			logger.Error("checkpointing patterns", "file", pc.Checkpoint, "err", p.err)
		}
	})
	return p, nil
}

// learnCalls bounds the calls mined at each checkpoint: the most recent.
const learnCalls = 20000

// close stops checkpointing after a final checkpoint, and returns its
// error. Call it after the engine is closed, so nothing is learnt later.
func (p *patternPredictor) close() error {
	p.stop()
	p.wg.Wait()
	if p.err != nil {
		return fmt.Errorf("patterns: final checkpoint: %w", p.err)
	}
	return nil
}

// newLogger returns the stderr logger at the level of --log-level, or of
// AHEAD_LOG when the flag is not given (issue 14).
func newLogger(e *env, flagLevel, def string) (*slog.Logger, error) {
	name := cmp.Or(flagLevel, e.env("AHEAD_LOG"), def)
	var level slog.Level
	if err := level.UnmarshalText([]byte(name)); err != nil {
		return nil, usageErr("--log-level (or AHEAD_LOG): want debug, info, warn or error, got %q", name)
	}
	return slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: level})), nil
}

const logLevelUsage = "stderr log `level`: debug (one line per speculative execution), info, warn or error (default $AHEAD_LOG, else %s)"
