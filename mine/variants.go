package mine

import (
	"math"
	"slices"

	"github.com/ahead-dev/ahead/pattern"
)

// validateVariants assembles the variants (one mapping per argument) into
// patterns, validates them, and returns the best o.Alternatives that are
// kept, best first.
//
// Only o.Alternatives are returned, ranked by Hits[0], so a variant whose
// Hits[0] cannot reach those already kept is not validated: validation
// evaluates the pattern at every occurrence of the context, and variants
// of a list are the dearest to evaluate. A pattern's calls are its
// mappings' values, so its Hits[0] is at most the matches of each of its
// mappings (validateArg). Variants are validated from the highest bound
// down, and the rest are dropped once the patterns kept whose Hits[0]
// exceeds every remaining bound fill the places (see settled): the
// result is the one validating all would give.
func (m *worker) validateVariants(c minedContext, ctx []pattern.Signature, tool string, variants [][]*argCand) []pattern.Pattern {
	type variant struct {
		pt    pattern.Pattern
		key   string // pt.MappingKey()
		bound int    // at least pt.Hits[0]
		kept  bool
	}
	var vs []variant
	seen := make(map[string]bool)
	for _, v := range variants {
		pt, ok := m.assemble(ctx, tool, v)
		if !ok {
			continue
		}
		key := pt.MappingKey()
		if seen[key] {
			continue
		}
		seen[key] = true
		vs = append(vs, variant{pt: pt, key: key, bound: hitsBound(&pt, v)})
	}
	order := make([]int, len(vs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		switch {
		case vs[a].bound > vs[b].bound:
			return -1
		case vs[a].bound < vs[b].bound:
			return 1
		}
		return 0
	})
	var hi []pattern.Pattern // settled's scratch
	for n, i := range order {
		if n > 0 {
			// Every variant from here on has a bound of at most
			// vs[i].bound.
			hi = hi[:0]
			for j := range vs {
				if vs[j].kept && vs[j].pt.Hits[0] > vs[i].bound {
					hi = append(hi, vs[j].pt)
				}
			}
			if len(hi) >= m.o.Alternatives && len(m.best(hi)) >= m.o.Alternatives {
				break
			}
		}
		v := &vs[i]
		m.validateMemo(c, &v.pt, v.key)
		v.kept = m.keep(&v.pt)
	}
	var out []pattern.Pattern
	for i := range vs {
		if vs[i].kept {
			out = append(out, vs[i].pt)
		}
	}
	out = m.best(out)
	if len(out) > m.o.Alternatives {
		out = out[:m.o.Alternatives]
	}
	return out
}

// hitsBound returns a bound on the Hits[0] of a pattern assembled from v:
// the least matches of its mappings, or math.MaxInt for a list read in
// every recent event of a signature, which validateArg reads in the most
// recent event only.
func hitsBound(pt *pattern.Pattern, v []*argCand) int {
	if pt.List != nil && pt.List.Every {
		return math.MaxInt
	}
	b := math.MaxInt
	for _, ac := range v {
		b = min(b, ac.matches)
	}
	return b
}

// keep reports whether a validated pattern is kept.
func (m *worker) keep(pt *pattern.Pattern) bool {
	o := m.o
	// A pattern below τ is still kept if its tool is not (the tool-only
	// pattern would be) and its mappings reproduce a good share of the
	// tool's calls: a concrete call can be run ahead, a tool-only guess
	// cannot.
	hits := 0
	for _, h := range pt.Hits {
		hits += h
	}
	weak := pt.P < o.MinConfidence && (ratio(pt.ToolHits, pt.Support) < o.MinConfidence || 10*hits < 3*pt.ToolHits)
	// A list pattern's calls are its elements in any order (an agent
	// reads the files of a listing it chooses, not the first one): its
	// hits at every rank count.
	return pt.Support >= o.MinSupport && (pt.List != nil || pt.Hits[0] >= 2) && hits >= 2 && !weak
}

// best sorts kept patterns best first, in place, and drops those the
// traces cannot tell from a better one.
func (m *worker) best(out []pattern.Pattern) []pattern.Pattern {
	slices.SortStableFunc(out, func(a, b pattern.Pattern) int {
		if a.Hits[0] != b.Hits[0] {
			return b.Hits[0] - a.Hits[0]
		}
		return patternComplexity(&a) - patternComplexity(&b)
	})
	// Alternatives the traces cannot tell apart (the same counts: reading
	// the context's latest event or "the most recent event of its
	// signature", which is the same event) are one: keep the simplest.
	return slices.CompactFunc(out, func(a, b pattern.Pattern) bool {
		return a.Support == b.Support && a.ToolHits == b.ToolHits && a.ElseSupport == b.ElseSupport &&
			a.ElseHits == b.ElseHits && a.Repeats == b.Repeats && a.RepeatHits == b.RepeatHits && slices.Equal(a.Hits, b.Hits)
	})
}
