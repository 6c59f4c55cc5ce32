package mine

// keyTable maps the rawKeys of one argCandidates call to their index in
// its counts. A Go map served, cleared for each call (clearing costs the
// map's size, whatever is left in it) and dropped past a size: the calls
// that found many keys each grew a new map, a tenth of mining's garbage.
// The table is open-addressed and stamped with a generation: reset costs
// nothing, and the slots are reused from call to call.
//
// Memory: 32 bytes a slot, at most twice the keys of the largest call
// since the last reset that found the table over maxKeySlots.
type keyTable struct {
	slots []keySlot
	gen   uint32 // the stamp of the slots in use
	n     int    // keys in use
}

type keySlot struct {
	key rawKey
	val int32
	gen uint32
}

// maxKeySlots bounds the slots a table keeps from one call to the next.
const maxKeySlots = 1 << 18

// reset empties the table.
func (t *keyTable) reset() {
	if len(t.slots) > maxKeySlots {
		t.slots = nil
	}
	t.n = 0
	if t.gen++; t.gen == 0 { // wrapped: old stamps would look current
		clear(t.slots)
		t.gen = 1
	}
}

func (k rawKey) hash() uint64 {
	h := uint64(uint32(k.sig))*0x9e3779b97f4a7c15 ^ uint64(k.ctx)*0xc2b2ae3d27d4eb4f ^ uint64(uint32(k.body))*0x165667b19e3779f9
	h ^= h >> 31
	h *= 0xbf58476d1ce4e5b9
	return h ^ h>>29
}

// get returns key's value, if it has one.
func (t *keyTable) get(key rawKey) (int32, bool) {
	if len(t.slots) == 0 {
		return 0, false
	}
	mask := uint64(len(t.slots) - 1)
	for i := key.hash() & mask; ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.gen != t.gen {
			return 0, false
		}
		if s.key == key {
			return s.val, true
		}
	}
}

// put sets the value of a key not in the table.
func (t *keyTable) put(key rawKey, val int32) {
	if 2*(t.n+1) > len(t.slots) {
		t.grow()
	}
	mask := uint64(len(t.slots) - 1)
	i := key.hash() & mask
	for t.slots[i].gen == t.gen {
		i = (i + 1) & mask
	}
	t.slots[i] = keySlot{key: key, val: val, gen: t.gen}
	t.n++
}

func (t *keyTable) grow() {
	old, gen := t.slots, t.gen
	t.slots = make([]keySlot, max(2*len(old), 256))
	if t.gen == 0 {
		t.gen = 1
	}
	t.n = 0
	for i := range old {
		if old[i].gen == gen && gen != 0 {
			t.put(old[i].key, old[i].val)
		}
	}
}
