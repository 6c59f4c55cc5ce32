package server

import (
	"log/slog"

	"github.com/ahead-dev/ahead/config"
	"github.com/ahead-dev/ahead/learn"
	"github.com/ahead-dev/ahead/pattern"
	"github.com/ahead-dev/ahead/trace"
)

// learnCalls bounds the recorded calls mined at each checkpoint: the most
// recent.
const learnCalls = 20000

// loadPredictor serves the pool pc names, with its conversation model. New
// patterns are mined from the calls of this run and, when tracesDir is set,
// from the most recent recordings there: ahead mcp serves one session per
// process, so only the recordings show a pattern recur.
func loadPredictor(pc *config.Patterns, tracesDir string, maxSessions int, logger *slog.Logger) (*learn.Predictor, error) {
	opts := &learn.Options{
		Online:     pattern.OnlineOptions{Frozen: !pc.Learn, MaxPredictions: pc.MaxPredictions, MaxSessions: maxSessions},
		Learn:      pc.Learn,
		Checkpoint: pc.Checkpoint, CheckpointEvery: pc.CheckpointEvery,
		Logger: logger,
	}
	if tracesDir != "" {
		opts.Recorded = func() ([]trace.Session, error) { return trace.Recent(learnCalls, tracesDir) }
	}
	return learn.Open(pc.Pool, opts)
}
