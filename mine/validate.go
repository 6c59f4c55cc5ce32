package mine

import (
	"encoding/json"
	"math/bits"
	"slices"

	"github.com/ahead-dev/ahead/pattern"
)

// mineHistory is the History of one occurrence during mining.
type mineHistory struct {
	m      *worker
	target int
	sess   int32
}

func (h *mineHistory) At(e int) *pattern.Payload {
	if e < 0 {
		return nil
	}
	return &h.m.pays[e]
}

// before returns how many of the ascending event indices come before the
// target.
func (h *mineHistory) before(events []int32) int {
	i, _ := slices.BinarySearch(events, int32(h.target))
	return i
}

func (h *mineHistory) Last(sig int32) *pattern.Payload {
	events := h.m.bySig[h.sess][sig]
	if i := h.before(events); i > 0 {
		return &h.m.pays[events[i-1]]
	}
	return nil
}

func (h *mineHistory) Recent(sig int32, i int) *pattern.Payload {
	events := h.m.bySig[h.sess][sig]
	n := h.before(events)
	if i < 0 || i >= n || i >= pattern.MaxEvery {
		return nil
	}
	return &h.m.pays[events[n-1-i]]
}

// eventOf returns the event a mapping's reference names at this
// occurrence (sig: the reference's signature id, 0 for a context element),
// or -1.
func (h *mineHistory) eventOf(r *pattern.Ref, sig int32, pos []int) int32 {
	if sig > 0 {
		events := h.m.bySig[h.sess][sig]
		if i := h.before(events) - r.Nth; i > 0 {
			return events[i-1]
		}
		return -1
	}
	if r.Ctx < len(pos) {
		return int32(pos[r.Ctx])
	}
	return -1
}

// Used looks as far back as the predictor remembers calls (maxUsedCalls).
func (h *mineHistory) Used(call uint64) bool {
	events := h.m.byCall[h.sess][call]
	i := h.before(events)
	return i > 0 && h.target-int(events[i-1]) <= maxUsedCalls
}

// UsedTool reports whether Used may be true of any call to tool: the
// session called it within as many calls back.
func (h *mineHistory) UsedTool(tool string) bool {
	events := h.m.byTool[h.sess][tool]
	i := h.before(events)
	return i > 0 && h.target-int(events[i-1]) <= maxUsedCalls
}

var _ pattern.ToolHistory = (*mineHistory)(nil)

// maxUsedCalls is how far back "not called yet" looks, as the predictor's
// default memory of calls (pattern.OnlineOptions.MaxCalls).
const maxUsedCalls = 1024

// history returns the History of an occurrence and its context positions
// (event indices, as At takes them).
func (m *worker) history(c minedContext, oc occurrence, pos []int) (*mineHistory, []int) {
	w := &m.wins[oc.win]
	t := int(w.target)
	pos = pos[:0]
	for j := range c.ids {
		pos = append(pos, int(w.events[oc.emb[j]]))
	}
	// One History a worker, reused: one per occurrence was a good part of
	// mining's garbage.
	m.h = mineHistory{m: m, target: t, sess: m.events[t].sess}
	return &m.h, pos
}

// validateArg counts, over all occurrences of the context, where the
// mapping evaluates and where it gives the next call's argument (any list
// element counts).
func (m *worker) validateArg(c minedContext, tool, arg string, ac *argCand) {
	pt := pattern.Pattern{Context: make([]pattern.Signature, len(c.ids)), Tool: tool, Exact: true, List: ac.list, Args: []pattern.Mapping{ac.m}, Hits: []int{0}}
	cp, err := m.c.Compile(&pt)
	if err != nil {
		return
	}
	id, cached := m.vals.id(ac)
	var pos []int
	var buf []byte
	for _, oc := range c.occs {
		h, p := m.history(c, oc, pos)
		pos = p
		t := &m.events[h.target]
		var want []byte
		if t.ev.Tool == tool {
			for _, a := range t.args {
				if a.name == arg {
					want = a.value
				}
			}
		}
		evaluated, matched := false, false
		if cached {
			// What the mapping evaluates to here depends only on the
			// events it reads.
			key := valueKey{id: id, src: h.eventOf(ac.srcRef(), ac.srcSig, pos), base: noBase}
			if ac.m.Base != nil && ac.m.Base.From != nil {
				key.base = h.eventOf(ac.m.Base.From, ac.baseSig, pos)
			}
			vals, ok := m.vals.get(key)
			if !ok {
				buf = cp.EachValue(pos, h, buf, func(val []byte) bool {
					m.vals.add(val)
					return true
				})
				vals = m.vals.put(key)
			}
			evaluated = len(vals) > 0
			matched = want != nil && slices.ContainsFunc(vals, func(v []byte) bool { return string(v) == string(want) })
		} else {
			buf = cp.EachValue(pos, h, buf, func(val []byte) bool {
				evaluated = true
				if want != nil && string(val) == string(want) {
					matched = true
					return false
				}
				return true
			})
		}
		if evaluated {
			ac.evals++
		}
		if matched {
			ac.matches++
			if se := t.sess; ac.sessions == 0 || se != ac.lastSess {
				ac.sessions++
				ac.lastSess = se
			}
			if ac.values < 2 {
				switch {
				case ac.values == 0:
					ac.first = string(want)
					ac.values = 1
				case ac.first != string(want):
					ac.values = 2
				}
			}
		}
	}
}

