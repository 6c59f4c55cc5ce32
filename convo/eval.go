package convo

import (
	"errors"
	"fmt"
	"io"
	"iter"
	"slices"
	"time"

	"github.com/ahead-dev/ahead/callkey"
	"github.com/ahead-dev/ahead/mine"
	"github.com/ahead-dev/ahead/predict"
	"github.com/ahead-dev/ahead/trace"
)

// EvalOptions configure Evaluate; nil fields mean defaults.
type EvalOptions struct {
	Pattern *mine.Options
	Mine    *MineOptions
	Predict *Options
}

// Metrics are the prediction metrics of DESIGN.md.
type Metrics struct {
	Calls    int     `json:"calls"`
	ToolAt1  float64 `json:"tool_at_1"`
	ToolAt3  float64 `json:"tool_at_3"`
	ExactAt1 float64 `json:"exact_at_1"`
	ExactAt3 float64 `json:"exact_at_3"`
	ExactAt5 float64 `json:"exact_at_5"`
}

// Scores are one predictor's metrics over all calls and over the first
// calls of sessions.
type Scores struct {
	All   Metrics `json:"all"`
	First Metrics `json:"first_calls"`
	all   counts
	first counts
}

// CalBin is one decile of predicted P with the hit rate observed.
type CalBin struct {
	Lo, Hi    float64
	N         int
	MeanP     float64 `json:"mean_p"`
	HitRate   float64 `json:"hit_rate"`
	sumP, hit float64
}

// Report is what Evaluate measured.
type Report struct {
	TrainSessions int     `json:"train_sessions"`
	TestSessions  int     `json:"test_sessions"`
	MineSeconds   float64 `json:"mine_seconds"`
	Patterns      Scores  `json:"patterns"`
	Convo         Scores  `json:"convo"`
	Merged        Scores  `json:"merged"`
	// Calibration bins the convo predictor's predictions by P; a hit is a
	// prediction that was the next call.
	Calibration []CalBin `json:"calibration"`
}

// Evaluate mines patterns (mine.Mine) and a convo model on train,
// replays test through trace.Known, and scores, before each call, the
// predictions made since the previous call: the pattern predictor's (its
// Observe of the previous call, or Start), the convo predictor's (Observe
// and each Hear since), and both merged (predict.Merge).
func Evaluate(train, test []trace.Session, opts *EvalOptions) (*Report, error) {
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
	mineTime := time.Since(t0)
	online, err := predict.NewOnline(pool, &predict.OnlineOptions{Frozen: true})
	if err != nil {
		return nil, err
	}
	r, err := replay(test, trace.Known, online, New(m, opts.Predict))
	if err != nil {
		return nil, err
	}
	r.TrainSessions, r.MineSeconds = len(train), mineTime.Seconds()
	return r, nil
}

// ErrKnownOrder is returned by the harness when a call is predicted after
// the assistant text of its own step was heard: the predictor could have
// read the call in it (traces/README.md, what is known when).
var ErrKnownOrder = errors.New("convo: assistant text of a step was heard before the step's calls were predicted")

type part interface {
	Observe(trace.Event) []predict.Prediction
	Start(string) []predict.Prediction
	Forget(string)
}

type hearPart interface {
	part
	predict.Hearer
}

