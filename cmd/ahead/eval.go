package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/ahead-dev/ahead/callkey"
	"github.com/ahead-dev/ahead/pattern"
	"github.com/ahead-dev/ahead/predict"
	"github.com/ahead-dev/ahead/trace"
)

const evalHelp = `Measure prediction quality on traces: replay each session in order, ask the
predictor before each call (with what happened before it in its session),
and score the ranked predictions ahead would speculate from (at most 10):

  tool_at_k   the call's tool is among the first k distinct predicted tools
  exact_at_k  one of the first k predictions is the call itself (same call key)

A session's first call is predicted from the session start alone (what ahead
speculates on when a session begins): the tools sessions begin with, and
their constant arguments. The same metrics are computed for the reference n-gram predictor
(tool trigram + repeat-last-arguments), trained on --train traces, or with a
split on the other part of the same traces, or else on the evaluated traces
themselves (in-sample, reported as such).`

func runEval(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "eval", "eval --patterns pool.json [flags] TRACE...", evalHelp)
	var tf traceFlags
	tf.register(fs)
	poolPath := fs.String("patterns", "", "pool file from ahead mine (required)")
	predOut := fs.String("predictions", "", "write each call's ranked predictions to this JSONL file")
	asJSON := fs.Bool("json", false, "print the metrics as JSON")
	learn := fs.Bool("learn", false, "let the predictor learn online from the evaluated traces as it goes (as a running ahead does)")
	var train stringList
	fs.Var(&train, "train", "traces to train the n-gram baseline on; repeatable")
	ngramN := fs.Int("ngram", 3, "n of the baseline's tool n-gram")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *poolPath == "" {
		return usageErr("--patterns pool.json is required")
	}
	if fs.NArg() == 0 {
		return usageErr("no trace files given")
	}
	pool, err := pattern.Load(*poolPath)
	if err != nil {
		return err
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
	switch {
	case len(train) > 0:
		tt := tf
		tt.part = "all"
		if baseTrain, _, err = tt.load(e, train); err != nil {
			return err
		}
		inSample = false
	case tf.part != "all":
		tt := tf
		tt.part = map[string]string{"train": "test", "test": "train"}[tf.part]
		if baseTrain, _, err = tt.load(e, fs.Args()); err != nil {
			return err
		}
		inSample = false
	}
	ngram := predict.NewNGram(*ngramN)
	ngram.Train(baseTrain)
	online, err := predict.NewOnline(pool, &predict.OnlineOptions{Frozen: !*learn})
	if err != nil {
		return err
	}
	var pw *bufio.Writer
	if *predOut != "" {
		f, err := os.Create(*predOut)
		if err != nil {
			return err
		}
		defer f.Close()
		pw = bufio.NewWriter(f)
	}
	res := evalResult{Sessions: len(sessions), BaselineInSample: inSample, tools: make(map[string]*toolResult)}
	for _, s := range sessions {
		if err := ctx.Err(); err != nil {
			return err
		}
		// Before the first call: the session start's predictions.
		preds, base := online.Start(s.ID), ngram.Start(s.ID)
		for _, ev := range s.Events {
			key, kerr := callkey.Make(ev.Tool, ev.Args)
			tr := res.tools[ev.Tool]
			if tr == nil {
				tr = &toolResult{Tool: ev.Tool}
				res.tools[ev.Tool] = tr
			}
			if ev.Seq == s.Events[0].Seq {
				res.First++
			} else {
				res.later.add(ev.Tool, key, kerr == nil, preds)
			}
			res.ahead.add(ev.Tool, key, kerr == nil, preds)
			res.ngram.add(ev.Tool, key, kerr == nil, base)
			tr.ahead.add(ev.Tool, key, kerr == nil, preds)
			tr.ngram.add(ev.Tool, key, kerr == nil, base)
			if pw != nil {
				if err := writePredictions(pw, ev, preds); err != nil {
					return err
				}
			}
			preds = online.Observe(ev)
			base = ngram.Observe(ev)
		}
		online.Forget(s.ID)
		ngram.Forget(s.ID)
	}
	if pw != nil {
		if err := pw.Flush(); err != nil {
			return err
		}
	}
	res.finish()
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	res.print(e.stdout)
	return nil
}

func writePredictions(w io.Writer, ev trace.Event, preds []predict.Prediction) error {
	if preds == nil {
		preds = []predict.Prediction{}
	}
	line := struct {
		Session     string               `json:"session"`
		Seq         int                  `json:"seq"`
		Predictions []predict.Prediction `json:"predictions"`
	}{ev.Session, ev.Seq, preds}
	b, err := json.Marshal(line)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	_, err = w.Write(b)
	return err
}

// scores counts hits of one predictor.
type scores struct {
	calls, t1, t3, e1, e3, e5 int
}

