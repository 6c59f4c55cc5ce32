package predict

import (
	"cmp"
	"slices"

	"github.com/ahead-dev/ahead/callkey"
	"github.com/ahead-dev/ahead/trace"
)

// Merge joins lists of predictions from several origins into one ranked
// list: predictions of the same call (equal call keys; tool-only ones by
// tool) become one, with the larger P and that one's origin; the result is
// best first, ties in input order. Predictions whose arguments are not a
// canonicalisable JSON object are dropped. A tool-only prediction is
// dropped when some origin predicts a concrete call of its tool: only a
// concrete call can be run ahead, a warm-up adds nothing to running it,
// and the tool-only guess would hold a rank a concrete call could use (the
// rule the online predictor applies to its own list, across origins: on
// the held-out tau2 split it raised first calls' exact_at_3 from 0.77 to
// 0.83, the session start's pattern guesses being tool-only while the
// conversation's name the values). This is how ahead eval ranks
// what several origins said; the engine merges the same way when it
// speculates.
func Merge(lists ...[]Prediction) []Prediction {
	n := 0
	for _, l := range lists {
		n += len(l)
	}
	out := make([]Prediction, 0, n)
	at := make(map[callkey.Key]int, n)
	for _, l := range lists {
		for _, p := range l {
			k := callkey.Key{Tool: p.Tool}
			if p.Args != nil {
				var err error
				if k, err = callkey.Make(p.Tool, p.Args); err != nil {
					continue
				}
			}
			if i, ok := at[k]; ok {
				if p.P > out[i].P {
					out[i].P, out[i].Origin = p.P, p.Origin
				}
				continue
			}
			at[k] = len(out)
			out = append(out, p)
		}
	}
	var concrete []string // tools with concrete calls (few: a slice beats a map)
	for _, p := range out {
		if p.Args != nil && !slices.Contains(concrete, p.Tool) {
			concrete = append(concrete, p.Tool)
		}
	}
	if len(concrete) > 0 {
		out = slices.DeleteFunc(out, func(p Prediction) bool { return p.Args == nil && slices.Contains(concrete, p.Tool) })
	}
	slices.SortStableFunc(out, func(a, b Prediction) int { return cmp.Compare(b.P, a.P) })
	return out
}

// Joined asks several predictors (its parts) and merges their answers
// (Merge). It forwards Hear, Declare and Start to the parts that implement them. It is safe for
// concurrent use if its parts are.
type Joined struct {
	parts []Predictor
}

// Join returns a predictor that asks every non-nil part.
func Join(parts ...Predictor) *Joined {
	j := &Joined{}
	for _, p := range parts {
		if p != nil {
			j.parts = append(j.parts, p)
		}
	}
	return j
}

// Observe asks every part.
func (j *Joined) Observe(ev trace.Event) []Prediction {
	return j.ask(func(p Predictor) []Prediction { return p.Observe(ev) })
}

// Hear asks the parts that listen to the conversation.
func (j *Joined) Hear(msg trace.Event) []Prediction {
	return j.ask(func(p Predictor) []Prediction {
		if h, ok := p.(Hearer); ok {
			return h.Hear(msg)
		}
		return nil
	})
}

// Declare asks the parts that read tool definitions.
func (j *Joined) Declare(tools trace.Event) []Prediction {
	return j.ask(func(p Predictor) []Prediction {
		if d, ok := p.(Declarer); ok {
			return d.Declare(tools)
		}
		return nil
	})
}

// Start asks the parts that predict a session's first call.
func (j *Joined) Start(session string) []Prediction {
	return j.ask(func(p Predictor) []Prediction {
		if s, ok := p.(Starter); ok {
			return s.Start(session)
		}
		return nil
	})
}

// Forget tells every part.
func (j *Joined) Forget(session string) {
	for _, p := range j.parts {
		p.Forget(session)
	}
}

// SessionBytes adds up what the parts that measure their per-session state
// (SessionBytes(session) int64) hold for a session.
func (j *Joined) SessionBytes(session string) int64 {
	var n int64
	for _, p := range j.parts {
		if m, ok := p.(interface{ SessionBytes(string) int64 }); ok {
			n += m.SessionBytes(session)
		}
	}
	return n
}

func (j *Joined) ask(f func(Predictor) []Prediction) []Prediction {
	if len(j.parts) == 1 {
		return f(j.parts[0])
	}
	lists := make([][]Prediction, 0, len(j.parts))
	for _, p := range j.parts {
		if l := f(p); len(l) > 0 {
			lists = append(lists, l)
		}
	}
	switch len(lists) {
	case 0:
		return nil
	case 1:
		return lists[0]
	}
	return Merge(lists...)
}
