package mine

import (
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
		if i := h.before(events); i > 0 {
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
// sets its counts.
func (m *worker) validate(c minedContext, pt *pattern.Pattern) {
	cp, err := m.c.Compile(pt)
	if err != nil {
		return
	}
	var pos []int
	var cands []pattern.Candidate
	var buf []byte
	for _, oc := range c.occs {
		h, p := m.history(c, oc, pos)
		pos = p
		cands, buf = cp.Eval(pos, h, len(pt.Hits), cands[:0], buf[:0])
		t := &m.events[h.target]
		if len(cands) == 0 {
			pt.ElseSupport++
			if t.ev.Tool == pt.Tool {
				pt.ElseHits++
			}
			continue
		}
		pt.Support++
		for _, cd := range cands {
			if m.calledSoon(h.target, cd.Hash) {
				pt.Soon[cd.Rank]++
			}
		}
		repeat := pt.List == nil && h.Used(cands[0].Hash)
		if repeat {
			pt.Repeats++
		}
		if t.ev.Tool != pt.Tool {
			continue
		}
		pt.ToolHits++
		if !t.argsOK {
			continue
		}
		if repeat && cands[0].Hash == t.hash {
			pt.RepeatHits++
		}
		for _, cd := range cands {
			if cd.Hash == t.hash {
				pt.Hits[cd.Rank]++
				break
			}
		}
	}
	pt.P = ratio(pt.Hits[0], pt.Support)
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
