package convo

import (
	"hash/maphash"

	"github.com/ahead-dev/ahead/trace"
)

// Issue 24: the mining replay looked values up in a map from each token's
// normalised text to its mentions (map[string][]tokRef): a string, a map
// entry and a growing slice per distinct token, every session of every
// fit, a fifth of the conversation model's allocations and a tenth of its
// time, most of it for tokens no argument ever names. mineIndex keeps the
// same lists as chains through one array of mentions, found by a hash of
// the key in an open-addressing table; both arrays are pointer-free and
// reused from session to session of a replay (reset in time proportional
// to what the session put in them). A look-up checks each mention's key
// against the one asked for, so that a collision of hashes changes
// nothing: the mentions found are the map's, in another order (find takes
// the most recent, which no order changes). And it indexes only the keys
// that the session's calls may look up (wantSession): a tenth of its
// tokens.
//
// Bound: 12 bytes per token of the session being replayed (two mentions
// for a token with a number inside) plus 12 bytes per table slot (at most
// 4 per distinct key) and a pointer per segment, and 12 bytes per slot of
// the wanted keys (at most 8 per scalar argument value of its calls); the largest session's
// are kept for the next, one mineIndex per replay running (three when
// Mine fits the halves beside the whole).

// mineIndex is the mining replay's tokens by normalised text (normKey),
// and by the number inside (tfDigits) under that number's text after a
// 0 byte.
type mineIndex struct {
	// want holds the hashes of the keys find may look up in this
	// session (wantSession): the tokens of other keys are not indexed.
	want  hset
	keys  []uint64
	heads []int32 // first mention of the slot's key, or -1 (empty slot)
	used  []int32 // slots in use
	ments []mention
	segs  []*segment // the segments indexed, by mention.seg
	buf   []byte     // a key's bytes
}

// mention is a token in a chain of mentions of one key hash.
type mention struct {
	seg, i int32
	next   int32 // the next mention of the chain, or -1
}

// wantSession makes the index keep the tokens of the keys that find
// looks up for the calls of session s: each scalar argument value's
// normKey, its text after a 0 byte (the number inside a token), and the
// dates a day before and after it. lex may be nil.
func (ix *mineIndex) wantSession(s trace.Session, lex *lexicon) {
	var vals []string
	for _, ev := range s.Events {
		ca := lex.call(ev.Args)
		if ca == nil || ca.mined == nil {
			ca = parseCall(ev.Args, true)
		}
		if !ca.ok {
			continue
		}
		for i := range ca.mined.vals {
			if mv := &ca.mined.vals[i]; mv.scalarOK && mv.v != "" && len(mv.v) <= maxTokenLen {
				vals = append(vals, mv.v)
			}
		}
	}
	ix.want.reset(4 * len(vals))
	for _, v := range vals {
		ix.wantKey(normKey(v))
		ix.wantKey("\x00" + v)
		for _, d := range [...]int{-1, 1} {
			if w, ok := shiftDate(v, d); ok {
				ix.wantKey(w)
			}
		}
	}
}

func (ix *mineIndex) wantKey(k string) {
	if p, ok := ix.want.slot(maphash.String(seed, k)); !ok {
		*p = 0
	}
}

// has reports whether h is in s.
func (s *hset) has(h uint64) bool {
	mask := uint64(len(s.keys) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		if s.vals[i] < 0 {
			return false
		}
		if s.keys[i] == h {
			return true
		}
	}
}

// reset empties the index for the next session.
func (ix *mineIndex) reset() {
	for _, s := range ix.used {
		ix.heads[s] = -1
	}
	ix.used = ix.used[:0]
	ix.ments = ix.ments[:0]
	clear(ix.segs)
	ix.segs = ix.segs[:0]
}

// add indexes the tokens of seg.
func (ix *mineIndex) add(seg *segment) {
	si := int32(len(ix.segs))
	ix.segs = append(ix.segs, seg)
	if len(ix.want.used) == 0 {
		return
	}
	for i := range seg.toks {
		text := seg.str(int32(i))
		ix.buf = appendNormKey(ix.buf[:0], text)
		if h := maphash.Bytes(seed, ix.buf); ix.want.has(h) {
			ix.insert(h, si, int32(i))
		}
		if seg.toks[i].bits&digitBit == 0 {
			continue // no number inside
		}
		if d, ok := apply(tfDigits, text); ok {
			ix.buf = append(append(ix.buf[:0], 0), d...)
			if h := maphash.Bytes(seed, ix.buf); ix.want.has(h) {
				ix.insert(h, si, int32(i))
			}
		}
	}
}

func (ix *mineIndex) insert(h uint64, seg, i int32) {
	if 2*(len(ix.used)+1) > len(ix.keys) {
		ix.grow()
	}
	mask := uint64(len(ix.keys) - 1)
	s := h & mask
	for ix.heads[s] >= 0 && ix.keys[s] != h {
		s = (s + 1) & mask
	}
	if ix.heads[s] < 0 {
		ix.keys[s] = h
		ix.used = append(ix.used, int32(s))
	}
	ix.ments = append(ix.ments, mention{seg, i, ix.heads[s]})
	ix.heads[s] = int32(len(ix.ments) - 1)
}

// grow doubles the table (at least 1024 slots) and puts the keys in use
// back in it.
func (ix *mineIndex) grow() {
	keys, heads, used := ix.keys, ix.heads, ix.used
	n := max(1024, 2*len(keys))
	ix.keys = make([]uint64, n)
	ix.heads = make([]int32, n)
	for s := range ix.heads {
		ix.heads[s] = -1
	}
	ix.used = make([]int32, 0, n/2)
	mask := uint64(n - 1)
	for _, old := range used {
		h := keys[old]
		s := h & mask
		for ix.heads[s] >= 0 {
			s = (s + 1) & mask
		}
		ix.keys[s], ix.heads[s] = h, heads[old]
		ix.used = append(ix.used, int32(s))
	}
}

// appendRefs appends the mentions of key (a token's normKey, or 0 and
// the number inside it) to dst.
func (ix *mineIndex) appendRefs(dst []tokRef, key string) []tokRef {
	if len(ix.keys) == 0 {
		return dst
	}
	h := maphash.String(seed, key)
	mask := uint64(len(ix.keys) - 1)
	s := h & mask
	for ix.heads[s] >= 0 && ix.keys[s] != h {
		s = (s + 1) & mask
	}
	for m := ix.heads[s]; m >= 0; m = ix.ments[m].next {
		r := tokRef{ix.segs[ix.ments[m].seg], ix.ments[m].i}
		if ix.keyed(r.seg.str(r.i), key) {
			dst = append(dst, r)
		}
	}
	return dst
}

// keyed reports whether token text is indexed under key.
func (ix *mineIndex) keyed(text, key string) bool {
	ix.buf = appendNormKey(ix.buf[:0], text)
	if string(ix.buf) == key {
		return true
	}
	d, ok := apply(tfDigits, text)
	return ok && len(key) == len(d)+1 && key[0] == 0 && key[1:] == d
}

// digitBit is the class bit of a digit.
var digitBit = classBitTable['0']

// appendNormKey appends normKey(t) to dst, without a string for the
// ASCII tokens that nearly all are.
func appendNormKey(dst []byte, t string) []byte {
	start := len(dst)
	if len(t) > 0 && t[0] == '#' {
		t = t[1:]
	}
	for i := 0; i < len(t); i++ {
		c := t[i]
		if c >= 0x80 {
			return append(dst[:start], normKey("#"+t)...)
		}
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		dst = append(dst, c)
	}
	return dst
}
