// Package evaluate measures prediction quality on recorded traces, for
// `ahead eval`: it replays each session in order, asks a predictor before
// each call (with what happened before it in its session), and scores the
// ranked predictions ahead would speculate from next to a baseline's:
//
//	tool_at_k   the call's tool is among the first k distinct predicted tools
//	exact_at_k  one of the first k predictions is the call itself (same call key)
//
// A session's first call is predicted from the session start (what ahead
// speculates on when a session begins) and what was said before it, and
// is also scored apart. Sessions with a conversation are replayed in the
// order things became known (trace.Known): a predictor that listens
// (predict.Hearer) hears each message then, never the text of the model
// turn whose calls it predicts; the ranked list for a call merges
// (predict.Merge) what was predicted since the call before it. A
// predictor that reads tool definitions (predict.Declarer) is given the
// session's declared tools (trace.KindTools lines) at their seq.
//
// Calibration checks that P means what it says: the predictions made when
// each step's think window opens are binned by P, and each bin's share of
// predictions whose call the agent made in that step is reported.
// Loading traces and pools, and training the baseline, are the caller's.
package evaluate

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"slices"
	"strings"

	"github.com/ahead-dev/ahead/callkey"
	"github.com/ahead-dev/ahead/predict"
	"github.com/ahead-dev/ahead/trace"
)

// Options are Run's optional settings; the zero value (or nil) is ready.
type Options struct {
	// Predictions, when not nil, receives each call's ranked predictions
	// (the predictor's, not the baseline's) as a JSON line:
	// {"session", "seq", "predictions"}.
	Predictions io.Writer
	// BaselineInSample says the baseline was trained on the evaluated
	// sessions themselves; the result reports it, and its table marks the
	// baseline's figures as flattering.
	BaselineInSample bool
	// Speculable, when not nil, names the tools whose calls ahead may run
	// ahead and hand over (a policy's full level). The calls of those
	// tools are then scored apart against the predictions of those tools
	// alone, as the engine would run them: what saves time.
	Speculable func(tool string) bool
}

// ErrKnownOrder is returned when a call would be predicted after the
// assistant text of its own step was heard: the predictor could have
// read the call in it (traces/README.md, what is known when).
var ErrKnownOrder = errors.New("evaluate: assistant text of a step was heard before the step's calls were predicted")

// Run replays sessions through p and baseline and scores them. It stops
// with ctx's error between sessions once ctx is done.
func Run(ctx context.Context, sessions []trace.Session, p, baseline predict.Predictor, opts *Options) (*Result, error) {
	return run(ctx, sessions, trace.Known, p, baseline, opts)
}

