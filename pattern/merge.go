package pattern

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Merge returns base with the patterns of mined it lacks added: how a pool
// that learns online gains patterns (issue 14: online updates only touch
// patterns that exist, so an empty pool would never predict).
//
// A pattern both pools hold keeps base's counts: they were learnt from
// the same traffic mined was mined from, and adding both would count it
// twice. An empty base (no patterns) is replaced by mined outright,
// discriminators included; otherwise mined must have been mined with
// base's discriminators (Options.Discriminators), so that its signatures
// mean what base's do. Neither pool is modified.
func Merge(base, mined *Pool) (*Pool, error) {
	if len(base.Patterns) == 0 {
		out := *mined
		out.Patterns = slices.Clone(mined.Patterns)
		if len(base.Conversation) > 0 {
			out.Conversation = base.Conversation // learnt from calls alone, mined has none
		}
		return &out, nil
	}
	if !slices.EqualFunc(base.Discriminators, mined.Discriminators, sameDiscriminator) {
		return nil, fmt.Errorf("%w: merging pools with different discriminators", ErrInvalid)
	}
	have := make(map[string]bool, len(base.Patterns))
	for i := range base.Patterns {
		have[patternKey(&base.Patterns[i])] = true
	}
	out := *base
	out.Patterns = slices.Clone(base.Patterns)
	for i := range mined.Patterns {
		if !have[patternKey(&mined.Patterns[i])] {
			out.Patterns = append(out.Patterns, mined.Patterns[i])
		}
	}
	SortPatterns(out.Patterns)
	return &out, nil
}

func sameDiscriminator(a, b Discriminator) bool {
	return a.Tool == b.Tool && a.Arg == b.Arg && a.Kind == b.Kind && slices.Equal(a.Values, b.Values)
}

// patternKey identifies a pattern by what it predicts, whatever its
// counts: its context, tool and mappings.
func patternKey(pt *Pattern) string {
	return FormatContext(pt.Context) + "\x00" + pt.Tool + "\x00" + strconv.FormatBool(pt.Exact) + "\x00" + pt.MappingKey()
}

// SortPatterns puts patterns in the order of a pool file: by context,
// tool, then tool-only first, then by mapping.
func SortPatterns(ps []Pattern) {
	keys := make([]string, len(ps))
	for i := range ps {
		keys[i] = patternKey(&ps[i])
	}
	idx := make([]int, len(ps))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return strings.Compare(keys[a], keys[b]) })
	sorted := make([]Pattern, len(ps))
	for i, j := range idx {
		sorted[i] = ps[j]
	}
	copy(ps, sorted)
}
