package server

import (
	"log/slog"

	"github.com/ahead-dev/ahead/config"
	"github.com/ahead-dev/ahead/engine"
	"github.com/ahead-dev/ahead/fleet"
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
// keepBytes (0: the Learner's default) bounds the calls kept for mining.
// With a fleet's learning (lrn, or nil) the pool learns with the fleet.
// Without a pool file (config.InMemory) it starts from the built-in
// default and learns in memory, relearning every CheckpointEvery.
func loadPredictor(pc *config.Patterns, tracesDir string, maxSessions int, keepBytes int64, lrn *fleet.Learning, logger *slog.Logger) (*learn.Predictor, error) {
	opts := &learn.Options{
		Online:     pattern.OnlineOptions{Frozen: !pc.Learn, MaxPredictions: pc.MaxPredictions, MaxSessions: maxSessions},
		Learn:      pc.Learn,
		MaxBytes:   keepBytes,
		Checkpoint: pc.Checkpoint, CheckpointEvery: pc.CheckpointEvery,
		Logger: logger,
	}
	if lrn != nil {
		opts.Fleet = lrn
	}
	if tracesDir != "" {
		opts.Recorded = func() ([]trace.Session, error) { return trace.Recent(learnCalls, tracesDir) }
	}
	if pc.Pool == "" {
		opts.Checkpoint = ""
		if pc.Learn {
			logger.Info("patterns: no pool file: predicting from the built-in default, learning in memory (nothing is written)", "relearn_every", pc.CheckpointEvery)
		}
		return learn.New(learn.EmptyPool(), opts)
	}
	return learn.Open(pc.Pool, opts)
}

// defaultMaxBytes is engine.Options.MaxBytes's default.
const defaultMaxBytes = 256 << 20

// learnShare splits max_bytes (0: the engine's default) between the
// engine and the calls a Learner keeps for mining (issue 23): the Learner
// keeps at most a quarter, the engine's budget is the rest, so that both
// together stay within max_bytes. Without learning the engine has it all.
func learnShare(pc *config.Patterns, maxBytes int64) (engineBytes, keepBytes int64) {
	if pc == nil || !pc.Learn {
		return maxBytes, 0
	}
	if maxBytes <= 0 {
		maxBytes = defaultMaxBytes
	}
	return maxBytes - maxBytes/4, maxBytes / 4
}

// counted is the engine as /v1/stats shows it: with the calls the Learner
// keeps of ended sessions in SessionBytes (those of live sessions the
// engine counts already, through SessionBytes of its predictor).
type counted struct {
	*engine.Engine
	pred *learn.Predictor
}

func (c counted) Stats() engine.Stats {
	st := c.Engine.Stats()
	st.SessionBytes += c.pred.EndedBytes()
	return st
}
