package convo

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/ahead-dev/ahead/evaluate"
	"github.com/ahead-dev/ahead/mine"
	"github.com/ahead-dev/ahead/pattern"
	"github.com/ahead-dev/ahead/predict"
	"github.com/ahead-dev/ahead/trace"
)

// EvalOptions configure Evaluate; nil fields mean defaults.
type EvalOptions struct {
	Pattern *mine.Options
	Mine    *MineOptions
	Predict *Options
}

// Report is what Evaluate measured: package evaluate's figures of the
// patterns alone, the conversation model alone, and both joined as ahead
// serves them. Each Result's "ahead" figures are that predictor's.
type Report struct {
	TrainSessions int              `json:"train_sessions"`
	TestSessions  int              `json:"test_sessions"`
	MineSeconds   float64          `json:"mine_seconds"`
	Patterns      *evaluate.Result `json:"patterns"`
	Convo         *evaluate.Result `json:"convo"`
	Merged        *evaluate.Result `json:"merged"`
}

// Evaluate mines patterns (mine.Mine) and a convo model on train, and
// scores on test, with package evaluate (which replays through
// trace.Known and keeps the rule of what is known when), the pattern
// predictor alone, the convo predictor alone, and both joined
// (predict.Join, as learn.New joins them).
func Evaluate(ctx context.Context, train, test []trace.Session, opts *EvalOptions) (*Report, error) {
	if opts == nil {
		opts = &EvalOptions{}
	}
	t0 := time.Now()
	pool, err := mine.Mine(train, opts.Pattern)
	if err != nil {
		return nil, fmt.Errorf("mining patterns: %w", err)
	}
	m, err := Mine(train, opts.Mine)
	if err != nil {
		return nil, fmt.Errorf("mining the conversation: %w", err)
	}
	r := &Report{TrainSessions: len(train), TestSessions: len(test), MineSeconds: time.Since(t0).Seconds()}
	// Each replay gets predictors of its own: they keep session state.
	patterns := func() (*pattern.Online, error) {
		return pattern.NewOnline(pool, &pattern.OnlineOptions{Frozen: true})
	}
	for _, run := range []struct {
		dst  **evaluate.Result
		pred func() (predict.Predictor, error)
	}{
		{&r.Patterns, func() (predict.Predictor, error) { return patterns() }},
		{&r.Convo, func() (predict.Predictor, error) { return New(m, opts.Predict), nil }},
		{&r.Merged, func() (predict.Predictor, error) {
			online, err := patterns()
			if err != nil {
				return nil, err
			}
			return predict.Join(online, New(m, opts.Predict)), nil
		}},
	} {
		p, err := run.pred()
		if err != nil {
			return nil, err
		}
		if *run.dst, err = evaluate.Run(ctx, test, p, silent{}, nil); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// silent is a baseline that predicts nothing: Evaluate compares its
// three predictors with each other, not with a baseline.
type silent struct{}

func (silent) Start(string) []predict.Prediction        { return nil }
func (silent) Observe(trace.Event) []predict.Prediction { return nil }
func (silent) Forget(string)                            {}

// Print writes the report as a table, then the calibration of the
// conversation model's predictions.
func (r *Report) Print(w io.Writer) {
	fmt.Fprintf(w, "mined %d sessions in %.1fs; replayed %d sessions, %d calls (%d first calls)\n\n",
		r.TrainSessions, r.MineSeconds, r.TestSessions, r.Merged.Calls, r.Merged.First)
	fmt.Fprintf(w, "%-10s %-11s %9s %9s %10s %10s %10s\n", "", "", "tool_at_1", "tool_at_3", "exact_at_1", "exact_at_3", "exact_at_5")
	for _, row := range []struct {
		name string
		r    *evaluate.Result
	}{{"patterns", r.Patterns}, {"convo", r.Convo}, {"merged", r.Merged}} {
		for _, m := range []struct {
			what string
			m    evaluate.Metrics
		}{{"all", row.r.Ahead}, {"first calls", row.r.AheadFirst}} {
			fmt.Fprintf(w, "%-10s %-11s %9.3f %9.3f %10.3f %10.3f %10.3f\n", row.name, m.what, m.m.ToolAt1, m.m.ToolAt3, m.m.ExactAt1, m.m.ExactAt3, m.m.ExactAt5)
		}
	}
	fmt.Fprintf(w, "\ncalibration of the convo predictions (hit: the call was made in that step):\n%-11s %7s %7s %8s\n", "P", "n", "mean P", "hit rate")
	for _, b := range r.Convo.Calibration {
		if b.Count == 0 {
			continue
		}
		fmt.Fprintf(w, "[%.1f, %.1f) %7d %7.3f %8.3f\n", b.Lo, b.Hi, b.Count, b.MeanP, b.HitRate)
	}
}
