package convo

import (
	"encoding/binary"
	"math"
	"slices"
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
	setToolWords(m, c, toolWordWeights(c, sets, samples))
}

// setToolWords writes the weights W (by feature, then tool: the user's
// words, then the model's) into the model's tools.
func setToolWords(m *Model, c *compiled, W []float64) {
	nt, nv := len(c.tools), len(c.words)
	for ti, ct := range c.tools {
		t := ct.t
		// The naive Bayes counts are not read any more: not written.
		t.Words, t.WordTotal = nil, 0
		t.WordWeights = make(map[string]float64)
		t.ModelWordWeights = make(map[string]float64)
		for w := range 2 * nv {
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

// choiceFit is the data of tool choice's regression, laid out for its
// passes: only the word sets that some fitted call heard (active, in set
// order) and the words in them, and what of each pass can be done once
// for several of them with the same floating-point operations, so that
// the weights are those of one sum per set and one softmax per call, bit
// for bit (TestFitsSame):
//   - the calls of a turn hear the same user's words (ids below nv, in
//     the order heard) and differ in the model's (nv and up): a set's sum
//     starts from its user part's, summed once per run of sets;
//   - words heard in exactly the same sets have the same gradient: it is
//     summed once per distinct list of sets;
//   - calls after the same context with the same words have the same
//     softmax: computed once per run of them.
type choiceFit struct {
	nt    int
	sets  [][]int32 // by active set, in set order
	split []int     // sets[a][:split[a]] are the user's words
	same  []bool    // sets[a]'s user part is sets[a-1]'s
	offs  [][]float64
	rows  []choiceRow
	words []int32   // the words in some active set, in id order
	lists [][]int32 // by index in words: the active sets holding it, nil when shared
	share []int32   // by index in words: the index whose gradient it shares, or -1
}

// choiceRow is one fitted call: its context's offsets (an index in
// offs), its active set and the tool called.
type choiceRow struct{ off, set, y int32 }

// newChoiceFit selects and lays out the calls that the regression fits.
func newChoiceFit(c *compiled, sets [][]int32, samples []choiceSample) *choiceFit {
	nt, nv := len(c.tools), len(c.words)
	f := &choiceFit{nt: nt}
	type ctxKey struct {
		prev  string
		spoke bool
	}
	// P(tool) and the offsets depend on the context alone: computed once
	// for each.
	type ctxProbs struct {
		probs []float64
		off   int32
	}
	byCtx := make(map[ctxKey]*ctxProbs)
	active := make([]int32, len(sets)) // active index + 1 of a set, or 0
	for _, s := range samples {
		y, ok := c.byName[s.tool]
		if !ok {
			continue
		}
		k := ctxKey{s.prev, s.spoke}
		cp := byCtx[k]
		if cp == nil {
			st := &state{c: c, seq: c.seqBy[s.prev], spoke: s.spoke}
			cp = &ctxProbs{probs: st.toolProbsAt(nil, 0), off: int32(len(f.offs))}
			off := make([]float64, nt)
			for i, p := range cp.probs {
				off[i] = math.Log(max(p, 1e-12))
			}
			f.offs = append(f.offs, off)
			byCtx[k] = cp
		}
		if cp.probs[y] >= certain {
			// The context alone says the tool: the call teaches the
			// words next to nothing (a coding agent's shell after its
			// shell), and skipping it keeps mining fast.
			continue
		}
		active[s.words] = 1
		f.rows = append(f.rows, choiceRow{cp.off, int32(s.words), int32(y)})
	}
	// The active sets in set order, and for each word the active sets it
	// is in, in order.
	bySet := make([][]int32, 2*nv)
	for si, set := range sets {
		if active[si] == 0 {
			continue
		}
		a := int32(len(f.sets))
		active[si] = a + 1
		u := 0
		for u < len(set) && int(set[u]) < nv {
			u++
		}
		f.same = append(f.same, a > 0 && slices.Equal(set[:u], f.sets[a-1][:f.split[a-1]]))
		f.sets = append(f.sets, set)
		f.split = append(f.split, u)
		for _, w := range set {
			bySet[w] = append(bySet[w], a)
		}
	}
	for i := range f.rows {
		f.rows[i].set = active[f.rows[i].set] - 1
	}
	// Words with the same list of sets share one gradient.
	first := make(map[string]int32)
	var key []byte
	for w, list := range bySet {
		if len(list) == 0 {
			continue
		}
		key = key[:0]
		for _, a := range list {
			key = binary.LittleEndian.AppendUint32(key, uint32(a))
		}
		i := int32(len(f.words))
		f.words = append(f.words, int32(w))
		if j, ok := first[string(key)]; ok {
			f.lists = append(f.lists, nil)
			f.share = append(f.share, j)
			continue
		}
		first[string(key)] = i
		f.lists = append(f.lists, list)
		f.share = append(f.share, -1)
	}
	return f
}

// toolWordWeights fits the regression by full-batch Adam and returns
// its weights, by feature (the user's words, then the model's), then
// tool.
func toolWordWeights(c *compiled, sets [][]int32, samples []choiceSample) []float64 {
	f := newChoiceFit(c, sets, samples)
	nt, nw := f.nt, 2*len(c.words)
	W := make([]float64, nw*nt)
	g := make([]float64, nw*nt)
	m1 := make([]float64, nw*nt)
	m2 := make([]float64, nw*nt)
	// The words' sums and gradients by active set: the calls of a turn
	// share one, so each set's words are read once per pass, not once
	// per call.
	ws := make([]float64, len(f.sets)*nt)
	gs := make([]float64, len(f.sets)*nt)
	user := make([]float64, nt) // the current user part's sum
	q := make([]float64, nt)    // the current row's softmax
	const b1, b2, eps = 0.9, 0.999, 1e-8
	for it := 1; it <= choiceIters; it++ {
		for a, set := range f.sets {
			u := f.split[a]
			if !f.same[a] {
				clear(user)
				sumRows(user, W, set[:u], nt)
			}
			sum := ws[a*nt : a*nt+nt]
			copy(sum, user)
			sumRows(sum, W, set[u:], nt)
		}
		clear(gs)
		last := choiceRow{-1, -1, -1}
		for _, r := range f.rows {
			if r.off != last.off || r.set != last.set {
				softmax(q, f.offs[r.off], ws[int(r.set)*nt:int(r.set)*nt+nt])
				last = r
			}
			gr := gs[int(r.set)*nt : int(r.set)*nt+nt]
			for i, p := range q {
				gr[i] += p
			}
			gr[r.y]--
		}
		for i, w := range f.words {
			dst := g[int(w)*nt : int(w)*nt+nt]
			if j := f.share[i]; j >= 0 {
				copy(dst, g[int(f.words[j])*nt:])
				continue
			}
			clear(dst)
			sumRows(dst, gs, f.lists[i], nt)
		}
		c1 := 1 - math.Pow(b1, float64(it))
		c2 := 1 - math.Pow(b2, float64(it))
		for _, w := range f.words {
			for i := int(w) * nt; i < int(w)*nt+nt; i++ {
				gi := g[i] + choiceL2*W[i]
				m1[i] = b1*m1[i] + (1-b1)*gi
				m2[i] = b2*m2[i] + (1-b2)*gi*gi
				W[i] -= choiceRate * (m1[i] / c1) / (math.Sqrt(m2[i]/c2) + eps)
			}
		}
	}
	return W
}

// softmax sets q to the softmax of off + sum.
func softmax(q, off, sum []float64) {
	off, sum = off[:len(q)], sum[:len(q)]
	for i := range q {
		q[i] = off[i] + sum[i]
	}
	softmaxInPlace(q)
}

// softmaxInPlace sets q to the softmax of q: exp(q - max q), normalised.
func softmaxInPlace(q []float64) {
	best := math.Inf(-1)
	for _, v := range q {
		best = max(best, v)
	}
	var tot float64
	for i := range q {
		q[i] = math.Exp(q[i] - best)
		tot += q[i]
	}
	for i := range q {
		q[i] /= tot
	}
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
