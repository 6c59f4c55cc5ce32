package mine

import (
	"encoding/json"

	"github.com/ahead-dev/ahead/pattern"
)

// outcomeCache remembers what a list pattern's evaluation counts at an
// occurrence, across contexts. A call follows many contexts (each that
// its recent calls match), and after each the same mappings are assembled
// into the same patterns, naming the same events by other context
// positions: what the pattern predicts there depends only on the events
// its references name and on the call (its session's calls so far, the
// recent events of a signature). The cache is keyed by the pattern with
// its context positions left out (its body), the occurrence's call, and
// the events the context positions name.
//
// Memory: at most maxOutcomeBytes of keys and entries a worker; over it,
// the outcomes start afresh, and the bodies' numbers too when a new body
// finds the cache full (never during a pattern's validation, which holds
// its body's number).
type outcomeCache struct {
	bodies map[string]int32 // pattern body → id
	got    map[outcomeKey]outcome
	// An estimate of the memory of bodies and of got.
	bodyBytes, gotBytes int
}

// outcomeKey is a body at an occurrence: its id, the occurrence's call
// (target), and the events its references to context positions name
// (events[:n], -1 for none). Numbers, not a string: a string key was
// hashed whole at every look-up and allocated at every entry.
type outcomeKey struct {
	id, target int32
	n          int32
	events     [maxOutcomeRefs]int32
}

// maxOutcomeRefs is the most references to context positions a pattern
// whose outcomes are cached may have (one per argument, its list and its
// bases): the others are evaluated at every occurrence.
const maxOutcomeRefs = 6

// outcome is what validate counts of a pattern at one occurrence, besides
// what depends on the call alone (its tool).
type outcome struct {
	soon      uint64 // the ranks of the candidates called soon
	hit       int8   // the rank of the candidate called next, -1 for none
	evaluated bool   // the mappings evaluate (else the occurrence is Else)
	repeat    bool   // the one candidate was called already
	repeatHit bool   // and is called again next
}

// maxOutcomeBytes bounds a worker's outcomeCache.
const maxOutcomeBytes = 16 << 20

// outcomeEntryBytes estimates an entry's memory: the map's slot (key,
// value, control byte, load factor).
const outcomeEntryBytes = 96

// body returns the id of a pattern's body (the pattern without its
// context and the positions its references name), and the references
// that name context positions, in order; ok is false when the pattern
// cannot be cached.
func (oc *outcomeCache) body(pt *pattern.Pattern, refs []int) (int32, []int, bool) {
	refs = refs[:0]
	b := struct {
		T string
		L *pattern.ListSource
		A []pattern.Mapping
	}{T: pt.Tool, A: make([]pattern.Mapping, len(pt.Args))}
	strip := func(r *pattern.Ref) *pattern.Ref {
		if r == nil || r.Sig != nil {
			return r
		}
		refs = append(refs, r.Ctx)
		return &pattern.Ref{}
	}
	if pt.List != nil {
		l := *pt.List
		l.From = *strip(&l.From)
		b.L = &l
	}
	for i, mp := range pt.Args {
		mp.From = strip(mp.From)
		if mp.Base != nil {
			bc := *mp.Base
			bc.From = strip(bc.From)
			mp.Base = &bc
		}
		b.A[i] = mp
	}
	raw, err := json.Marshal(b)
	if err != nil || len(refs) > maxOutcomeRefs {
		return 0, refs, false
	}
	if oc.bodies == nil {
		oc.bodies = make(map[string]int32)
		oc.got = make(map[outcomeKey]outcome)
	}
	id, ok := oc.bodies[string(raw)]
	if !ok {
		n := len(raw) + outcomeEntryBytes
		if oc.bodyBytes+oc.gotBytes+n > maxOutcomeBytes {
			clear(oc.bodies)
			clear(oc.got)
			oc.bodyBytes, oc.gotBytes = 0, 0
		}
		oc.bodyBytes += n
		id = int32(len(oc.bodies))
		oc.bodies[string(raw)] = id
	}
	return id, refs, true
}

// makeKey builds the key of a body at an occurrence: the call (target)
// and the events the context positions refs name (pos: the occurrence's
// context positions; at most maxOutcomeRefs).
func (oc *outcomeCache) makeKey(id int32, target int, refs, pos []int) outcomeKey {
	k := outcomeKey{id: id, target: int32(target), n: int32(len(refs))}
	for i, j := range refs {
		e := -1
		if j < len(pos) {
			e = pos[j]
		}
		k.events[i] = int32(e)
	}
	return k
}

func (oc *outcomeCache) get(key outcomeKey) (outcome, bool) {
	r, ok := oc.got[key]
	return r, ok
}

func (oc *outcomeCache) put(key outcomeKey, r outcome) {
	if oc.bodyBytes+oc.gotBytes+outcomeEntryBytes > maxOutcomeBytes {
		clear(oc.got)
		oc.gotBytes = 0
	}
	oc.gotBytes += outcomeEntryBytes
	oc.got[key] = r
}
