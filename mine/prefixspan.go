package mine

import (
	"slices"

	"github.com/ahead-dev/ahead/pattern"
)

// Phase I of mining: the frequent contexts.
//
// Every call has a window: the signatures of the up to k calls before it,
// and the session start if that lies within reach (a session's first call
// has the session start alone, whose patterns predict before any call). Written most recent first, the window
// of the call at i is sig[i-1], sig[i-2], …, sig[i-k] (then ^). A context
// is a subsequence of a window that starts with its first (most recent)
// item. PrefixSpan grows such subsequences item by item over projected
// windows; because the first item is pinned, projection by the first item
// is a plain grouping, and each further item is matched at its leftmost
// position — the most recent event — which is the embedding the predictor
// uses too.

// window is the reversed window of one target call.
type window struct {
	target int32 // index of the target event in the miner's flat event list
	n      uint8
	items  [pattern.MaxContextLimit + 1]int32 // signature ids, most recent first
	events [pattern.MaxContextLimit + 1]int32 // their event indices (-1 for ^)
}

// occurrence is a context matched in one window.
type occurrence struct {
	win int32
	// emb[j] is the index in the window's items of context element j,
	// counted from the most recent (emb[0] is always 0).
	emb  [pattern.MaxContextLimit + 1]uint8
	last uint8 // emb of the last element matched so far
}

// frequentContexts runs PrefixSpan and calls emit for each context with at
// least minSup occurrences; ctx is most recent first. emit must not retain
// ctx; it may retain occs.
func frequentContexts(wins []window, minSup int, emit func(ctx []int32, occs []occurrence)) {
	groups := make(map[int32][]occurrence)
	for w := range wins {
		first := wins[w].items[0]
		groups[first] = append(groups[first], occurrence{win: int32(w)})
	}
	firsts := make([]int32, 0, len(groups))
	for id, occs := range groups {
		if len(occs) >= minSup {
			firsts = append(firsts, id)
		}
	}
	slices.Sort(firsts)
	var ctx [pattern.MaxContextLimit + 1]int32
	for _, id := range firsts {
		ctx[0] = id
		grow(wins, ctx[:1], groups[id], minSup, emit)
	}
}

func grow(wins []window, ctx []int32, occs []occurrence, minSup int, emit func([]int32, []occurrence)) {
	emit(ctx, occs)
	if len(ctx) == pattern.MaxContextLimit+1 {
		return
	}
	// Count, per item, the windows that hold it after the last match.
	count := make(map[int32]int)
	for _, o := range occs {
		w := &wins[o.win]
		for p := int(o.last) + 1; p < int(w.n); p++ {
			it := w.items[p]
			if !slices.Contains(w.items[o.last+1:p], it) {
				count[it]++
			}
		}
	}
	next := make([]int32, 0, len(count))
	for it, c := range count {
		if c >= minSup {
			next = append(next, it)
		}
	}
	slices.Sort(next)
	for _, it := range next {
		proj := make([]occurrence, 0, count[it])
		for _, o := range occs {
			w := &wins[o.win]
			for p := int(o.last) + 1; p < int(w.n); p++ {
				if w.items[p] == it {
					o2 := o
					o2.emb[len(ctx)] = uint8(p)
					o2.last = uint8(p)
					proj = append(proj, o2)
					break
				}
			}
		}
		grow(wins, append(ctx, it), proj, minSup, emit)
	}
}
