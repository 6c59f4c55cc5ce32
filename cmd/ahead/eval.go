package main

import (
	"context"
	"errors"
	"os"

	"github.com/ahead-dev/ahead/convo"
	"github.com/ahead-dev/ahead/evaluate"
	"github.com/ahead-dev/ahead/learn"
	"github.com/ahead-dev/ahead/pattern"
	"github.com/ahead-dev/ahead/policy"
	"github.com/ahead-dev/ahead/predict"
)

const evalHelp = `Measure prediction quality on traces: replay each session in order, ask the
predictor before each call (with what happened before it in its session),
and score the ranked predictions ahead would speculate from (at most 10):

  tool_at_k   the call's tool is among the first k distinct predicted tools
  exact_at_k  one of the first k predictions is the call itself (same call key)

Traces with a conversation (-conv files, or recordings that heard messages)
are replayed in the order things became known: each message reaches the
predictor when it was said, never the model's text of the turn whose calls
are scored. A session's first call is predicted from the session start and
what was said before it; first calls are also scored apart, and a
calibration table compares predicted P with how often the call was made in
that step. The same metrics are computed for the reference n-gram predictor
(tool trigram + repeat-last-arguments), trained on --train traces, or with a
split on the other part of the same traces, or else on the evaluated traces
themselves (in-sample, reported as such).

Without --patterns, what a fresh install predicts is measured: no pool, the
built-in default (domain-free weights that read the values of the tools it
has seen called from the conversation), learning as it goes. This is how
another domain measures its first days:

  ahead eval --relearn-every 5 --predictions P.jsonl TRACE-conv.jsonl.gz

--default FILE replaces the built-in default with one fitted by ahead mine
--default (a default fitted without the evaluated domain: the cross-domain
figure); --no-default leaves it out.

With --relearn-every N, the predictor also mines the calls it has seen every
N sessions and adds the patterns the pool lacks, as a running ahead does at
its checkpoints: the figure for a domain the pool was not mined on.

With --policy, the calls the policy lets ahead run and hand over (tools at
the full level) are also scored apart, ranked among the predictions of such
tools alone: the guesses that can save time, as the engine would run them.`

func runEval(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "eval", "eval [--patterns pool.json] [flags] TRACE...", evalHelp)
	var tf traceFlags
	tf.register(fs)
	poolPath := fs.String("patterns", "", "pool file from ahead mine (none: a fresh install, the built-in default)")
	defPath := fs.String("default", "", "built-in default `file` from ahead mine --default, in place of the one in the binary")
	noDefault := fs.Bool("no-default", false, "leave the built-in default out")
	predOut := fs.String("predictions", "", "write each call's ranked predictions to this JSONL file")
	asJSON := fs.Bool("json", false, "print the metrics as JSON")
	learnOnline := fs.Bool("learn", false, "let the predictor learn online from the evaluated traces as it goes (as a running ahead does)")
	relearnEvery := fs.Int("relearn-every", 0, "mine the calls seen so far every `N` sessions, adding the patterns the pool lacks (implies --learn; 0: never)")
	var train stringList
	fs.Var(&train, "train", "traces to train the n-gram baseline on; repeatable")
	ngramN := fs.Int("ngram", 3, "n of the baseline's tool n-gram")
	policyPath := fs.String("policy", "", "speculation policy YAML `file`: also score the calls it lets ahead run")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return usageErr("no trace files given")
	}
	if *relearnEvery < 0 {
		return usageErr("--relearn-every must be 0 or more sessions, got %d", *relearnEvery)
	}
	var pol *policy.Policy
	if *policyPath != "" {
		var err error
		if pol, err = policy.Load(*policyPath); err != nil {
			return err
		}
	}
	pool := learn.EmptyPool()
	if *poolPath != "" {
		var err error
		if pool, err = pattern.Load(*poolPath); err != nil {
			return err
		}
	}
	var def *convo.Default
	if *defPath != "" {
		var err error
		if def, err = convo.LoadDefault(*defPath); err != nil {
			return err
		}
	}
	sessions, _, err := tf.load(e, fs.Args())
	if err != nil {
		return err
	}
	if len(sessions) == 0 {
		return errors.New("no sessions to evaluate (check the trace files and --part)")
	}
	// The baseline's training sessions.
	baseTrain, inSample := sessions, true
	if len(train) > 0 || tf.part != "all" {
		tt, paths := tf.other(), fs.Args()
		if len(train) > 0 {
			tt.part, paths = "all", train
		}
		if baseTrain, _, err = tt.load(e, paths); err != nil {
			return err
		}
		inSample = false
	}
	ngram := predict.NewNGram(*ngramN)
	ngram.Train(baseTrain)
	online, err := learn.New(pool, &learn.Options{Online: pattern.OnlineOptions{Frozen: !*learnOnline},
		Learn: *relearnEvery > 0, RelearnEvery: *relearnEvery, Default: def, NoDefault: *noDefault})
	if err != nil {
		return err
	}
	opts := &evaluate.Options{BaselineInSample: inSample}
	if pol != nil {
		opts.Speculable = func(tool string) bool { return pol.Lookup(tool).Level() == policy.LevelFull }
	}
	if *predOut != "" {
		f, err := os.Create(*predOut)
		if err != nil {
			return err
		}
		defer f.Close()
		opts.Predictions = f
	}
	res, err := evaluate.Run(ctx, sessions, online, ngram, opts)
	if err != nil {
		return err
	}
	if err := online.Close(); err != nil {
		return err
	}
	if *asJSON {
		return res.WriteJSON(e.stdout)
	}
	return res.WriteTable(e.stdout)
}