// replay scores pat (which does not hear) and conv over sessions read in
// the given order.
func replay(sessions []trace.Session, order func(trace.Session) iter.Seq[trace.Event], pat part, conv hearPart) (*Report, error) {
	r := &Report{TestSessions: len(sessions)}
	r.Calibration = make([]CalBin, 10)
	for i := range r.Calibration {
		r.Calibration[i].Lo, r.Calibration[i].Hi = float64(i)/10, float64(i+1)/10
	}
	var patL []predict.Prediction
	var convL [][]predict.Prediction
	for _, s := range sessions {
		patL = pat.Start(s.ID)
		convL = append(convL[:0], conv.Start(s.ID))
		heardStep := 0 // the largest step of an assistant message heard
		first := true
		for ev := range order(s) {
			if ev.IsMessage() {
				if ev.Role == trace.RoleAssistant {
					heardStep = max(heardStep, ev.Step)
				}
				convL = append(convL, conv.Hear(ev))
				continue
			}
			if !ev.IsCall() {
				continue
			}
			if ev.Step > 0 && heardStep >= ev.Step {
				return nil, fmt.Errorf("%w: session %s, call %d (step %d)", ErrKnownOrder, s.ID, ev.Seq, ev.Step)
			}
			key, kerr := callkey.Make(ev.Tool, ev.Args)
			ok := kerr == nil
			cm := predict.Merge(convL...)
			mm := predict.Merge(append([][]predict.Prediction{patL}, convL...)...)
			pm := patL
			r.Patterns.add(first, ev.Tool, key, ok, pm)
			r.Convo.add(first, ev.Tool, key, ok, cm)
			r.Merged.add(first, ev.Tool, key, ok, mm)
			for _, l := range convL {
				for _, p := range l {
					pk, err := callkey.Make(p.Tool, p.Args)
					hit := err == nil && ok && p.Args != nil && pk == key
					b := &r.Calibration[min(9, int(p.P*10))]
					b.N++
					b.sumP += p.P
					if hit {
						b.hit++
					}
				}
			}
			first = false
			patL = pat.Observe(ev)
			convL = append(convL[:0], conv.Observe(ev))
		}
		pat.Forget(s.ID)
		conv.Forget(s.ID)
	}
	for _, s := range []*Scores{&r.Patterns, &r.Convo, &r.Merged} {
		s.All, s.First = s.all.metrics(), s.first.metrics()
	}
	for i := range r.Calibration {
		b := &r.Calibration[i]
		if b.N > 0 {
			b.MeanP, b.HitRate = b.sumP/float64(b.N), b.hit/float64(b.N)
		}
	}
	return r, nil
}

// counts are one predictor's hits, as cmd/ahead's eval counts them.
type counts struct {
	calls, t1, t3, e1, e3, e5 int
}

func (s *Scores) add(first bool, tool string, key callkey.Key, keyOK bool, preds []predict.Prediction) {
	s.all.add(tool, key, keyOK, preds)
	if first {
		s.first.add(tool, key, keyOK, preds)
	}
}

func (s *counts) add(tool string, key callkey.Key, keyOK bool, preds []predict.Prediction) {
	s.calls++
	if len(preds) > 10 {
		preds = preds[:10]
	}
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

func (s *counts) metrics() Metrics {
	r := func(n int) float64 {
		if s.calls == 0 {
			return 0
		}
		return float64(n) / float64(s.calls)
	}
	return Metrics{s.calls, r(s.t1), r(s.t3), r(s.e1), r(s.e3), r(s.e5)}
}

// Print writes the report as a table.
func (r *Report) Print(w io.Writer) {
	fmt.Fprintf(w, "mined %d sessions in %.1fs; replayed %d sessions, %d calls (%d first calls)\n\n",
		r.TrainSessions, r.MineSeconds, r.TestSessions, r.Merged.All.Calls, r.Merged.First.Calls)
	fmt.Fprintf(w, "%-10s %-11s %9s %9s %10s %10s %10s\n", "", "", "tool_at_1", "tool_at_3", "exact_at_1", "exact_at_3", "exact_at_5")
	for _, row := range []struct {
		name string
		s    *Scores
	}{{"patterns", &r.Patterns}, {"convo", &r.Convo}, {"merged", &r.Merged}} {
		for _, m := range []struct {
			what string
			m    Metrics
		}{{"all", row.s.All}, {"first calls", row.s.First}} {
			fmt.Fprintf(w, "%-10s %-11s %9.3f %9.3f %10.3f %10.3f %10.3f\n", row.name, m.what, m.m.ToolAt1, m.m.ToolAt3, m.m.ExactAt1, m.m.ExactAt3, m.m.ExactAt5)
		}
	}
	fmt.Fprintf(w, "\ncalibration of the convo predictions (hit: the next call):\n%-11s %7s %7s %8s\n", "P", "n", "mean P", "hit rate")
	for _, b := range r.Calibration {
		if b.N == 0 {
			continue
		}
		fmt.Fprintf(w, "[%.1f, %.1f) %7d %7.3f %8.3f\n", b.Lo, b.Hi, b.N, b.MeanP, b.HitRate)
	}
}
