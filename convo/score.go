package convo

import (
	"cmp"
	"encoding/json"
	"math"
	"slices"

	"github.com/ahead-dev/ahead/predict"
)

// Features of a candidate value of an argument. The weights are shared
// by every argument of every tool, so they learn how much each kind of
// evidence counts, not which values a tool takes.
const (
	fShape    = iota // log P(shape | arg)
	fClass           // log P(class set | arg)
	fLen             // log P(length | arg)
	fNear            // log-odds of the words around the mention
	fRank            // log(1 + recency rank among the argument's candidates)
	fUser            // the latest mention is the user's
	fSystem          // ... the system prompt's
	fAssist          // ... the model's earlier text
	fCall            // ... an earlier call's argument
	fSameName        // ... an earlier call's argument of the same name
	fTf              // log P(normalisation | arg)
	fUsed            // the value was an earlier call's argument
	fUsedSame        // ... of this tool and argument
	fLatest          // mentioned in the latest user message
	fConst           // a constant value
	fConstP          // log share of the constant
	fFound           // log share of the argument's values the conversation gave
	fSince           // mentioned since the previous call
	fSpoke           // the user spoke since the previous call
	fRepeat          // the previous call was this tool with this value
	nFeat
)

func defaultWeights() []float64 {
	w := make([]float64, nFeat)
	w[fShape], w[fClass], w[fLen], w[fNear], w[fRank] = 1, 0.5, 0.5, 1, -1
	w[fTf], w[fConstP] = 1, 1
	return w
}

// entry is a candidate value of one argument: a mention of a token in
// the window under one normalisation, with the part of its score that
// does not change while it stays in the window.
type entry struct {
	seg  *segment
	i    int32
	tf   uint8
	rank int32 // recency rank of its token's text among the argument's
	h    uint64
	th   uint64  // its token's hash, which the rank is by
	base float64 // w · staticX
}

// argCache holds an argument's candidates: the entries of the
// maxMentions most recent mentions in the window, the most recent
// first, brought up to date with the segments added since it was read.
type argCache struct {
	es    []entry
	upTo  int    // segments with an ordinal below upTo are in
	epoch uint64 // the window's epoch when filtered last
	full  bool   // mentions were left out at the cap
}

// staticX returns the features of a mention that do not change while it
// stays in the window.
func staticX(a *cArg, seg *segment, i int32, lp float64) (x [nFeat]float64) {
	tk := &seg.toks[i]
	x[fTf] = lp
	x[fClass] = a.clsLP(tk.bits)
	x[fShape] = a.shpMiss
	if tk.shape >= 0 {
		x[fShape] = a.shp[tk.shape]
	}
	x[fLen] = a.lenLP[lengthIdx(int(tk.n))]
	x[fNear] = max(-6, min(6, seg.nearSum(i, a.near)))
	switch seg.role {
	case roleUser:
		x[fUser] = 1
	case roleSystem:
		x[fSystem] = 1
	case roleAssistant:
		x[fAssist] = 1
	case roleCall:
		x[fCall] = 1
		if seg.args[i] == a.a.Name {
			x[fSameName] = 1
		}
	}
	x[fFound] = a.logFound
	return x
}

// staticPre and staticBase compute dot(w, staticX(a, seg, i, lp))
// without the vector: staticPre the terms before fTf, the same for each
// normalisation of a mention, staticBase the rest. The terms are added in
// dot's order and the zero ones left out (adding a zero changes no
// float), so that the score is the same to the bit.
func staticPre(a *cArg, w []float64, seg *segment, i int32) float64 {
	tk := &seg.toks[i]
	shp := a.shpMiss
	if tk.shape >= 0 {
		shp = a.shp[tk.shape]
	}
	s := w[fShape] * shp
	s += w[fClass] * a.clsLP(tk.bits)
	s += w[fLen] * a.lenLP[lengthIdx(int(tk.n))]
	s += w[fNear] * max(-6, min(6, seg.nearSum(i, a.near)))
	switch seg.role {
	case roleUser:
		s += w[fUser]
	case roleSystem:
		s += w[fSystem]
	case roleAssistant:
		s += w[fAssist]
	case roleCall:
		s += w[fCall]
		if seg.args[i] == a.a.Name {
			s += w[fSameName]
		}
	}
	return s
}

func staticBase(a *cArg, w []float64, pre, lp float64) float64 {
	s := pre + w[fTf]*lp
	return s + w[fFound]*a.logFound
}

func (a *cArg) clsLP(bits uint16) float64 {
	for i, k := range a.keys {
		if k == bits {
			return a.clsVal[i]
		}
	}
	return 0
}