// run is Run with the order each session is replayed in; Run's is
// trace.Known, and run checks that the order keeps the rule of what is
// known when, so that a broken order fails rather than flatters.
func run(ctx context.Context, sessions []trace.Session, order func(trace.Session) iter.Seq[trace.Event], p, baseline predict.Predictor, opts *Options) (*Result, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	var pw *bufio.Writer
	if o.Predictions != nil {
		pw = bufio.NewWriter(o.Predictions)
	}
	res := &Result{Sessions: len(sessions), BaselineInSample: o.BaselineInSample, tools: make(map[string]*Tool), specOn: o.Speculable != nil}
	var spec []predict.Prediction // the predictions of speculable tools
	for si, s := range sessions {
		blk := res.block(si)
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		// Before the first call: the session start's predictions.
		preds, base := start(p, s.ID), start(baseline, s.ID)
		hearer, _ := p.(predict.Hearer)
		// The tools declared to the session (trace.KindTools lines), to a
		// predictor that reads them, when they were declared: before the
		// messages and the call of their seq.
		declarer, _ := p.(predict.Declarer)
		ti := 0
		declare := func(seq int) {
			for ; declarer != nil && ti < len(s.Tools) && s.Tools[ti].Seq <= seq; ti++ {
				if d := declarer.Declare(s.Tools[ti]); len(d) > 0 {
					preds = predict.Merge(preds, d)
				}
			}
		}
		steps := stepKeys(s)
		ci := 0
		heardStep := 0 // the largest step of an assistant message heard
		for ev := range order(s) {
			declare(ev.Seq)
			if ev.IsMessage() {
				if ev.Role == trace.RoleAssistant {
					heardStep = max(heardStep, ev.Step)
				}
				if hearer != nil {
					if h := hearer.Hear(ev); len(h) > 0 {
						preds = predict.Merge(preds, h)
					}
				}
				continue
			}
			if ev.Step > 0 && heardStep >= ev.Step {
				return nil, fmt.Errorf("%w: session %s, call %d (step %d)", ErrKnownOrder, s.ID, ev.Seq, ev.Step)
			}
			key, kerr := callkey.Make(ev.Tool, ev.Args)
			if ci == 0 || ev.Step != s.Events[ci-1].Step || ev.Step == 0 {
				res.calib.add(preds, steps[ci])
			}
			ci++
			tr := res.tools[ev.Tool]
			if tr == nil {
				tr = &Tool{Tool: ev.Tool}
				res.tools[ev.Tool] = tr
			}
			blk.all.add(ev.Tool, key, kerr == nil, preds)
			if ev.Seq == s.Events[0].Seq {
				res.First++
				res.first.add(ev.Tool, key, kerr == nil, preds)
				blk.first.add(ev.Tool, key, kerr == nil, preds)
			} else {
				res.later.add(ev.Tool, key, kerr == nil, preds)
			}
			res.ahead.add(ev.Tool, key, kerr == nil, preds)
			if o.Speculable != nil && o.Speculable(ev.Tool) {
				spec = spec[:0]
				for _, p := range preds {
					if o.Speculable(p.Tool) {
						spec = append(spec, p)
					}
				}
				res.spec.add(ev.Tool, key, kerr == nil, spec)
			}
			res.ngram.add(ev.Tool, key, kerr == nil, base)
			tr.ahead.add(ev.Tool, key, kerr == nil, preds)
			tr.ngram.add(ev.Tool, key, kerr == nil, base)
			if pw != nil {
				if err := writePredictions(pw, ev, preds); err != nil {
					return nil, err
				}
			}
			preds = p.Observe(ev)
			base = baseline.Observe(ev)
		}
		p.Forget(s.ID)
		baseline.Forget(s.ID)
	}
	if pw != nil {
		if err := pw.Flush(); err != nil {
			return nil, err
		}
	}
	res.finish()
	return res, nil
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

// Metrics are the prediction metrics of DESIGN.md: the share of calls
// each hit.
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

// Tool is the metrics of the calls of one tool.
type Tool struct {
	Tool  string  `json:"tool"`
	Calls int     `json:"calls"`
	Ahead Metrics `json:"ahead"`
	NGram Metrics `json:"ngram"`
	ahead scores
	ngram scores
}

// Result is an evaluation's figures; "ahead" is the predictor's, "ngram"
// the baseline's.
type Result struct {
	Sessions         int     `json:"sessions"`
	Calls            int     `json:"calls"`
	First            int     `json:"first_calls"`
	BaselineInSample bool    `json:"baseline_in_sample"`
	Ahead            Metrics `json:"ahead"`
	NGram            Metrics `json:"ngram"`
	// AheadLater leaves out the sessions' first calls; AheadFirst has
	// only them.
	AheadLater Metrics `json:"ahead_after_first_calls"`
	AheadFirst Metrics `json:"ahead_first_calls"`
	// With Options.Speculable: the calls ahead may run, scored against
	// the predictions of such tools alone.
	SpeculableCalls int      `json:"speculable_calls,omitempty"`
	AheadSpeculable *Metrics `json:"ahead_speculable_calls,omitempty"`
	// Calibration bins the predictions made as each step's think window
	// opened by P (tenths), with how often their call was made in that
	// step.
	Calibration []Bin `json:"calibration"`
	// Tools are the tools' metrics, by calls (most first), then name.
	Tools []*Tool `json:"tools"`
	// Curve is the learning curve: exact_at_3 of the calls and of the
	// first calls per block of sessions, in the order they were
	// evaluated (what a fresh install, learning as it goes, sees).
	Curve        []Block `json:"curve"`
	blocks       []*block
	ahead, ngram scores
	later, first scores
	spec         scores
	specOn       bool // Options.Speculable was set
	calib        calibration
	tools        map[string]*Tool
}

// Block is a block of the learning curve: sessions From to To (1-based,
// To 0 for the last, open block).
type Block struct {
	From          int     `json:"from"`
	To            int     `json:"to"`
	Calls         int     `json:"calls"`
	ExactAt3      float64 `json:"exact_at_3"`
	FirstCalls    int     `json:"first_calls"`
	FirstExactAt3 float64 `json:"first_exact_at_3"`
}

type block struct{ all, first scores }

// curveEnds are the last sessions of the learning curve's blocks (the
// last block is open): the first days of a fresh install in detail.
var curveEnds = []int{10, 25, 50}

// block returns the learning-curve block of the session at index si.
func (r *Result) block(si int) *block {
	b := len(curveEnds)
	for i, end := range curveEnds {
		if si < end {
			b = i
			break
		}
	}
	for len(r.blocks) <= b {
		r.blocks = append(r.blocks, &block{})
	}
	return r.blocks[b]
}

func (r *Result) finish() {
	for i, b := range r.blocks {
		from, to := 1, 0
		if i > 0 {
			from = curveEnds[i-1] + 1
		}
		if i < len(curveEnds) {
			to = curveEnds[i]
		}
		r.Curve = append(r.Curve, Block{From: from, To: to, Calls: b.all.calls, ExactAt3: b.all.metrics().ExactAt3,
			FirstCalls: b.first.calls, FirstExactAt3: b.first.metrics().ExactAt3})
	}
	r.Calls = r.ahead.calls
	r.Ahead, r.NGram = r.ahead.metrics(), r.ngram.metrics()
	r.AheadLater = r.later.metrics()
	r.AheadFirst = r.first.metrics()
	if r.specOn {
		m := r.spec.metrics()
		r.SpeculableCalls, r.AheadSpeculable = r.spec.calls, &m
	}
	r.Calibration = r.calib.bins()
	for _, t := range r.tools {
		t.Calls = t.ahead.calls
		t.Ahead, t.NGram = t.ahead.metrics(), t.ngram.metrics()
		r.Tools = append(r.Tools, t)
	}
	slices.SortFunc(r.Tools, func(a, b *Tool) int {
		if a.Calls != b.Calls {
			return b.Calls - a.Calls
		}
		return strings.Compare(a.Tool, b.Tool)
	})
}

// WriteJSON writes r as one indented JSON object.
func (r *Result) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteTable writes r as text tables: the metrics side by side, then per
// tool.
func (r *Result) WriteTable(w io.Writer) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "%d calls in %d sessions (%d first calls, predicted from the session start and what was said before them)\n\n", r.Calls, r.Sessions, r.First)
	base := "n-gram"
	if r.BaselineInSample {
		base = "n-gram*"
	}
	fmt.Fprintf(bw, "%-12s %7s %8s\n", "", "ahead", base)
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
		fmt.Fprintf(bw, "%-12s %7.3f %8.3f\n", row.name, row.a, row.b)
	}
	if r.BaselineInSample {
		fmt.Fprintf(bw, "(* trained on the evaluated traces themselves: give --train or a split)\n")
	}
	l := r.AheadLater
	fmt.Fprintf(bw, "ahead without the first calls: tool_at_1 %.3f, tool_at_3 %.3f, exact_at_1 %.3f, exact_at_3 %.3f, exact_at_5 %.3f\n",
		l.ToolAt1, l.ToolAt3, l.ExactAt1, l.ExactAt3, l.ExactAt5)
	f := r.AheadFirst
	fmt.Fprintf(bw, "ahead on the first calls:      tool_at_1 %.3f, tool_at_3 %.3f, exact_at_1 %.3f, exact_at_3 %.3f, exact_at_5 %.3f\n",
		f.ToolAt1, f.ToolAt3, f.ExactAt1, f.ExactAt3, f.ExactAt5)
	if len(r.Curve) > 1 {
		fmt.Fprintf(bw, "learning curve (sessions in the order evaluated): exact_at_3, first calls exact_at_3\n")
		for _, b := range r.Curve {
			span := fmt.Sprintf("%d–%d", b.From, b.To)
			if b.To == 0 {
				span = fmt.Sprintf("%d on", b.From)
			}
			fmt.Fprintf(bw, "  sessions %-7s %5d calls %.3f   %4d first calls %.3f\n", span, b.Calls, b.ExactAt3, b.FirstCalls, b.FirstExactAt3)
		}
	}
	if sp := r.AheadSpeculable; sp != nil {
		fmt.Fprintf(bw, "ahead on the %d calls the policy may run, ranked among the predictions it may run:\n"+
			"                               tool_at_1 %.3f, tool_at_3 %.3f, exact_at_1 %.3f, exact_at_3 %.3f, exact_at_5 %.3f\n",
			r.SpeculableCalls, sp.ToolAt1, sp.ToolAt3, sp.ExactAt1, sp.ExactAt3, sp.ExactAt5)
	}
	if len(r.Calibration) > 0 {
		fmt.Fprintf(bw, "\ncalibration (predictions as each step's think window opens; hit: the call was made in that step):\n%-9s %8s %8s %8s\n", "p", "count", "mean p", "hit rate")
		for _, b := range r.Calibration {
			fmt.Fprintf(bw, "%.1f–%.1f  %8d %8.3f %8.3f\n", b.Lo, b.Hi, b.Count, b.MeanP, b.HitRate)
		}
	}
	fmt.Fprintf(bw, "\nper tool (ahead / %s):\n%-32s %6s  %-13s %-13s\n", base, "tool", "calls", "tool_at_1", "exact_at_3")
	for _, t := range r.Tools {
		fmt.Fprintf(bw, "%-32s %6d  %.3f / %.3f  %.3f / %.3f\n", t.Tool, t.Calls, t.Ahead.ToolAt1, t.NGram.ToolAt1, t.Ahead.ExactAt3, t.NGram.ExactAt3)
	}
	return bw.Flush()
}

