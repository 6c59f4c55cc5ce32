package convo

import (
	"math"
	"slices"
	"testing"

	"github.com/ahead-dev/ahead/trace"
)

// TestFitsSame: tool choice's regression and the value scorer's fit,
// with what their passes compute alike shared (toolWordWeights,
// fitWeights), give the weights of their references (one sum per word
// set, one softmax per call; one score per candidate, one softmax per
// instance), bit for bit, on the testdata and on 200 sessions of the shared tau2
// traces (a real vocabulary, 26 tools, turns of several calls, repeated calls).
func TestFitsSame(t *testing.T) {
	check := func(t *testing.T, sessions []trace.Session) {
		o := (&MineOptions{}).withDefaults()
		lex := newLexicon(sessions)
		m, tm := fitTables(sessions, &o, lex, vocabulary(sessions, o.MinSessions, lex))
		c := compile(m)
		if len(c.tools) < 2 || len(tm.samples) == 0 {
			t.Fatalf("%d tools, %d samples: nothing fitted", len(c.tools), len(tm.samples))
		}
		same := func(what string, got, want []float64) {
			t.Helper()
			if len(got) != len(want) {
				t.Fatalf("%s: %d weights, want %d", what, len(got), len(want))
			}
			for i := range got {
				if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
					t.Fatalf("%s: weight %d = %v, want %v", what, i, got[i], want[i])
				}
			}
		}
		W := toolWordWeights(c, tm.wordSets, tm.samples)
		same("tool choice", W, toolWordWeightsRef(c, tm.wordSets, tm.samples))
		if !slices.ContainsFunc(W, func(x float64) bool { return x != 0 }) {
			t.Fatal("tool choice: every weight is 0")
		}
		setToolWords(m, c, W)
		ins := instances(compile(m), sessions, o.MaxBytes, lex)
		if len(ins) == 0 {
			t.Fatal("no instances")
		}
		// Both fits drop the instances' features as they read them.
		ref := slices.Clone(ins)
		for i := range ref {
			ref[i].x = slices.Clone(ref[i].x)
		}
		want := fitWeightsRef(ref)
		same("value scorer", fitWeights(ins), want)
		if slices.Equal(want, defaultWeights()) {
			t.Error("value scorer: the fit left the default weights")
		}
	}
	t.Run("testdata", func(t *testing.T) { check(t, readTestdata(t)) })
	t.Run("tau2", func(t *testing.T) {
		sessions, err := trace.Collect(trace.NewReader(nil).Events(sharedDir + "tau2-airline-retail-train-conv.jsonl.gz"))
		if err != nil {
			t.Skipf("shared traces not here: %v", err)
		}
		check(t, sessions[:200]) // of 431: enough for every case, in a few seconds
	})
}

// fitWeightsRef is fitWeights as it was before the scores of equal
// candidates and the softmax of equal instances were shared: one score
// per candidate, one softmax per instance. TestFitsSame holds the
// fast one to it, bit for bit.
func fitWeightsRef(ins []instance) []float64 {
	w := defaultWeights()
	if len(ins) == 0 {
		return w
	}
	// The candidates' nonzero features only, in feature order: about 8
	// of 21, 9 bytes each (in place of 168 bytes a candidate). A zero
	// feature adds a zero to a sum that is never -0 (it starts at +0,
	// and round-to-nearest gives +0 for x-x), which changes nothing: the
	// weights are the same, bit for bit, as the dense sums', in less
	// than half the time.
	type row struct{ n, label int32 }
	rows := make([]row, len(ins))
	nfs, ncs := 0, 0
	for _, in := range ins {
		for i := range in.x {
			for _, v := range in.x[i] {
				if v != 0 {
					nfs++
				}
			}
		}
		ncs += len(in.x)
	}
	fidx := make([]uint8, 0, nfs)
	fval := make([]float64, 0, nfs)
	ends := make([]int32, 0, ncs) // candidate k's features end at ends[k]
	for r := range ins {
		in := &ins[r]
		for i := range in.x {
			for f, v := range in.x[i] {
				if v != 0 {
					fidx = append(fidx, uint8(f))
					fval = append(fval, v)
				}
			}
			ends = append(ends, int32(len(fval)))
		}
		rows[r] = row{int32(len(in.x)), int32(in.label)}
		in.x = nil
	}
	g := make([]float64, nFeat)
	h := make([]float64, nFeat)
	var p []float64
	const l2, rate = 1e-3, 0.3
	for it := 0; it < 120; it++ {
		clear(g)
		k, from := 0, 0 // the instance's first candidate and its first feature
		for _, r := range rows {
			p = p[:0]
			z, best := 1.0, 0.0
			start := from
			for i := range int(r.n) {
				end := int(ends[k+i])
				var s float64
				for j, f := range fidx[from:end] {
					s += w[f] * fval[from+j]
				}
				from = end
				best = max(best, s)
				p = append(p, s)
			}
			z = math.Exp(-best)
			for i := range p {
				p[i] = math.Exp(p[i] - best)
				z += p[i]
			}
			from = start
			for i := range int(r.n) {
				end := int(ends[k+i])
				q := p[i] / z
				if i == int(r.label) {
					q--
				}
				for j, f := range fidx[from:end] {
					g[f] += q * fval[from+j]
				}
				from = end
			}
			k += int(r.n)
		}
		for f := range w {
			gf := g[f]/float64(len(ins)) + l2*w[f]
			h[f] += gf * gf
			w[f] -= rate * gf / (math.Sqrt(h[f]) + 1e-8)
		}
	}
	return w
}
