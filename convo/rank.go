package convo

import (
	"cmp"
	"encoding/json"
	"math"
	"slices"

	"github.com/ahead-dev/ahead/predict"
)

// Ranking: from the scores of tools and argument values to the ranked
// predicted calls of a session's state (tool choice, the top values of each
// argument, the key sets of a tool, a call's P from its stratum).

// toolProbs returns P(tool) for the state's next call.
func (st *state) toolProbs(dst []float64) []float64 {
	return st.toolProbsAt(dst, st.c.m.Lambda)
}

// toolProbsAt is toolProbs with the words weighed by lambda.
func (st *state) toolProbsAt(dst []float64, lambda float64) []float64 {
	dst = st.seqLogs(dst)
	if len(dst) == 0 {
		return dst
	}
	model := st.modelHeard()
	for i := range dst {
		if lambda > 0 && st.wsum != nil {
			dst[i] += lambda * st.wsum[i]
		}
		if lambda > 0 && model {
			dst[i] += lambda * st.msum[i]
		}
	}
	softmaxInPlace(dst)
	return dst
}

// seqLogs sets dst to the log probability of each tool from the call
// sequence alone (all calls, after speech or not, after this context,
// each smoothed towards the one before), the part of a tool's score that
// no weight of the words changes.
func (st *state) seqLogs(dst []float64) []float64 {
	c := st.c
	n := len(c.tools)
	dst = slices.Grow(dst[:0], n)[:n]
	flag := 0
	if st.spoke {
		flag = 1
	}
	var ctx *seqDist
	if st.seq != nil && st.seq[flag].c != nil {
		ctx = &st.seq[flag]
	}
	fl := &c.seqFlag[flag]
	all := &c.seqAll
	for i := range c.tools {
		pAll := (all.c[i] + 0.5) / (all.n + 0.5*float64(n))
		pFlag := (fl.c[i] + 2*pAll) / (fl.n + 2)
		pCtx := pFlag
		if ctx != nil {
			pCtx = (ctx.c[i] + 2*pFlag) / (ctx.n + 2)
		}
		dst[i] = math.Log(pCtx)
	}
	return dst
}

// scratch holds a prediction's buffers.
type scratch struct {
	probs []float64
	cs    []scored
	vals  hset
	kvals []kval
	raws  []rawPred
	buf   []byte
	// tops memoises topValues by cArg.id within one prediction: an
	// entry is current when its topAt equals gen.
	tops  []argTop
	topAt []uint64
	gen   uint64
}

type kval struct {
	ref valRef
	h   uint64 // the value's hash
	lp  float64
}

// rawPred is a call of tool with key set ks whose arguments' values are
// kvals[off+ai*maxValues+idx[ai]].
type rawPred struct {
	tool int
	ks   *cKeySet
	off  int
	idx  [maxKeys]uint8
	raw  float64
}

const (
	// maxMentions bounds the mentions an argument's candidates are read
	// from, the most recent first.
	maxMentions = 48
	maxTools    = 6
	maxValues   = 3
	maxKeys     = 8
	minRaw      = 1e-4
)

// predict returns the state's ranked predictions (raw scores in P when
// raw is set, else calibrated).
func (st *state) predict(sc *scratch, max int, raw bool) []predict.Prediction {
	c := st.c
	sc.gen++
	sc.probs = st.toolProbs(sc.probs)
	sc.raws = sc.raws[:0]
	sc.kvals = sc.kvals[:0]
	var order [maxTools]int
	for _, ti := range topTools(sc.probs, order[:0]) {
		pt := sc.probs[ti]
		if pt < 0.01 {
			break
		}
		t := c.tools[ti]
		for k := range t.keySets {
			ks := &t.keySets[k]
			st.keySetPreds(sc, ti, ks, math.Log(pt)+ks.logP)
		}
	}
	slices.SortStableFunc(sc.raws, func(a, b rawPred) int { return cmp.Compare(b.raw, a.raw) })
	out := make([]predict.Prediction, 0, min(max, len(sc.raws)))
	stratum := st.stratum()
	for _, r := range sc.raws {
		if len(out) == max {
			break
		}
		b := append(sc.buf[:0], '{')
		for ai, a := range r.ks.args {
			if ai > 0 {
				b = append(b, ',')
			}
			b = append(b, r.ks.json[ai]...)
			b = append(b, ':')
			b = append(b, sc.kvals[r.off+ai*maxValues+int(r.idx[ai])].ref.json(a)...)
		}
		b = append(b, '}')
		sc.buf = b
		tool := c.tools[r.tool].t.Name
		// One per call: the same args may come from two key sets' orders.
		dup := false
		for _, o := range out {
			if o.Tool == tool && string(o.Args) == string(b) {
				dup = true
				break
			}
		}
		if dup {
			continue
		}
		p := r.raw
		if !raw {
			p = c.calibrate(stratum, p)
		}
		out = append(out, predict.Prediction{Tool: tool, Args: json.RawMessage(string(b)), P: p, Origin: predict.OriginMessage})
	}
	if !raw {
		// Calibration is monotone but flat in steps; keep the raw order
		// within a step.
		slices.SortStableFunc(out, func(a, b predict.Prediction) int { return cmp.Compare(b.P, a.P) })
	}
	return out
}

