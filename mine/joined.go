package mine

// Values of two sources from different events. findSources finds a value
// whose start is a value of the event the rest comes from (the folder a
// listing call named + "/" + a name it listed). Here the start is looked
// for in the other earlier events: the folder an earlier call created +
// "/" + each name a later listing returned, a base URL one call returned
// + "/items/" + each id another call listed, a repository named first +
// "/" + each path of a later listing. The first part's event is named by
// its signature (the session's most recent event of it), which does not
// depend on the context the rest is read through.

// baseSource is an earlier event a value's first part may be read from:
// the most recent event of its signature before the call.
type baseSource struct {
	back int32 // counted back from the call
	sig  int32
	x    *evIndex
}

// maxJoinedPerArg bounds the candidates joinAcross adds per argument of a
// call, beyond maxCandsPerArg.
const maxJoinedPerArg = 16

// joinAcross appends, for each candidate of dst[start:] whose constant
// prefix no value of its own event starts, the same candidate with its
// prefix's start read from another of the bases: the one whose value
// covers most of the prefix (the most recent among equals). It returns
// dst.
func joinAcross(dst []rawCand, start int, bases []baseSource) []rawCand {
	if len(bases) < 2 {
		return dst
	}
	type found struct {
		b   int // index into bases, -1 if none
		l   loc
		sep string
	}
	// Per prefix and event of the rest: the candidates of one value share
	// a few prefixes (its tokens' starts) among many places.
	type key struct {
		prefix string
		back   int32
	}
	memo := make(map[key]found)
	end, added := len(dst), 0
	for i := start; i < end && added < maxJoinedPerArg; i++ {
		rc := &dst[i]
		if rc.prefix == "" || rc.basePart != "" {
			continue
		}
		k := key{rc.prefix, rc.back}
		f, ok := memo[k]
		if !ok {
			f = found{b: -1}
			own := -1
			for j := range bases {
				if bases[j].back == rc.back {
					own = j
				}
			}
			// A start found in the event of the rest is joined there
			// (findSources) or, a word of it, is that event's own
			// wording: nothing to add. (When the rest's event is
			// not among the bases, an older event of its signature that
			// only a list of every such event reaches, both may be
			// offered; validation keeps what reproduces the calls.)
			if own < 0 || !hasBase(bases[own].x, rc.prefix) {
				for j := range bases {
					if j == own {
						continue
					}
					l, sep, ok := findBase(bases[j].x, rc.prefix, true)
					if ok && (f.b < 0 || len(sep) < len(f.sep) || (len(sep) == len(f.sep) && bases[j].back < bases[f.b].back)) {
						f = found{b: j, l: l, sep: sep}
					}
				}
			}
			memo[k] = f
		}
		if f.b < 0 {
			continue
		}
		c := *rc
		c.basePart, c.basePath, c.baseSel, c.baseSig, c.prefix = f.l.partName(), f.l.path, f.l.sel, bases[f.b].sig, f.sep
		dst = append(dst, c)
		added++
	}
	return dst
}

func hasBase(x *evIndex, prefix string) bool {
	_, _, ok := findBase(x, prefix, true)
	return ok
}