// stepKeys returns, for each call of s, the call keys (and, for tool-only
// predictions, the tools as keys without arguments) of the calls of its
// step.
func stepKeys(s trace.Session) []map[callkey.Key]bool {
	out := make([]map[callkey.Key]bool, len(s.Events))
	for i := 0; i < len(s.Events); {
		j := i + 1
		for j < len(s.Events) && s.Events[i].Step != 0 && s.Events[j].Step == s.Events[i].Step {
			j++
		}
		keys := make(map[callkey.Key]bool)
		for _, ev := range s.Events[i:j] {
			keys[callkey.Key{Tool: ev.Tool}] = true
			if k, err := callkey.Make(ev.Tool, ev.Args); err == nil {
				keys[k] = true
			}
		}
		for k := i; k < j; k++ {
			out[k] = keys
		}
		i = j
	}
	return out
}

// Bin is one calibration bin: predictions with P in [Lo, Hi).
type Bin struct {
	Lo      float64 `json:"lo"`
	Hi      float64 `json:"hi"`
	Count   int     `json:"count"`
	MeanP   float64 `json:"mean_p"`
	HitRate float64 `json:"hit_rate"`
}

// calibration counts predictions and hits in tenths of P.
type calibration struct {
	n, hits [10]int
	sumP    [10]float64
}

func (c *calibration) add(preds []predict.Prediction, step map[callkey.Key]bool) {
	for _, p := range preds {
		k := callkey.Key{Tool: p.Tool}
		if p.Args != nil {
			var err error
			if k, err = callkey.Make(p.Tool, p.Args); err != nil {
				continue
			}
		}
		b := min(int(p.P*10), 9)
		if b < 0 {
			continue
		}
		c.n[b]++
		c.sumP[b] += p.P
		if step[k] {
			c.hits[b]++
		}
	}
}

func (c *calibration) bins() []Bin {
	var out []Bin
	for b := range c.n {
		if c.n[b] == 0 {
			continue
		}
		out = append(out, Bin{
			Lo: float64(b) / 10, Hi: float64(b+1) / 10, Count: c.n[b],
			MeanP: c.sumP[b] / float64(c.n[b]), HitRate: float64(c.hits[b]) / float64(c.n[b]),
		})
	}
	return out
}

// start asks p for a session's first call, if p predicts first calls
// (predict.Starter).
func start(p predict.Predictor, session string) []predict.Prediction {
	if st, ok := p.(predict.Starter); ok {
		return st.Start(session)
	}
	return nil
}
