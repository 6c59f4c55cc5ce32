package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/ahead-dev/ahead/convo"
	"github.com/ahead-dev/ahead/learn"
	"github.com/ahead-dev/ahead/mine"
	"github.com/ahead-dev/ahead/pattern"
	"github.com/ahead-dev/ahead/progress"
	"github.com/ahead-dev/ahead/trace"
)

const mineHelp = `Mine tool-call patterns (context → tool(arguments), p) from traces and
write them to a pool file. TRACE is a .jsonl or .jsonl.gz trace file or a
directory of them.

To hold out a test part disjoint by task, give the sessions file and the
field to split on; eval takes the same flags with --part test:

  ahead mine --sessions S.sessions.jsonl --split-by task_id --part train -o pool.json T.jsonl.gz
  ahead eval --sessions S.sessions.jsonl --split-by task_id --part test --patterns pool.json T.jsonl.gz

With --default, fit the built-in default instead (domain-free weights, no
tool name, no value; what ahead predicts the conversation with where it has
learnt nothing yet) from traces with a conversation, and write it to -o:
eval --default FILE measures it, go generate ./convo embeds it.`

func runMine(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "mine", "mine [flags] -o pool.json TRACE...", mineHelp)
	var tf traceFlags
	tf.register(fs)
	out := fs.String("o", "", "pool file to write (required)")
	maxCtx := fs.Int("max-context", mine.DefaultMaxContext, fmt.Sprintf("k: calls a context reaches back (1..%d)", pattern.MaxContextLimit))
	minSup := fs.Int("min-support", 3, "σ: least occurrences of a context, a tool after it, and a mapping")
	minConf := fs.Float64("min-confidence", 0.05, "τ: least p of a pattern kept")
	maxCands := fs.Int("max-candidates", 8, "list elements a list pattern predicts (1..64)")
	keepValues := fs.Bool("keep-values", false, "keep as constants strings with a digit, '@', '#' or a capital letter (ids, names, e-mail addresses the users said); recorded in the pool. Default: none are kept")
	horizon := fs.Int("horizon", 8, fmt.Sprintf("calls after a context within which a candidate counts as called soon (1..%d)", pattern.MaxHorizon))
	fitDefault := fs.Bool("default", false, "fit the built-in default (weights across tools, no names) from the traces' calls and messages and write it to -o instead of a pool")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *out == "" {
		return usageErr("-o pool.json is required")
	}
	if fs.NArg() == 0 {
		return usageErr("no trace files given")
	}
	if *maxCtx < 1 || *maxCtx > pattern.MaxContextLimit {
		return usageErr("--max-context must be in 1..%d", pattern.MaxContextLimit)
	}
	if *minSup < 1 {
		return usageErr("--min-support must be at least 1")
	}
	if *minConf <= 0 || *minConf > 1 {
		return usageErr("--min-confidence must be in (0, 1]")
	}
	if *maxCands < 1 || *maxCands > 64 {
		return usageErr("--max-candidates must be in 1..64")
	}
	if *horizon < 1 || *horizon > pattern.MaxHorizon {
		return usageErr("--horizon must be in 1..%d", pattern.MaxHorizon)
	}
	start := time.Now()
	sessions, stats, err := tf.load(e, fs.Args())
	if err != nil {
		return err
	}
	if len(sessions) == 0 {
		return errors.New("no sessions to mine (check the trace files and --part)")
	}
	if *fitDefault {
		return writeDefault(e, sessions, *out, start)
	}
	opts := &mine.Options{MaxContext: *maxCtx, MinSupport: *minSup, MinConfidence: *minConf, MaxCandidates: *maxCands, Horizon: *horizon, KeepValues: *keepValues}
	m := progress.New(e.stderr, "ahead mine", &progress.Options{Terminal: e.isTerminal})
	opts.Progress = func(done, total int) { m.Update("contexts", done, total) }
	pool, _, err := learn.Mine(sessions, opts)
	m.Done()
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := pool.Save(*out); err != nil {
		return err
	}
	writeMineSummary(e.stdout, pool, stats, len(sessions), countCalls(sessions), time.Since(start), *out)
	return nil
}

func writeMineSummary(w io.Writer, pool *pattern.Pool, stats trace.Stats, sessions, calls int, took time.Duration, out string) {
	exact := 0
	for _, p := range pool.Patterns {
		if p.Exact {
			exact++
		}
	}
	fmt.Fprintf(w, "mined %s, %s: %s kept (%d with arguments), %s, in %.1fs → %s\n",
		plural(sessions, "session"), plural(calls, "call"), plural(len(pool.Patterns), "pattern"), exact,
		plural(len(pool.Discriminators), "discriminator"), took.Seconds(), out)
	if stats.Bad > 0 || stats.Torn > 0 {
		fmt.Fprintf(w, "skipped %d malformed and %d torn lines\n", stats.Bad, stats.Torn)
	}
}

// writeDefault fits the built-in default on sessions and writes it to out.
func writeDefault(e *env, sessions []trace.Session, out string, start time.Time) error {
	d, err := convo.FitDefault(sessions, nil)
	if err != nil {
		return err
	}
	if err := d.Save(out); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "fitted the default on %s, %s of %s in %.1fs → %s\n",
		plural(d.Sessions, "session"), plural(d.Calls, "call"), plural(d.Tools, "tool"), time.Since(start).Seconds(), out)
	return nil
}
