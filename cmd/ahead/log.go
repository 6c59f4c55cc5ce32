package main

import (
	"cmp"
	"log/slog"

	"github.com/ahead-dev/ahead/config"
)

// none, given for a file (--patterns none, --policy none), turns what
// the file would give off.
const none = config.Off

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