// dynX sets the features of an entry (or a constant, e nil) that depend
// on the state: recency rank, latest user message, since the previous
// call, use by earlier calls.
func (st *state) dynX(a *cArg, e *entry, h uint64, x *[nFeat]float64) {
	if e != nil {
		x[fRank] = st.c.lgRank[min(e.rank, maxRank)]
		if e.seg == st.userSeg {
			x[fLatest] = 1
		}
		if e.seg.n > st.lastCall {
			x[fSince] = 1
		}
		if st.spoke {
			x[fSpoke] = 1
		}
	}
	if _, ok := st.used[h]; !ok {
		return
	}
	_, same := st.usedSame[usedKey{a.id, h}]
	if e != nil {
		x[fUsed] = 1
	} else if !same {
		return
	}
	if same {
		x[fUsedSame] = 1
	}
	if st.prevTool == a.tool && st.prevSet[a.id] && st.prevH[a.id] == h {
		x[fRepeat] = 1
	}
}

// dynScore is w · dynX, without building the vector.
func (st *state) dynScore(a *cArg, e *entry, h uint64) float64 {
	w := st.c.w
	var d float64
	if e != nil {
		d = w[fRank] * st.c.lgRank[min(e.rank, maxRank)]
		if e.seg == st.userSeg {
			d += w[fLatest]
		}
		if e.seg.n > st.lastCall {
			d += w[fSince]
		}
		if st.spoke {
			d += w[fSpoke]
		}
	}
	if !st.mayBeUsed(h) {
		return d
	}
	if _, ok := st.used[h]; !ok {
		return d
	}
	_, same := st.usedSame[usedKey{a.id, h}]
	if e != nil {
		d += w[fUsed]
	} else if !same {
		return d
	}
	if same {
		d += w[fUsedSame]
	}
	if st.prevTool == a.tool && st.prevSet[a.id] && st.prevH[a.id] == h {
		d += w[fRepeat]
	}
	return d
}

// cache returns argument a's candidates, up to date.
func (st *state) cache(a *cArg) *argCache {
	if st.caches == nil {
		st.caches = make([]argCache, len(st.c.args))
	}
	ac := &st.caches[a.id]
	removed := false
	if ac.epoch != st.epoch {
		n := 0
		for _, e := range ac.es {
			if e.seg.dropped {
				removed = true
				continue
			}
			ac.es[n] = e
			n++
		}
		ac.es = ac.es[:n]
		if removed && ac.full {
			// Mentions left out at the cap may be back in.
			ac.es, ac.upTo, ac.full = ac.es[:0], 0, false
		}
		ac.epoch = st.epoch
	}
	if ac.upTo == st.n {
		return ac
	}
	w := st.c.w
	buf := st.tmp[:0]
	mentions, full := 0, false
	var vb [maxTokenLen + 8]byte
	var pos [8]int
	keys := a.keys
	if len(keys) > len(pos) {
		keys = keys[:len(pos)]
	}
segs:
	for si := len(st.segs) - 1; si >= 0; si-- {
		seg := st.segs[si]
		if seg.n < ac.upTo {
			break
		}
		if seg.groups == nil {
			continue
		}
		var lists [8][]int32
		for ki, k := range keys {
			lists[ki] = seg.group(k)
			pos[ki] = len(lists[ki]) - 1
		}
		for {
			// The most recent mention left among a's keys.
			bk, bi := -1, int32(-1)
			for ki := range keys {
				if p := pos[ki]; p >= 0 {
					if i := lists[ki][p]; i > bi {
						bk, bi = ki, i
					}
				}
			}
			if bk < 0 {
				break
			}
			pos[bk]--
			text := seg.str(bi)
			added := false
			var pre float64
			for _, tl := range a.tfs {
				var h uint64
				if tl.tf == tfSameIdx && !a.number {
					// The token as written: its hash is the token's.
					h = seg.toks[bi].h
				} else {
					v, ok := tfAppend(vb[:0], tl.tf, text)
					if !ok || (a.number && !isNumber(v)) {
						continue
					}
					h = hashBytes(v)
				}
				if !added {
					if mentions == maxMentions {
						full = true
						break segs
					}
					mentions++
					added = true
					pre = staticPre(a, w, seg, bi)
				}
				buf = append(buf, entry{seg: seg, i: bi, tf: tl.tf, h: h, th: seg.toks[bi].h, base: staticBase(a, w, pre, tl.lp)})
			}
		}
	}
	if len(buf) == 0 && !removed {
		// Nothing new, nothing gone: the entries and their ranks stand.
		ac.upTo = st.n
		return ac
	}
	var last *segment
	lastI := int32(-1)
	for _, e := range ac.es {
		if e.seg != last || e.i != lastI {
			if mentions == maxMentions {
				full = true
				break
			}
			mentions++
			last, lastI = e.seg, e.i
		}
		buf = append(buf, e)
	}
	// Recency rank among the distinct tokens; a mention's entries (one
	// per normalisation) are adjacent and share it.
	st.ranks.reset(len(buf))
	next := int32(0)
	for i := range buf {
		if i > 0 && buf[i].seg == buf[i-1].seg && buf[i].i == buf[i-1].i {
			buf[i].rank = buf[i-1].rank
			continue
		}
		v, ok := st.ranks.slot(buf[i].th)
		if !ok {
			*v = next
			next++
		}
		buf[i].rank = *v
	}
	st.tmp = ac.es[:0]
	ac.es, ac.upTo, ac.full = buf, st.n, ac.full || full
	return ac
}

