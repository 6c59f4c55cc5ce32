package convo

import (
	"bytes"
	"cmp"
	"encoding/json"
	"math"
	"slices"
	"strconv"

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

// cand is a candidate value of one argument.
type cand struct {
	v     string // the JSON value
	x     [nFeat]float64
	score float64
	pos   int // recency key: larger is more recent
	text  string
}

// argCands returns the candidate values of argument a of tool t in the
// state's window, features set (scores not), deduplicated by value with
// the best-featured mention kept after scoring by w.
func (st *state) argCands(t *cTool, a *cArg, w []float64, dst []cand) []cand {
	dst = dst[:0]
	for si := len(st.segs) - 1; si >= 0 && len(dst) < maxMentions; si-- {
		seg := st.segs[si]
		if seg.byKey == nil {
			continue
		}
		// The segment's mentions, the most recent first.
		mentions := st.mentions[:0]
		for _, k := range a.keys {
			mentions = append(mentions, seg.byKey[k]...)
		}
		slices.Sort(mentions)
		st.mentions = mentions
		for mi := len(mentions) - 1; mi >= 0; mi-- {
			i := mentions[mi]
			{
				tk := seg.toks[i]
				for _, tl := range a.logTf {
					lp := tl.lp
					v, ok := apply(tl.tf, tk.text)
					if !ok {
						continue
					}
					var js string
					if a.number {
						f, err := strconv.ParseFloat(v, 64)
						if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
							continue
						}
						js = v
					} else {
						js = quote(v)
					}
					c := cand{v: js, pos: seg.n<<20 | int(i), text: tk.text}
					c.x[fTf] = lp
					c.x[fClass] = a.logCls[tk.bits]
					c.x[fShape] = a.shpMiss
					if l, ok := a.logShp[tk.shape]; ok {
						c.x[fShape] = l
					}
					c.x[fLen] = a.lenMiss
					if l, ok := a.logLen[lengthBucket(len(tk.text))]; ok {
						c.x[fLen] = l
					}
					var near float64
					seg.near(i, func(w int32) { near += a.near[w] })
					c.x[fNear] = max(-6, min(6, near))
					switch seg.role {
					case roleUser:
						c.x[fUser] = 1
					case roleSystem:
						c.x[fSystem] = 1
					case roleAssistant:
						c.x[fAssist] = 1
					case roleCall:
						c.x[fCall] = 1
						if seg.args[i] == a.a.Name {
							c.x[fSameName] = 1
						}
					}
					if seg == st.userSeg {
						c.x[fLatest] = 1
					}
					c.x[fFound] = a.logFound
					if seg.n > st.lastCall {
						c.x[fSince] = 1
					}
					if st.spoke {
						c.x[fSpoke] = 1
					}
					if st.used[v] {
						c.x[fUsed] = 1
						if st.usedSame[t.t.Name+"\x00"+a.a.Name+"\x00"+v] {
							c.x[fUsedSame] = 1
						}
						if st.prevTool == t.t.Name && st.prevArgs[a.a.Name] == v {
							c.x[fRepeat] = 1
						}
					}
					dst = append(dst, c)
				}
			}
		}
	}
	// Recency rank among the distinct tokens (dst is the most recent
	// first).
	if st.seen == nil {
		st.seen = make(map[string]int)
	}
	clear(st.seen)
	for i := range dst {
		r, ok := st.seen[dst[i].text]
		if !ok {
			r = len(st.seen)
			st.seen[dst[i].text] = r
		}
		dst[i].x[fRank] = math.Log1p(float64(r))
	}
	for _, k := range a.consts {
		c := cand{v: string(k.v)}
		c.x[fConst], c.x[fConstP] = 1, k.logP
		if cs := constString(k.v); st.used[cs] && st.usedSame[t.t.Name+"\x00"+a.a.Name+"\x00"+cs] {
			c.x[fUsedSame] = 1
			if st.prevTool == t.t.Name && st.prevArgs[a.a.Name] == cs {
				c.x[fRepeat] = 1
			}
		}
		dst = append(dst, c)
	}
	for i := range dst {
		dst[i].score = dot(w, dst[i].x[:])
	}
	// One per value: the best scored mention.
	clear(st.seen)
	n := 0
	for i := range dst {
		if j, ok := st.seen[dst[i].v]; ok {
			if dst[i].score > dst[j].score {
				dst[j] = dst[i]
			}
			continue
		}
		st.seen[dst[i].v] = n
		dst[n] = dst[i]
		n++
	}
	return dst[:n]
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
	ctx := c.seqCtx[st.prev+"|"+strconv.Itoa(flag)]
	fl := &c.seqFlag[flag]
	all := &c.seqAll
	lambda := c.m.Lambda
	best := math.Inf(-1)
	for i, t := range c.tools {
		pAll := (all.c[i] + 0.5) / (all.n + 0.5*float64(n))
		pFlag := (fl.c[i] + 2*pAll) / (fl.n + 2)
		var pCtx float64
		if ctx.c != nil {
			pCtx = (ctx.c[i] + 2*pFlag) / (ctx.n + 2)
		} else {
			pCtx = pFlag
		}
		s := math.Log(pCtx)
		if lambda > 0 {
			var ws float64
			for _, w := range st.toolWords {
				ws += t.logW[w]
			}
			s += lambda * ws
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
	order []int
	cands [][]cand
	raws  []rawPred
	buf   bytes.Buffer
}

type rawPred struct {
	tool string
	args string
	raw  float64
}

const (
	// maxMentions bounds the mentions an argument's candidates are read
	// from, the most recent first.
	maxMentions = 48
	maxTools    = 6
	maxValues   = 3
	minRaw      = 1e-4
)

// predict returns the state's ranked predictions (raw scores in P when
// raw is set, else calibrated).
func (st *state) predict(sc *scratch, max int, raw bool) []predict.Prediction {
	c := st.c
	sc.probs = st.toolProbs(sc.probs)
	sc.order = sc.order[:0]
	for i := range c.tools {
		sc.order = append(sc.order, i)
	}
	slices.SortStableFunc(sc.order, func(a, b int) int { return cmp.Compare(sc.probs[b], sc.probs[a]) })
	sc.raws = sc.raws[:0]
	for _, ti := range sc.order[:min(maxTools, len(sc.order))] {
		pt := sc.probs[ti]
		if pt < 0.01 {
			break
		}
		t := c.tools[ti]
		for _, ks := range t.keySets {
			st.keySetPreds(sc, t, ks, math.Log(pt)+ks.logP)
		}
	}
	slices.SortStableFunc(sc.raws, func(a, b rawPred) int { return cmp.Compare(b.raw, a.raw) })
	// One per call: the same args may come from two key sets' orders.
	out := make([]predict.Prediction, 0, min(max, len(sc.raws)))
	for _, r := range sc.raws {
		if len(out) == max {
			break
		}
		dup := false
		for _, o := range out {
			if o.Tool == r.tool && string(o.Args) == r.args {
				dup = true
				break
			}
		}
		if dup {
			continue
		}
		p := r.raw
		if !raw {
			p = c.calibrate(st.stratum(), p)
		}
		out = append(out, predict.Prediction{Tool: r.tool, Args: json.RawMessage(r.args), P: p, Origin: predict.OriginMessage})
	}
	if !raw {
		// Calibration is monotone but flat in steps; keep the raw order
		// within a step.
		slices.SortStableFunc(out, func(a, b predict.Prediction) int { return cmp.Compare(b.P, a.P) })
	}
	return out
}

// keySetPreds adds the calls of tool t with key set ks whose joint score
// exceeds minRaw.
func (st *state) keySetPreds(sc *scratch, t *cTool, ks cKeySet, base float64) {
	c := st.c
	k := len(ks.keys)
	for len(sc.cands) < k {
		sc.cands = append(sc.cands, nil)
	}
	// Per argument: the top values with their log probability (a
	// softmax against "not found", whose score is 0).
	type val struct {
		v  string
		lp float64
	}
	var vals [8][maxValues]val
	var nv [8]int
	if k > len(vals) {
		return
	}
	for ai, name := range ks.keys {
		a := t.args[name]
		if a == nil {
			return
		}
		cs := st.argCands(t, a, c.w, sc.cands[ai])
		sc.cands[ai] = cs
		if len(cs) == 0 {
			return
		}
		z := 1.0 // exp(0) for "not found"
		for _, x := range cs {
			z += math.Exp(x.score)
		}
		slices.SortFunc(cs, func(x, y cand) int { return cmp.Compare(y.score, x.score) })
		for j := 0; j < len(cs) && j < maxValues; j++ {
			vals[ai][j] = val{cs[j].v, cs[j].score - math.Log(z)}
			nv[ai]++
		}
	}
	// Enumerate the combinations (at most maxValues^k, pruned).
	var idx [8]int
	for {
		lp := base
		for ai := 0; ai < k; ai++ {
			lp += vals[ai][idx[ai]].lp
		}
		if p := math.Exp(lp); p >= minRaw {
			sc.buf.Reset()
			sc.buf.WriteByte('{')
			for ai := 0; ai < k; ai++ {
				if ai > 0 {
					sc.buf.WriteByte(',')
				}
				name, _ := json.Marshal(ks.keys[ai])
				sc.buf.Write(name)
				sc.buf.WriteByte(':')
				sc.buf.WriteString(vals[ai][idx[ai]].v)
			}
			sc.buf.WriteByte('}')
			sc.raws = append(sc.raws, rawPred{tool: t.t.Name, args: sc.buf.String(), raw: p})
		}
		ai := 0
		for ; ai < k; ai++ {
			idx[ai]++
			if idx[ai] < nv[ai] {
				break
			}
			idx[ai] = 0
		}
		if ai == k {
			return
		}
	}
}

// stratum is the calibration map that applies: 1 if the user spoke since
// the previous call.
func (st *state) stratum() int {
	if st.spoke {
		return 1
	}
	return 0
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