// validate evaluates a full pattern at every occurrence of its context and
// sets its counts. What the evaluation of a list pattern counts at an
// occurrence is remembered across contexts (outcomeCache).
func (m *worker) validate(c minedContext, pt *pattern.Pattern) {
	cp, err := m.c.Compile(pt)
	if err != nil {
		return
	}
	// Only a list's outcomes are cached: a single call costs less to
	// evaluate again than to look up among millions of outcomes (a fifth
	// of the look-ups found one).
	var id int32
	var refs []int
	cached := false
	if pt.List != nil {
		id, refs, cached = m.outs.body(pt, m.refs)
		m.refs = refs
	}
	var pos []int
	for _, oc := range c.occs {
		h, p := m.history(c, oc, pos)
		pos = p
		var r outcome
		if cached {
			key := m.outs.makeKey(id, h.target, refs, pos)
			var ok bool
			if r, ok = m.outs.get(key); !ok {
				r = m.evaluate(cp, pt, h, pos)
				m.outs.put(key, r)
			}
		} else {
			r = m.evaluate(cp, pt, h, pos)
		}
		t := &m.events[h.target]
		if !r.evaluated {
			pt.ElseSupport++
			if t.ev.Tool == pt.Tool {
				pt.ElseHits++
			}
			continue
		}
		pt.Support++
		for s := r.soon; s != 0; s &= s - 1 {
			pt.Soon[bits.TrailingZeros64(s)]++
		}
		if r.repeat {
			pt.Repeats++
		}
		if t.ev.Tool != pt.Tool {
			continue
		}
		pt.ToolHits++
		if r.repeatHit {
			pt.RepeatHits++
		}
		if r.hit >= 0 {
			pt.Hits[r.hit]++
		}
	}
	pt.P = ratio(pt.Hits[0], pt.Support)
}

// evaluate evaluates a compiled pattern at an occurrence (h, pos) and
// returns what validate counts of it.
func (m *worker) evaluate(cp *pattern.Compiled, pt *pattern.Pattern, h *mineHistory, pos []int) outcome {
	r := outcome{hit: -1}
	m.evCands, m.buf = cp.Eval(pos, h, len(pt.Hits), m.evCands[:0], m.buf[:0])
	if len(m.evCands) == 0 {
		return r
	}
	r.evaluated = true
	for _, cd := range m.evCands {
		if m.calledSoon(h.target, cd.Hash) {
			r.soon |= 1 << cd.Rank
		}
	}
	r.repeat = pt.List == nil && h.Used(m.evCands[0].Hash)
	t := &m.events[h.target]
	if t.ev.Tool != pt.Tool || !t.argsOK {
		return r
	}
	r.repeatHit = r.repeat && m.evCands[0].Hash == t.hash
	for _, cd := range m.evCands {
		if cd.Hash == t.hash {
			r.hit = int8(cd.Rank)
			break
		}
	}
	return r
}

// calledSoon reports whether the call with hash is made at event target or
// within the Horizon-1 events after it, in the same session.
func (m *worker) calledSoon(target int, hash uint64) bool {
	me := &m.events[target]
	for _, e := range m.byCall[me.sess][hash] {
		if d := int(e) - target; d >= 0 && d < m.o.Horizon {
			return true
		}
	}
	return false
}

// contextMemo keeps the counts validated after the context being mined
// (worker.patterns), dropped when the next context starts. The kinds of a
// tool (kindPatterns) take their candidates among the tool's calls after
// the same context, and validation counts over all the context's
// occurrences whichever calls a candidate was found in: the mappings and
// patterns of a kind are mostly the tool's, and their counts are the
// same.
//
// Memory: an entry (a key of about 200 bytes and the counts) per mapping
// and per pattern validated after one context, at most maxArgCands+1 a
// tool's argument and 3+Alternatives×args+lists patterns a tool and kind.
type contextMemo struct {
	args map[string]argCounts       // (tool, mapping, list) → validateArg's counts
	pats map[string]pattern.Pattern // (tool, pattern.MappingKey) → validate's counts
}

// argCounts is what validateArg counts for a mapping.
type argCounts struct {
	matches, evals, values, sessions int
	first                            string
	lastSess                         int32
}

func (mm *contextMemo) reset() {
	if mm.args == nil {
		mm.args = make(map[string]argCounts)
		mm.pats = make(map[string]pattern.Pattern)
	}
	clear(mm.args)
	clear(mm.pats)
}

// validateArgMemo is validateArg, memoised after the context.
func (m *worker) validateArgMemo(c minedContext, tool, arg string, ac *argCand) {
	raw, err := json.Marshal(struct {
		T string
		M pattern.Mapping
		L *pattern.ListSource
	}{tool, ac.m, ac.list})
	if err != nil {
		m.validateArg(c, tool, arg, ac)
		return
	}
	if r, ok := m.memo.args[string(raw)]; ok {
		ac.matches, ac.evals, ac.values, ac.sessions, ac.first, ac.lastSess = r.matches, r.evals, r.values, r.sessions, r.first, r.lastSess
		return
	}
	m.validateArg(c, tool, arg, ac)
	m.memo.args[string(raw)] = argCounts{ac.matches, ac.evals, ac.values, ac.sessions, ac.first, ac.lastSess}
}

// validateMemo is validate, memoised after the context; key is the
// pattern's MappingKey.
func (m *worker) validateMemo(c minedContext, pt *pattern.Pattern, key string) {
	k := pt.Tool + "\x00" + key
	if r, ok := m.memo.pats[k]; ok {
		pt.Support, pt.ElseSupport, pt.ElseHits, pt.ToolHits = r.Support, r.ElseSupport, r.ElseHits, r.ToolHits
		pt.Repeats, pt.RepeatHits, pt.P = r.Repeats, r.RepeatHits, r.P
		copy(pt.Hits, r.Hits)
		copy(pt.Soon, r.Soon)
		return
	}
	m.validate(c, pt)
	r := *pt
	r.Hits, r.Soon = slices.Clone(pt.Hits), slices.Clone(pt.Soon)
	m.memo.pats[k] = r
}