// valRef is one candidate value: a mention under a normalisation, or a
// constant (konst >= 0).
type valRef struct {
	seg   *segment
	i     int32
	tf    uint8
	konst int16
}

// json spells the value as a JSON value of argument a.
func (v valRef) json(a *cArg) string {
	if v.konst >= 0 {
		return string(a.consts[v.konst].v)
	}
	s, _ := apply(transforms[v.tf], v.seg.str(v.i))
	if a.number {
		return s
	}
	return quote(s)
}

// scored is a candidate value with its score.
type scored struct {
	ref   valRef
	h     uint64
	score float64
	e     *entry
}

// candidates returns argument a's candidate values, one per value (its
// best scored mention), scored by the model's weights.
func (st *state) candidates(a *cArg, sc *scratch) []scored {
	ac := st.cache(a)
	cs := sc.cs[:0]
	sc.vals.reset(len(ac.es) + len(a.consts))
	for k := range ac.es {
		e := &ac.es[k]
		s := e.base + st.dynScore(a, e, e.h)
		v, ok := sc.vals.slot(e.h)
		if ok {
			if s > cs[*v].score {
				cs[*v] = scored{valRef{e.seg, e.i, e.tf, -1}, e.h, s, e}
			}
			continue
		}
		*v = int32(len(cs))
		cs = append(cs, scored{valRef{e.seg, e.i, e.tf, -1}, e.h, s, e})
	}
	w := st.c.w
	for k, kc := range a.consts {
		h := a.constH[k]
		s := w[fConst] + w[fConstP]*kc.logP + st.dynScore(a, nil, h)
		v, ok := sc.vals.slot(h)
		if ok {
			if s > cs[*v].score {
				cs[*v] = scored{valRef{konst: int16(k)}, h, s, nil}
			}
			continue
		}
		*v = int32(len(cs))
		cs = append(cs, scored{valRef{konst: int16(k)}, h, s, nil})
	}
	sc.cs = cs
	return cs
}

// features returns the full feature vector of a candidate (for fitting
// the weights).
func (st *state) features(a *cArg, c *scored) [nFeat]float64 {
	var x [nFeat]float64
	if c.e != nil {
		lp := 0.0
		for _, tl := range a.tfs {
			if tl.tf == c.e.tf {
				lp = tl.lp
			}
		}
		x = staticX(a, c.e.seg, c.e.i, lp)
	} else {
		x[fConst], x[fConstP] = 1, a.consts[c.ref.konst].logP
	}
	st.dynX(a, c.e, c.h, &x)
	return x
}

func constString(v json.RawMessage) string {
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s
	}
	return string(v)
}

func dot(w, x []float64) float64 {
	var s float64
	for i := range w {
		s += w[i] * x[i]
	}
	return s
}

// toolProbs returns P(tool) for the state's next call.
func (st *state) toolProbs(dst []float64) []float64 {
	return st.toolProbsAt(dst, st.c.m.Lambda)
}

// toolProbsAt is toolProbs with the words weighed by lambda.
func (st *state) toolProbsAt(dst []float64, lambda float64) []float64 {
	c := st.c
	n := len(c.tools)
	dst = slices.Grow(dst[:0], n)[:n]
	if n == 0 {
		return dst
	}
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
	best := math.Inf(-1)
	for i := range c.tools {
		pAll := (all.c[i] + 0.5) / (all.n + 0.5*float64(n))
		pFlag := (fl.c[i] + 2*pAll) / (fl.n + 2)
		pCtx := pFlag
		if ctx != nil {
			pCtx = (ctx.c[i] + 2*pFlag) / (ctx.n + 2)
		}
		s := math.Log(pCtx)
		if lambda > 0 && st.wsum != nil {
			s += lambda * st.wsum[i]
		}
		dst[i] = s
		best = max(best, s)
	}
	var z float64
	for i := range dst {
		dst[i] = math.Exp(dst[i] - best)
		z += dst[i]
	}
	for i := range dst {
		dst[i] /= z
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
