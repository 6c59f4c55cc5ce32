package mine

import (
	"encoding/json"
	"slices"

	"github.com/ahead-dev/ahead/pattern"
)

// valueCache remembers what one-argument mappings evaluate to at their
// source events. Every candidate mapping is validated at every occurrence
// of every context the calls it explains follow, and a call follows many
// contexts (each that its recent calls match): validated after one context
// and after a longer one, a mapping reads the same event, so its values
// are worked out once. What a mapping evaluates to depends only on the
// events it reads (its source or list, and its base's own event): the
// cache is keyed by the mapping, without its argument's name and its
// references, and by those events.
//
// Memory: at most maxCachedValueBytes of values a worker (and their
// entries); over it, the cache starts afresh.
type valueCache struct {
	ids    map[string]int32 // mapping key → id
	got    map[valueKey][2]int32
	bytes  []byte  // the values, one after another
	ends   []int32 // value k ends at ends[k] in bytes
	vals   [][]byte
	adding int // len(ends) when the values being added started
}

type valueKey struct {
	id        int32
	src, base int32 // the events read (-1: none; base noBase: src's)
}

// noBase is valueKey.base for a mapping whose base, if any, is read from
// its source's event, not an event of its own.
const noBase = -2

// maxCachedValueBytes bounds a worker's valueCache (values and entries).
const maxCachedValueBytes = 32 << 20

// srcRef returns the reference to the event the mapping (or its list)
// reads.
func (ac *argCand) srcRef() *pattern.Ref {
	if ac.list != nil {
		return &ac.list.From
	}
	return ac.m.From
}

// id returns the id of the mapping's key, and false when the mapping is
// not cached (a constant reads no event).
func (c *valueCache) id(ac *argCand) (int32, bool) {
	if ac.m.Const != nil || ac.srcRef() == nil {
		return 0, false
	}
	k := struct {
		M pattern.Mapping
		L *pattern.ListSource
	}{M: ac.m}
	k.M.Arg, k.M.From = "", nil
	if b := k.M.Base; b != nil {
		bc := *b
		bc.From = nil
		k.M.Base = &bc
	}
	if ac.list != nil {
		l := *ac.list
		l.From = pattern.Ref{}
		k.L = &l
	}
	raw, err := json.Marshal(k)
	if err != nil {
		return 0, false
	}
	if c.ids == nil {
		c.ids = make(map[string]int32)
		c.got = make(map[valueKey][2]int32)
	}
	id, ok := c.ids[string(raw)]
	if !ok {
		id = int32(len(c.ids))
		c.ids[string(raw)] = id
	}
	return id, true
}

// get returns the values cached for key (valid until the next add or
// put).
func (c *valueCache) get(key valueKey) ([][]byte, bool) {
	r, ok := c.got[key]
	if !ok {
		return nil, false
	}
	return c.values(r), true
}

func (c *valueCache) values(r [2]int32) [][]byte {
	c.vals = c.vals[:0]
	start := int32(0)
	if r[0] > 0 {
		start = c.ends[r[0]-1]
	}
	for k := r[0]; k < r[1]; k++ {
		c.vals = append(c.vals, c.bytes[start:c.ends[k]])
		start = c.ends[k]
	}
	return c.vals
}

// add appends a value of the evaluation put next.
func (c *valueCache) add(v []byte) {
	if len(c.bytes)+len(v) > cap(c.bytes) {
		// Doubled: append grows a large slice by a quarter, which
		// filling the cache once cost five times its size in garbage.
		c.bytes = slices.Grow(c.bytes, max(len(v), min(cap(c.bytes), maxCachedValueBytes-len(c.bytes))))
	}
	if len(c.ends) == cap(c.ends) {
		c.ends = slices.Grow(c.ends, max(1, cap(c.ends)))
	}
	c.bytes = append(c.bytes, v...)
	c.ends = append(c.ends, int32(len(c.bytes)))
}

// put records the values added since the last put as key's, and returns
// them (valid until the next add or put).
func (c *valueCache) put(key valueKey) [][]byte {
	r := [2]int32{int32(c.adding), int32(len(c.ends))}
	vals := c.values(r)
	if len(c.bytes)+24*len(c.got) > maxCachedValueBytes {
		// Start afresh in the same arrays (the values returned are
		// overwritten by the next add): dropping them cost mining as
		// much garbage again as the cache holds.
		c.bytes, c.ends = c.bytes[:0], c.ends[:0]
		clear(c.got)
		c.adding = 0
		return vals
	}
	c.got[key] = r
	c.adding = len(c.ends)
	return vals
}