// topTools appends to dst the indices of the maxTools most probable
// tools, most probable first, ties in index order: the first maxTools of
// a stable sort by descending probability, without sorting them all.
func topTools(probs []float64, dst []int) []int {
	for i, p := range probs {
		r := len(dst)
		for r > 0 && cmp.Compare(p, probs[dst[r-1]]) > 0 {
			r--
		}
		if r == maxTools {
			continue
		}
		if len(dst) < maxTools {
			dst = append(dst, 0)
		}
		copy(dst[r+1:], dst[r:len(dst)-1])
		dst[r] = i
	}
	return dst
}

// keySetPreds adds the calls of tool ti with key set ks whose joint score
// exceeds minRaw.
func (st *state) keySetPreds(sc *scratch, ti int, ks *cKeySet, base float64) {
	k := len(ks.args)
	if k > maxKeys {
		return
	}
	off := len(sc.kvals)
	var nv [maxKeys]int
	for ai, a := range ks.args {
		if a == nil {
			sc.kvals = sc.kvals[:off]
			return
		}
		top := st.topValues(a, sc)
		if top.n == 0 {
			sc.kvals = sc.kvals[:off]
			return
		}
		nv[ai] = top.n
		sc.kvals = append(sc.kvals, top.kv[:]...)
	}
	// Enumerate the combinations (at most maxValues^k, pruned).
	t := st.c.tools[ti]
	var idx [maxKeys]uint8
	for {
		lp := base
		for ai := 0; ai < k; ai++ {
			lp += sc.kvals[off+ai*maxValues+int(idx[ai])].lp
		}
		if k > 1 && t.sameKnown {
			// One value in two arguments is as likely as the tool's calls
			// made it: rarely, for most, where it would otherwise fill the
			// ranks with the same token put in every argument.
			if sc.repeats(off, k, &idx) {
				lp += t.logSame
			} else {
				lp += t.logDistinct
			}
		}
		if p := math.Exp(lp); p >= minRaw {
			sc.raws = append(sc.raws, rawPred{tool: ti, ks: ks, off: off, idx: idx, raw: p})
		}
		ai := 0
		for ; ai < k; ai++ {
			idx[ai]++
			if int(idx[ai]) < nv[ai] {
				break
			}
			idx[ai] = 0
		}
		if ai == k {
			return
		}
	}
}

// argTop is an argument's best values in a prediction, with their log
// probability.
type argTop struct {
	kv [maxValues]kval
	n  int // values found (0: none, the argument cannot be filled)
}

// topValues returns argument a's top values, with their log probability
// (a softmax against "not found", whose score is 0). They depend on the
// state alone, so a prediction works them out once per argument, however
// many of the tool's key sets hold it.
func (st *state) topValues(a *cArg, sc *scratch) *argTop {
	if len(sc.topAt) != len(st.c.args) {
		sc.tops = make([]argTop, len(st.c.args))
		sc.topAt = make([]uint64, len(st.c.args))
	}
	t := &sc.tops[a.id]
	if sc.topAt[a.id] == sc.gen {
		return t
	}
	sc.topAt[a.id] = sc.gen
	*t = argTop{}
	cs := st.candidates(a, sc)
	if len(cs) == 0 {
		return t
	}
	z := 1.0
	var top [maxValues]int
	for j := range top {
		top[j] = -1
	}
	for j := range cs {
		z += math.Exp(cs[j].score)
		for r := 0; r < maxValues; r++ {
			if top[r] < 0 || cs[j].score > cs[top[r]].score {
				copy(top[r+1:], top[r:maxValues-1])
				top[r] = j
				break
			}
		}
	}
	lz := math.Log(z)
	for r := 0; r < maxValues; r++ {
		if top[r] >= 0 {
			t.kv[r] = kval{cs[top[r]].ref, cs[top[r]].h, cs[top[r]].score - lz}
			t.n++
		}
	}
	return t
}

// repeats reports whether two arguments of a combination take the same
// value.
func (sc *scratch) repeats(off, k int, idx *[maxKeys]uint8) bool {
	for a := 0; a < k; a++ {
		ha := sc.kvals[off+a*maxValues+int(idx[a])].h
		for b := a + 1; b < k; b++ {
			if sc.kvals[off+b*maxValues+int(idx[b])].h == ha {
				return true
			}
		}
	}
	return false
}

// stratum is the calibration map that applies.
func (st *state) stratum() int {
	switch {
	case st.calls == 0:
		return stratumFirst
	case st.spoke:
		return stratumUser
	}
	return stratumCall
}

// quote returns the JSON string of v: as is between quotes when it is
// plain ASCII without quotes, escapes or HTML characters (as tokens are),
// else as encoding/json writes it.
func quote(v string) string {
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c < 0x20, c >= 0x7f, c == '"', c == '\\', c == '<', c == '>', c == '&':
			b, _ := json.Marshal(v)
			return string(b)
		}
	}
	return `"` + v + `"`
}
