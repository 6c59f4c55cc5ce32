package main

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/ahead-dev/ahead/config"
	"github.com/ahead-dev/ahead/engine"
	"github.com/ahead-dev/ahead/pattern"
	"github.com/ahead-dev/ahead/predict"
)

// patternPredictor is the online predictor serving a pattern pool, with
// the goroutine that checkpoints what it learns.
type patternPredictor struct {
	*predict.Joined
	online   *predict.Online // the patterns' part, checkpointed
	patterns int
	stop     context.CancelFunc
	wg       sync.WaitGroup
	err      error // of the final checkpoint, set before wg is done
}

var _ engine.Predictor = (*patternPredictor)(nil)

// loadPredictor loads the pool named by the configuration's patterns
// field (a file written by ahead mine) and starts the online predictor.
// With learning on, the counts learnt from live traffic are checkpointed
// atomically every pc.CheckpointEvery and once more by close. It keeps as
// many sessions as the engine (maxSessions, 0 for the default): the engine
// drops sessions and makes it forget them.
func loadPredictor(pc *config.Patterns, maxSessions int, logger *slog.Logger) (*patternPredictor, error) {
	pool, err := pattern.Load(pc.Pool)
	if err != nil {
		return nil, fmt.Errorf("patterns: %w", err)
	}
	o, joined, err := newPredictor(pool, &predict.OnlineOptions{Frozen: !pc.Learn, MaxPredictions: pc.MaxPredictions, MaxSessions: maxSessions})
	if err != nil {
		return nil, fmt.Errorf("patterns: %s: %w", pc.Pool, err)
	}
	p := &patternPredictor{Joined: joined, online: o, patterns: len(pool.Patterns), stop: func() {}}
	if pc.Learn {
		ctx, cancel := context.WithCancel(context.Background())
		p.stop = cancel
		p.wg.Go(func() {
			p.err = o.CheckpointEvery(ctx, pc.Checkpoint, pc.CheckpointEvery)
			if p.err != nil {
				logger.Error("checkpointing patterns", "file", pc.Checkpoint, "err", p.err)
			}
		})
	}
	return p, nil
}

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
