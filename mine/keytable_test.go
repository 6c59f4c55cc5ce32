package mine

import (
	"math/rand/v2"
	"testing"
)

// TestKeyTable checks the table against a map over calls of many sizes,
// through growth, resets and a wrapped generation.
func TestKeyTable(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var kt keyTable
	for call := range 200 {
		if call == 150 {
			kt.gen = ^uint32(0) // the next reset wraps
		}
		kt.reset()
		want := make(map[rawKey]int32)
		n := r.IntN(3000)
		if call%50 == 0 {
			n = maxKeySlots/2 + 1000 // past the bound: dropped at the next reset
		}
		for i := range n {
			k := rawKey{sig: int32(r.IntN(50)) - 1, ctx: r.IntN(5) - 1, body: int32(r.IntN(2000))}
			got, ok := kt.get(k)
			w, wok := want[k]
			if ok != wok || got != w {
				t.Fatalf("call %d: get(%v) = %d, %v; want %d, %v", call, k, got, ok, w, wok)
			}
			if !ok {
				kt.put(k, int32(i))
				want[k] = int32(i)
			}
		}
		if kt.n != len(want) {
			t.Fatalf("call %d: %d keys, want %d", call, kt.n, len(want))
		}
	}
	// Past the bound, the slots are dropped at the next reset.
	kt.reset()
	for i := range maxKeySlots/2 + 1 {
		kt.put(rawKey{body: int32(i)}, int32(i))
	}
	if len(kt.slots) <= maxKeySlots {
		t.Fatalf("%d slots for %d keys", len(kt.slots), kt.n)
	}
	kt.reset()
	if kt.slots != nil {
		t.Errorf("reset kept %d slots, over the bound %d", len(kt.slots), maxKeySlots)
	}
}