func (s *scores) add(tool string, key callkey.Key, keyOK bool, preds []predict.Prediction) {
	s.calls++
	var tools []string
	for _, p := range preds {
		if !slices.Contains(tools, p.Tool) {
			tools = append(tools, p.Tool)
		}
	}
	if i := slices.Index(tools, tool); i >= 0 {
		if i < 1 {
			s.t1++
		}
		if i < 3 {
			s.t3++
		}
	}
	if !keyOK {
		return
	}
	for i, p := range preds {
		if i >= 5 {
			break
		}
		if p.Args == nil || p.Tool != tool {
			continue
		}
		pk, err := callkey.Make(p.Tool, p.Args)
		if err != nil || pk != key {
			continue
		}
		if i < 1 {
			s.e1++
		}
		if i < 3 {
			s.e3++
		}
		s.e5++
		break
	}
}

// Metrics are the prediction metrics of DESIGN.md.
type Metrics struct {
	ToolAt1  float64 `json:"tool_at_1"`
	ToolAt3  float64 `json:"tool_at_3"`
	ExactAt1 float64 `json:"exact_at_1"`
	ExactAt3 float64 `json:"exact_at_3"`
	ExactAt5 float64 `json:"exact_at_5"`
}

func (s *scores) metrics() Metrics {
	r := func(n int) float64 {
		if s.calls == 0 {
			return 0
		}
		return float64(n) / float64(s.calls)
	}
	return Metrics{r(s.t1), r(s.t3), r(s.e1), r(s.e3), r(s.e5)}
}

type toolResult struct {
	Tool  string  `json:"tool"`
	Calls int     `json:"calls"`
	Ahead Metrics `json:"ahead"`
	NGram Metrics `json:"ngram"`
	ahead scores
	ngram scores
}

type evalResult struct {
	Sessions         int     `json:"sessions"`
	Calls            int     `json:"calls"`
	First            int     `json:"first_calls"`
	BaselineInSample bool    `json:"baseline_in_sample"`
	Ahead            Metrics `json:"ahead"`
	NGram            Metrics `json:"ngram"`
	// AheadLater leaves out the sessions' first calls.
	AheadLater   Metrics       `json:"ahead_after_first_calls"`
	Tools        []*toolResult `json:"tools"`
	ahead, ngram scores
	later        scores
	tools        map[string]*toolResult
}

func (r *evalResult) finish() {
	r.Calls = r.ahead.calls
	r.Ahead, r.NGram = r.ahead.metrics(), r.ngram.metrics()
	r.AheadLater = r.later.metrics()
	for _, t := range r.tools {
		t.Calls = t.ahead.calls
		t.Ahead, t.NGram = t.ahead.metrics(), t.ngram.metrics()
		r.Tools = append(r.Tools, t)
	}
	slices.SortFunc(r.Tools, func(a, b *toolResult) int {
		if a.Calls != b.Calls {
			return b.Calls - a.Calls
		}
		return strings.Compare(a.Tool, b.Tool)
	})
}

func (r *evalResult) print(w io.Writer) {
	fmt.Fprintf(w, "%d calls in %d sessions (%d first calls, predicted from the session start alone)\n\n", r.Calls, r.Sessions, r.First)
	base := "n-gram"
	if r.BaselineInSample {
		base = "n-gram*"
	}
	fmt.Fprintf(w, "%-12s %7s %8s\n", "", "ahead", base)
	rows := []struct {
		name string
		a, b float64
	}{
		{"tool_at_1", r.Ahead.ToolAt1, r.NGram.ToolAt1},
		{"tool_at_3", r.Ahead.ToolAt3, r.NGram.ToolAt3},
		{"exact_at_1", r.Ahead.ExactAt1, r.NGram.ExactAt1},
		{"exact_at_3", r.Ahead.ExactAt3, r.NGram.ExactAt3},
		{"exact_at_5", r.Ahead.ExactAt5, r.NGram.ExactAt5},
	}
	for _, row := range rows {
		fmt.Fprintf(w, "%-12s %7.3f %8.3f\n", row.name, row.a, row.b)
	}
	if r.BaselineInSample {
		fmt.Fprintf(w, "(* trained on the evaluated traces themselves: give --train or a split)\n")
	}
	l := r.AheadLater
	fmt.Fprintf(w, "ahead without the first calls: tool_at_1 %.3f, tool_at_3 %.3f, exact_at_1 %.3f, exact_at_3 %.3f, exact_at_5 %.3f\n",
		l.ToolAt1, l.ToolAt3, l.ExactAt1, l.ExactAt3, l.ExactAt5)
	fmt.Fprintf(w, "\nper tool (ahead / %s):\n%-32s %6s  %-13s %-13s\n", base, "tool", "calls", "tool_at_1", "exact_at_3")
	for _, t := range r.Tools {
		fmt.Fprintf(w, "%-32s %6d  %.3f / %.3f  %.3f / %.3f\n", t.Tool, t.Calls, t.Ahead.ToolAt1, t.NGram.ToolAt1, t.Ahead.ExactAt3, t.NGram.ExactAt3)
	}
}
