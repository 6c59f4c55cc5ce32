package main

import (
	"flag"
	"log/slog"
	"regexp"
	"strings"

	"github.com/ahead-dev/ahead/trace"
)

// traceFlags are the input flags mine, eval and bench share: reading traces and
// selecting sessions by a reproducible split.
type traceFlags struct {
	skipBad    bool
	sessions   stringList
	splitBy    string
	splitMatch string
	holdout    float64
	part       string
}

type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

func (f *traceFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&f.skipBad, "skip-bad", false, "skip malformed trace lines (counted) instead of failing")
	fs.Var(&f.sessions, "sessions", "session metadata file (*.sessions.jsonl) for --split-by; repeatable")
	fs.StringVar(&f.splitBy, "split-by", "session", "metadata field whose value decides a session's part (all sessions with one value fall on one side)")
	fs.StringVar(&f.splitMatch, "split-match", "", "regexp narrowing the split value to its first group, e.g. '^(.*)-[0-9]+$' for a repository from a task id")
	fs.Float64Var(&f.holdout, "holdout", 0.3, "share of split values in the test part")
	fs.StringVar(&f.part, "part", "all", "sessions to use: all, train or test")
}

// split returns the configured split, or nil for --part all.
func (f *traceFlags) split() (*trace.Split, error) {
	switch f.part {
	case "all":
		return nil, nil
	case "train", "test":
	default:
		return nil, usageErr("--part must be all, train or test, not %q", f.part)
	}
	if f.holdout < 0 || f.holdout > 1 {
		return nil, usageErr("--holdout must be in [0, 1]")
	}
	s := &trace.Split{Field: f.splitBy, Holdout: f.holdout}
	if f.splitMatch != "" {
		re, err := regexp.Compile(f.splitMatch)
		if err != nil {
			return nil, usageErr("--split-match: %v", err)
		}
		s.Match = re
	}
	if s.Field != "" && s.Field != "session" {
		if len(f.sessions) == 0 {
			return nil, usageErr("--split-by %s needs --sessions FILE", s.Field)
		}
		meta, err := trace.ReadMeta(f.sessions...)
		if err != nil {
			return nil, err
		}
		s.Meta = meta
	}
	return s, nil
}

// other is the same selection of the other part (train for test, test
// for train): what to mine or train a baseline on with a split.
func (f traceFlags) other() *traceFlags {
	f.part = map[string]string{"all": "all", "train": "test", "test": "train"}[f.part]
	return &f
}

// load reads the traces and keeps the sessions of the selected part.
func (f *traceFlags) load(e *env, paths []string) ([]trace.Session, trace.Stats, error) {
	split, err := f.split()
	if err != nil {
		return nil, trace.Stats{}, err
	}
	r := trace.NewReader(&trace.ReadOptions{SkipBad: f.skipBad, Logger: slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	sessions, err := trace.Collect(r.Events(paths...))
	if err != nil {
		return nil, r.Stats(), err
	}
	if split == nil {
		return sessions, r.Stats(), nil
	}
	kept, err := split.Part(sessions, f.part == "test")
	return kept, r.Stats(), err
}

func countCalls(sessions []trace.Session) int {
	n := 0
	for _, s := range sessions {
		n += len(s.Events)
	}
	return n
}
