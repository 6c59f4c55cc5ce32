package convo

import (
	"cmp"
	"encoding/json"
	"slices"

	"github.com/ahead-dev/ahead/trace"
)

// Calibration: a prediction's P is the hit rate its raw score had on
// sessions the model was not fitted on (cross-fit halves), mapped by an
// isotonic fit per stratum.

// calPair is a raw score and whether its prediction was the next call.
type calPair struct {
	raw float64
	hit bool
}

// appendPairs replays sessions as the predictor would see them and pairs
// each prediction's raw score with whether it was the next call.
// lex may be nil.
func appendPairs(pairs *[nStrata][]calPair, c *compiled, sessions []trace.Session, maxBytes int, lex *lexicon) {
	var sc scratch
	r := newReplay(lex, false)
	// A session's predictions repeat from message to message: each
	// distinct one's key is made once (bound: a session's distinct
	// predictions, the map cleared per session).
	keys := make(map[[2]string]string)
	key := func(tool, args string) string {
		k, ok := keys[[2]string{tool, args}]
		if !ok {
			k = valueKey(tool, json.RawMessage(args))
			keys[[2]string{tool, args}] = k
		}
		return k
	}
	for _, s := range sessions {
		st := r.state(c, maxBytes, s)
		clear(keys)
		var pending []predictionKey
		add := func() {
			for _, p := range st.predict(&sc, 10, true) {
				pending = append(pending, predictionKey{p.Tool, string(p.Args), p.P, st.stratum()})
			}
		}
		add()
		for ev := range trace.Known(s) {
			if ev.IsMessage() {
				st.hear(ev)
				add()
				continue
			}
			if len(pending) > 0 {
				want := comingKeys(s, ev, key)
				for _, p := range pending {
					k := key(p.tool, p.args)
					pairs[p.stratum] = append(pairs[p.stratum], calPair{p.raw, slices.Contains(want, k)})
				}
			}
			pending = pending[:0]
			st.observe(ev)
			add()
		}
	}
}

// comingKeys returns the keys of the calls a prediction made before call
// ev may serve: ev and the calls of its step after it (a speculative
// result serves any call of the step, as the engine uses it; the calls
// of the step already made are served and no longer count).
// key makes a call's key (valueKey); nil: valueKey.
func comingKeys(s trace.Session, ev trace.Event, key func(tool, args string) string) []string {
	if key == nil {
		key = func(tool, args string) string { return valueKey(tool, json.RawMessage(args)) }
	}
	keys := []string{key(ev.Tool, string(ev.Args))}
	if ev.Step <= 0 {
		return keys
	}
	for _, o := range s.Events {
		if o.Step == ev.Step && o.Seq > ev.Seq && o.IsCall() {
			keys = append(keys, key(o.Tool, string(o.Args)))
		}
	}
	return keys
}

type predictionKey struct {
	tool, args string
	raw        float64
	stratum    int
}

// valueKey is a call's identity for calibration: tool and canonical args.
func valueKey(tool string, args json.RawMessage) string {
	var x any
	if json.Unmarshal(args, &x) != nil {
		return tool + "\x00" + string(args)
	}
	b, _ := json.Marshal(x)
	return tool + "\x00" + string(b)
}

// minBlock is the least number of predictions behind a calibration step.
const minBlock = 20

// isotonic fits a non-decreasing map from raw score to hit rate (pool
// adjacent violators), with steps of at least minBlock predictions.
func isotonic(pairs []calPair) []CalPoint {
	if len(pairs) == 0 {
		return nil
	}
	slices.SortFunc(pairs, func(a, b calPair) int { return cmp.Compare(a.raw, b.raw) })
	type block struct {
		hits, n float64
		raw     float64
	}
	var bs []block
	for i := 0; i < len(pairs); {
		// Equal raw scores form one block.
		b := block{raw: pairs[i].raw}
		for ; i < len(pairs) && pairs[i].raw == b.raw; i++ {
			b.n++
			if pairs[i].hit {
				b.hits++
			}
		}
		bs = append(bs, b)
		for len(bs) > 1 {
			x, y := bs[len(bs)-2], bs[len(bs)-1]
			if x.hits/x.n < y.hits/y.n && x.n >= minBlock {
				break
			}
			bs = bs[:len(bs)-1]
			bs[len(bs)-1] = block{x.hits + y.hits, x.n + y.n, y.raw}
		}
	}
	out := make([]CalPoint, len(bs))
	for i, b := range bs {
		out[i] = CalPoint{Raw: b.raw, P: b.hits / b.n, N: int(b.n)}
	}
	return out
}
