package convo

import (
	"encoding/json"
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
	fInitial         // the mention is a capitalised word beginning a sentence
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
	if tk.initial {
		x[fInitial] = 1
	}
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

func staticBase(a *cArg, w []float64, pre, lp float64, initial bool) float64 {
	s := pre + w[fTf]*lp
	s += w[fFound] * a.logFound
	if initial {
		s += w[fInitial]
	}
	return s
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
				buf = append(buf, entry{seg: seg, i: bi, tf: tl.tf, h: h, th: seg.toks[bi].h, base: staticBase(a, w, pre, tl.lp, seg.toks[bi].initial)})
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
