package main

import (
	"cmp"
	"github.com/ahead-dev/ahead/convo"
	"log/slog"

	"github.com/ahead-dev/ahead/config"
	"github.com/ahead-dev/ahead/predict"
	"github.com/ahead-dev/ahead/trace"
)

// none, given for a file (--patterns none, --policy none), turns what
// the file would give off.
const none = "none"

// learnCalls bounds the recorded calls mined at each checkpoint: the most
// recent.
const learnCalls = 20000

// loadPredictor serves the pool pc names. New patterns are mined from the
// calls of this run and, when tracesDir is set, from the most recent
// recordings there: ahead mcp serves one session per process, so only the
// recordings show a pattern recur.
func loadPredictor(pc *config.Patterns, tracesDir string, maxSessions int, logger *slog.Logger) (*predict.Served, error) {
	opts := predict.PoolOptions{Path: pc.Pool, Learn: pc.Learn, Checkpoint: pc.Checkpoint, CheckpointEvery: pc.CheckpointEvery,
		MaxPredictions: pc.MaxPredictions, MaxSessions: maxSessions, Logger: logger, Parts: convo.Parts}
	if tracesDir != "" {
		opts.Recorded = func() ([]trace.Session, error) { return trace.Recent(learnCalls, tracesDir) }
	}
	return predict.Serve(opts)
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
