package convo

import (
	"math"
)

// Tool choice from the user's words, learned discriminatively.
//
// Naive Bayes counts every word as independent evidence: the dozens of
// words of a message then overwhelm the call sequence, and the cross-fit
// weighed them down to a twentieth. A multinomial logistic regression
// over the same words, with the call sequence's log probabilities as a
// fixed offset, learns only what the words add to the context: a word
// that says the same as the previous call gets a small weight, one that
// tells two tools apart after the same context a large one.

// choiceSample is one call seen at mining time: the context it followed,
// the set of vocabulary ids heard from the user (and, offset by the
// vocabulary's size, those of the model's latest message) (an index in the miner's
// word sets: the calls of one turn share theirs), and the tool called.
type choiceSample struct {
	prev  string
	spoke bool
	words int
	tool  string
}

const (
	// choiceL2 is the ridge penalty per weight, against the summed log
	// likelihood of the calls: a word seen in a handful of calls cannot
	// take a weight of more than a few units.
	choiceL2 = 3.0
	// choiceIters and choiceRate drive Adam over the full batch; the loss
	// is convex, so the result depends on them only by how close it gets.
	choiceIters = 150
	choiceRate  = 0.1
	// certain is the probability of the called tool, from the call
	// sequence alone, above which a call is left out of the fit.
	certain = 0.999
)

// fitToolWords sets each tool's WordWeights to the logistic regression of
// the called tool on the words of samples, with the call sequence of the
// compiled model c (words off) as offset. Deterministic: the samples are
// in session order and the sums run in index order.
func fitToolWords(m *Model, c *compiled, sets [][]int32, samples []choiceSample) {
	nt, nv := len(c.tools), len(c.words)
	if nt < 2 || nv == 0 || len(samples) == 0 {
		// One tool (a coding agent's shell): nothing to choose.
		return
	}
	// Features: the user's words, then the model's (ids nv and up).
	nw := 2 * nv
	type row struct {
		off []float64
		set int
		y   int
	}
	rows := make([]row, 0, len(samples))
	used := make([]bool, nw)
	usedSet := make([]bool, len(sets))
	var probs []float64
	for _, s := range samples {
		y, ok := c.byName[s.tool]
		if !ok {
			continue
		}
		st := &state{c: c, seq: c.seqBy[s.prev], spoke: s.spoke}
		probs = st.toolProbsAt(probs, 0)
		if probs[y] >= certain {
			// The context alone says the tool: the call teaches the
			// words next to nothing (a coding agent's shell after its
			// shell), and skipping it keeps mining fast.
			continue
		}
		usedSet[s.words] = true
		off := make([]float64, nt)
		for i, p := range probs {
			off[i] = math.Log(max(p, 1e-12))
		}
		for _, w := range sets[s.words] {
			used[w] = true
		}
		rows = append(rows, row{off, s.words, y})
	}
	// The used sets, and for each word the used sets it is in, in
	// order: the gradient of a word's row is the sum of its sets' rows,
	// added in set order as a loop over the sets would (the same
	// floating-point sums, so the same weights, bit for bit), but row by
	// row, where the rows stay in cache.
	var active []int32
	bySet := make([][]int32, nw)
	for si, set := range sets {
		if !usedSet[si] {
			continue
		}
		active = append(active, int32(si))
		for _, w := range set {
			bySet[w] = append(bySet[w], int32(si))
		}
	}
	W := make([]float64, nw*nt) // by word, then tool
	g := make([]float64, nw*nt)
	m1 := make([]float64, nw*nt)
	m2 := make([]float64, nw*nt)
	// The words' sums and gradients by word set: the calls of a turn
	// share one, so each set's words are read once per pass, not once
	// per call.
	ws := make([]float64, len(sets)*nt)
	gs := make([]float64, len(sets)*nt)
	z := make([]float64, nt)
	const b1, b2, eps = 0.9, 0.999, 1e-8
	for it := 1; it <= choiceIters; it++ {
		clear(ws)
		for _, si := range active {
			sumRows(ws[int(si)*nt:int(si)*nt+nt], W, sets[si], nt)
		}
		clear(gs)
		for _, r := range rows {
			sum := ws[r.set*nt : r.set*nt+nt]
			best := math.Inf(-1)
			for i := range z {
				z[i] = r.off[i] + sum[i]
				best = max(best, z[i])
			}
			var tot float64
			for i := range z {
				z[i] = math.Exp(z[i] - best)
				tot += z[i]
			}
			gr := gs[r.set*nt : r.set*nt+nt]
			for i := range z {
				gr[i] += z[i] / tot
			}
			gr[r.y]--
		}
		clear(g)
		for w, list := range bySet {
			if len(list) > 0 {
				sumRows(g[w*nt:w*nt+nt], gs, list, nt)
			}
		}
		c1 := 1 - math.Pow(b1, float64(it))
		c2 := 1 - math.Pow(b2, float64(it))
		for w := range nw {
			if !used[w] {
				continue
			}
			for i := w * nt; i < w*nt+nt; i++ {
				gi := g[i] + choiceL2*W[i]
				m1[i] = b1*m1[i] + (1-b1)*gi
				m2[i] = b2*m2[i] + (1-b2)*gi*gi
				W[i] -= choiceRate * (m1[i] / c1) / (math.Sqrt(m2[i]/c2) + eps)
			}
		}
	}
	for ti, ct := range c.tools {
		t := ct.t
		// The naive Bayes counts are not read any more: not written.
		t.Words, t.WordTotal = nil, 0
		t.WordWeights = make(map[string]float64)
		t.ModelWordWeights = make(map[string]float64)
		for w := range nw {
			// Rounded, so that the pool is the same bytes on every
			// machine and a weight too small to matter is not written.
			x := math.Round(W[w*nt+ti]*1e4) / 1e4
			switch {
			case x == 0:
			case w < nv:
				t.WordWeights[c.words[w]] = x
			default:
				t.ModelWordWeights[c.words[w-nv]] = x
			}
		}
	}
	m.ToolWords = toolWordsLogit
}

// sumRows adds to dst (of length nt) the rows of src (nt wide) numbered
// by ids, in that order. Four rows are added per pass over dst: each
// element's sum is still ((dst+r0)+r1)+… in the order of ids, the same
// float64 operations as one row at a time, with a quarter of the loads
// and stores of dst (the hottest loop of mining the conversation: 150
// passes over every word of every turn, forward and back).
func sumRows(dst, src []float64, ids []int32, nt int) {
	dst = dst[:nt]
	k := 0
	for ; k+4 <= len(ids); k += 4 {
		r0 := src[int(ids[k])*nt:][:len(dst)]
		r1 := src[int(ids[k+1])*nt:][:len(dst)]
		r2 := src[int(ids[k+2])*nt:][:len(dst)]
		r3 := src[int(ids[k+3])*nt:][:len(dst)]
		for i := range dst {
			dst[i] = dst[i] + r0[i] + r1[i] + r2[i] + r3[i]
		}
	}
	for ; k < len(ids); k++ {
		r := src[int(ids[k])*nt:][:len(dst)]
		for i := range dst {
			dst[i] += r[i]
		}
	}
}
