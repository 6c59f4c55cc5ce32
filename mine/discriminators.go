package mine

import (
	"math"
	"slices"
	"strings"

	"github.com/ahead-dev/ahead/internal/rawjson"
	"github.com/ahead-dev/ahead/pattern"
	"github.com/ahead-dev/ahead/trace"
)

// discoverOptions tune discriminator discovery. Zero values mean the
// defaults given.
type discoverOptions struct {
	minCount  int     // occurrences of the tool; 0 means 30
	maxValues int     // values kept; 0 means 24
	minGain   float64 // bits, after correction; 0 means 0.1
}

// discoverDiscriminators finds, for each tool, the argument reading (whole
// value or first word) that tells most about the next call, if it tells
// enough. "The next call" is its tool and status and, when it is the same
// tool, the same reading of its arguments: a shell tool's program predicts
// the next program even though the tool never changes.
func discoverDiscriminators(sessions []trace.Session, o discoverOptions) []pattern.Discriminator {
	if o.minCount == 0 {
		o.minCount = 30
	}
	if o.maxValues == 0 {
		o.maxValues = 24
	}
	if o.minGain == 0 {
		o.minGain = 0.1
	}
	type key struct{ tool, arg, kind string }
	count := make(map[string]int)
	argsOf := make(map[string]map[string]bool)
	for _, s := range sessions {
		for _, ev := range s.Events {
			count[ev.Tool]++
			if argsOf[ev.Tool] == nil {
				argsOf[ev.Tool] = make(map[string]bool)
			}
			rawjson.EachMember(ev.Args, func(k, _ []byte) bool {
				if name, ok := rawjson.Unquote(k); ok {
					argsOf[ev.Tool][name] = true
				}
				return true
			})
		}
	}
	tools := make([]string, 0, len(count))
	for t, n := range count {
		if n >= o.minCount {
			tools = append(tools, t)
		}
	}
	slices.Sort(tools)
	var out []pattern.Discriminator
	for _, tool := range tools {
		var best *pattern.Discriminator
		args := make([]string, 0, len(argsOf[tool]))
		for a := range argsOf[tool] {
			args = append(args, a)
		}
		slices.Sort(args)
		for _, arg := range args {
			for _, kind := range []string{pattern.KindValue, pattern.KindWord} {
				d, ok := evalDiscriminator(sessions, tool, arg, kind, count[tool], o)
				// On a tie the first word wins: it is the coarser
				// reading, and generalises to arguments not seen.
				if ok && (best == nil || d.Gain > best.Gain || (d.Gain == best.Gain && kind == pattern.KindWord)) {
					best = &d
				}
			}
		}
		if best != nil {
			out = append(out, *best)
		}
	}
	return out
}

func evalDiscriminator(sessions []trace.Session, tool, arg, kind string, n int, o discoverOptions) (pattern.Discriminator, bool) {
	d := pattern.Discriminator{Tool: tool, Arg: arg, Kind: kind}
	freq := make(map[string]int)
	inSessions := make(map[string]int) // sessions using the value
	toolSessions := 0
	for _, s := range sessions {
		seen := make(map[string]bool)
		used := false
		for _, ev := range s.Events {
			if ev.Tool == tool {
				used = true
				if v := d.Read(ev.Args); v != "" {
					freq[v]++
					if !seen[v] {
						seen[v] = true
						inSessions[v]++
					}
				}
			}
		}
		if used {
			toolSessions++
		}
	}
	// A value must be common across sessions, not frequent in a few:
	// identifiers recur within a session (and across the sessions of one
	// task) but say nothing about other tasks.
	minSessions := max(3, toolSessions/10)
	var values []string
	for v, c := range freq {
		if c >= 3 && inSessions[v] >= minSessions {
			values = append(values, v)
		}
	}
	// The most frequent values first, then by value for determinism.
	slices.SortFunc(values, func(a, b string) int {
		if freq[a] != freq[b] {
			return freq[b] - freq[a]
		}
		return strings.Compare(a, b)
	})
	if len(values) > o.maxValues {
		values = values[:o.maxValues]
	}
	// Keep the number of values that tells most about the next call once
	// its cost is paid: more values tell more, and cost more.
	best, bestGain := 0, math.Inf(-1)
	for v := 2; v <= len(values); v++ {
		covered := 0
		for _, x := range values[:v] {
			covered += freq[x]
		}
		// The values must describe most calls, not a few memorable ones.
		if covered*2 < n {
			continue
		}
		if g, ok := discriminatorGain(sessions, tool, arg, kind, values[:v], o); ok && g > bestGain {
			best, bestGain = v, g
		}
	}
	if best == 0 || bestGain < o.minGain {
		return pattern.Discriminator{}, false
	}
	kept := slices.Clone(values[:best])
	slices.Sort(kept)
	return pattern.Discriminator{Tool: tool, Arg: arg, Kind: kind, Values: kept, Gain: math.Round(bestGain*1000) / 1000}, true
}

// discriminatorGain measures, in bits, what the values tell about the next
// call, less the cost of the parameters it takes to say it.
func discriminatorGain(sessions []trace.Session, tool, arg, kind string, values []string, o discoverOptions) (float64, bool) {
	kept := make(map[string]bool, len(values))
	for _, v := range values {
		kept[v] = true
	}
	d := pattern.Discriminator{Tool: tool, Arg: arg, Kind: kind}
	read := func(ev trace.Event) string {
		v := d.Read(ev.Args)
		if kept[v] {
			return v
		}
		return pattern.Other
	}
	// Joint counts of (this value, next label).
	joint := make(map[[2]string]int)
	dcount := make(map[string]int)
	lcount := make(map[string]int)
	total := 0
	for _, s := range sessions {
		// Each (value, next) pair counts once per session: an agent
		// looping on one call must not pass for a strong regularity.
		seen := make(map[[2]string]bool)
		for i, ev := range s.Events {
			if ev.Tool != tool || i+1 >= len(s.Events) {
				continue
			}
			next := s.Events[i+1]
			label := next.Tool + "\x00" + string(next.Status)
			if next.Tool == tool {
				label += "\x00" + read(next)
			}
			pair := [2]string{read(ev), label}
			if seen[pair] {
				continue
			}
			seen[pair] = true
			joint[pair]++
			dcount[pair[0]]++
			lcount[label]++
			total++
		}
	}
	if total < o.minCount {
		return 0, false
	}
	h := func(m map[string]int) float64 {
		e := 0.0
		for _, c := range m {
			p := float64(c) / float64(total)
			e -= p * math.Log2(p)
		}
		return e
	}
	hjoint := 0.0
	for _, c := range joint {
		p := float64(c) / float64(total)
		hjoint -= p * math.Log2(p)
	}
	mi := h(lcount) + h(dcount) - hjoint
	// The information must pay for the parameters it takes to describe
	// it: the BIC penalty of the (|D|-1)(|L|-1) extra parameters of the
	// joint model, (|D|-1)(|L|-1) log2(n) / 2n bits. It is several times
	// the small-sample bias of mutual information, and it is what keeps
	// identifiers (which do predict, within the task they belong to) out.
	penalty := float64((len(dcount)-1)*(len(lcount)-1)) * math.Log2(float64(total)) / (2 * float64(total))
	return mi - penalty, true
}
