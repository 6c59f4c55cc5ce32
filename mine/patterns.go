package mine

import (
	"encoding/json"
	"slices"

	"github.com/ahead-dev/ahead/pattern"
)

// Phase II, second half: for each frequent context, the raw candidates of
// the calls that follow it become mappings named relative to the context,
// which are validated and assembled into patterns.

// patterns mines the patterns of one frequent context.
func (m *worker) patterns(c minedContext) []pattern.Pattern {
	o := m.o
	m.memo.reset()
	// The context, oldest first, as signatures.
	ctx := make([]pattern.Signature, len(c.ids))
	for j, id := range c.ids {
		ctx[len(c.ids)-1-j] = m.c.Signature(id)
	}
	byTool := make(map[string][]int) // tool → indices into c.occs
	for i, oc := range c.occs {
		t := m.events[m.wins[oc.win].target].ev.Tool
		byTool[t] = append(byTool[t], i)
	}
	tools := make([]string, 0, len(byTool))
	for t, occs := range byTool {
		if len(occs) >= o.MinSupport && float64(len(occs)) >= o.MinConfidence*float64(len(c.occs)) {
			tools = append(tools, t)
		}
	}
	slices.Sort(tools)
	var out []pattern.Pattern
	for _, tool := range tools {
		hit := byTool[tool]
		// Exact patterns carry the tool's odds too, split by whether their
		// mappings evaluate; the tool-only pattern is for the rest.
		exact := m.exactPatterns(c, ctx, tool, hit)
		exact = append(exact, m.kindPatterns(c, ctx, tool, hit, exact)...)
		if len(exact) > 0 {
			out = append(out, exact...)
			continue
		}
		out = append(out, pattern.Pattern{
			Context: ctx, Tool: tool, Support: len(c.occs), Hits: []int{len(hit)},
			ToolHits: len(hit), P: ratio(len(hit), len(c.occs)),
		})
	}
	return out
}

// kindPatterns finds exact patterns for each kind of call to tool after
// the context, where a discriminator tells kinds apart (a shell's
// program): mappings found among all the tool's calls explain the most
// frequent kind, and an agent with one general tool makes calls of
// several kinds after the same context, each from its own sources (the
// test run again, the file written removed). Patterns already in have
// are left out.
func (m *worker) kindPatterns(c minedContext, ctx []pattern.Signature, tool string, hit []int, have []pattern.Pattern) []pattern.Pattern {
	// A kind is the discriminator's value (whether the call failed is
	// not known before it is made, so it does not make a kind).
	byKind := make(map[string][]int)
	var kinds []string
	for _, i := range hit {
		kind := m.c.Signature(m.target(c.occs[i]).sig).Value
		if _, ok := byKind[kind]; !ok {
			kinds = append(kinds, kind)
		}
		byKind[kind] = append(byKind[kind], i)
	}
	if len(kinds) < 2 {
		return nil
	}
	seen := make(map[string]bool, len(have))
	for i := range have {
		seen[have[i].MappingKey()] = true
	}
	slices.Sort(kinds)
	var out []pattern.Pattern
	for _, k := range kinds {
		if len(byKind[k]) < m.o.MinSupport {
			continue
		}
		for _, pt := range m.exactPatterns(c, ctx, tool, byKind[k]) {
			if key := pt.MappingKey(); !seen[key] {
				seen[key] = true
				out = append(out, pt)
			}
		}
	}
	return out
}

// argCand is a mapping for one argument being validated.
type argCand struct {
	m       pattern.Mapping
	list    *pattern.ListSource
	count   int // calls whose value it was found to explain (discovery)
	matches int // validated: calls it reproduces
	evals   int // validated: occurrences where it evaluates
	values  int // distinct values matched, up to 2
	first   string
	order   int
	// sessions counts the sessions of the calls it reproduced (lastSess
	// the last one counted).
	sessions int
	lastSess int32
	// srcSig and baseSig are the signature ids the mapping's source (or
	// list) and its base read the most recent event of (the source: or
	// the one its Ref.Nth names), 0 for none.
	srcSig, baseSig int32
}

// maxArgCands bounds the mappings validated per argument.
const maxArgCands = 6

// exactPatterns finds mappings for the arguments of calls to tool after
// the context and validates them.
func (m *worker) exactPatterns(c minedContext, ctx []pattern.Signature, tool string, hit []int) []pattern.Pattern {
	o := m.o
	// The arguments the calls mostly have.
	argCount := make(map[string]int)
	for _, i := range hit {
		for _, a := range m.target(c.occs[i]).args {
			argCount[a.name]++
		}
	}
	var args []string
	for a, n := range argCount {
		if 2*n >= len(hit) {
			args = append(args, a)
		}
	}
	slices.Sort(args)
	// The candidates of every argument first: where one has none, the
	// pattern is tool-only, and validating the others' would be lost.
	perArg := make([][]*argCand, len(args))
	for ai, arg := range args {
		if perArg[ai] = m.argCandidates(c, hit, arg); len(perArg[ai]) == 0 {
			return nil
		}
	}
	for ai, arg := range args {
		cands := perArg[ai]
		for _, ac := range cands {
			m.validateArgMemo(c, tool, arg, ac)
		}
		// A mapping must explain values that vary: one that only ever
		// reproduced a single value is a constant in disguise (a token
		// that happened to sit in a template), and the constant candidate
		// says it better.
		// Nor may its constant frame be one session's (a folder of its
		// own before the names it listed): a frame is a constant, and
		// constants must be seen in more than one session.
		cands = slices.DeleteFunc(cands, func(ac *argCand) bool {
			frame := ac.m.Prefix != "" || ac.m.Suffix != ""
			return ac.matches == 0 || (ac.m.Const == nil && ac.values < 2) || (frame && ac.sessions < minConstSessions)
		})
		slices.SortStableFunc(cands, func(a, b *argCand) int {
			if a.matches != b.matches {
				return b.matches - a.matches
			}
			if a.evals != b.evals {
				return a.evals - b.evals
			}
			return a.order - b.order
		})
		if len(cands) == 0 {
			return nil // an argument nothing explains: tool-only
		}
		perArg[ai] = cands
	}
	// Variants: the best mapping of every argument, then the second and
	// third best of one argument at a time. A pattern iterates at most one
	// list; arguments whose best mapping is an item of another list take
	// their best mapping that is not.
	var variants [][]*argCand
	variants = append(variants, pick(perArg, -1, 0))
	for ai := range perArg {
		for r := 1; r < len(perArg[ai]) && r <= o.Alternatives; r++ {
			variants = append(variants, pick(perArg, ai, r))
		}
	}
	// And for each list, every argument read from the same element where
	// it can be: the arguments of one call usually come from one record
	// (a flight's number and date), even when another source explains an
	// argument as often on its own.
	var lists []*pattern.ListSource
	for _, cands := range perArg {
		for _, ac := range cands {
			if ac.list != nil && !slices.ContainsFunc(lists, func(l *pattern.ListSource) bool { return sameList(l, ac.list) }) {
				lists = append(lists, ac.list)
			}
		}
	}
	for _, l := range lists {
		v := make([]*argCand, len(perArg))
		for ai, cands := range perArg {
			v[ai] = cands[0]
			if i := slices.IndexFunc(cands, func(ac *argCand) bool { return ac.list != nil && sameList(ac.list, l) }); i >= 0 {
				v[ai] = cands[i]
			} else if cands[0].list != nil {
				if i := slices.IndexFunc(cands, func(ac *argCand) bool { return ac.list == nil }); i >= 0 {
					v[ai] = cands[i]
				}
			}
		}
		variants = append(variants, v)
	}
	return m.validateVariants(c, ctx, tool, variants)
}

func pick(perArg [][]*argCand, ai, r int) []*argCand {
	v := make([]*argCand, len(perArg))
	for i, cands := range perArg {
		if i == ai {
			v[i] = cands[r]
		} else {
			v[i] = cands[0]
		}
	}
	// One list per pattern: the list of the first item mapping chosen.
	var list *pattern.ListSource
	for i, ac := range v {
		if ac.list == nil {
			continue
		}
		if list == nil {
			list = ac.list
			continue
		}
		if !sameList(ac.list, list) {
			for _, alt := range perArg[i] {
				if alt.list == nil || sameList(alt.list, list) {
					v[i] = alt
					break
				}
			}
		}
	}
	return v
}

func sameList(a, b *pattern.ListSource) bool {
	return a.Part == b.Part && a.Path == b.Path && a.Every == b.Every && sameRef(a.From, b.From)
}

func sameRef(a, b pattern.Ref) bool {
	if (a.Sig == nil) != (b.Sig == nil) {
		return false
	}
	if a.Sig != nil {
		return *a.Sig == *b.Sig
	}
	return a.Ctx == b.Ctx
}

// assemble builds a pattern from one mapping per argument.
func (m *worker) assemble(ctx []pattern.Signature, tool string, v []*argCand) (pattern.Pattern, bool) {
	pt := pattern.Pattern{Context: ctx, Tool: tool, Exact: true}
	for _, ac := range v {
		if ac.list != nil {
			if pt.List == nil {
				l := *ac.list
				pt.List = &l
			} else if !sameList(pt.List, ac.list) {
				return pattern.Pattern{}, false
			}
		}
		pt.Args = append(pt.Args, ac.m)
	}
	hits := 1
	if pt.List != nil {
		hits = m.o.MaxCandidates
	}
	pt.Hits = make([]int, hits)
	pt.Soon = make([]int, hits)
	return pt, true
}

func (m *worker) target(oc occurrence) *mevent {
	return &m.events[m.wins[oc.win].target]
}

// argCandidates gathers the mappings that explain arg in the calls hit
// (indices into c.occs), naming their events relative to the context, and
// the most frequent constant.
func (m *worker) argCandidates(c minedContext, hit []int, arg string) []*argCand {
	found, counts := &m.scratch.found, m.scratch.counts[:0]
	found.reset()
	consts := m.scratch.consts
	if consts == nil || len(consts) > maxScratchEntries {
		consts = make(map[string]*constCount)
		m.scratch.consts = consts
	}
	clear(consts)
	for _, i := range hit {
		oc := c.occs[i]
		w := &m.wins[oc.win]
		t := int(w.target)
		me := &m.events[t]
		ends := m.candEnds[t]
		var rcs []candRef // arg's raw candidates at t
		for ai, a := range me.args {
			if a.name == arg {
				if ai < len(ends) {
					start := int32(0)
					if ai > 0 {
						start = ends[ai-1]
					}
					rcs = m.cands[t][start:ends[ai]]
				}
				cc := consts[string(a.value)]
				if cc == nil {
					cc = &constCount{last: -1}
					consts[string(a.value)] = cc
				}
				cc.calls++
				if se := m.events[t].sess; se != cc.last {
					cc.last = se
					cc.sessions++
				}
			}
		}
		// Which context element, if any, is each back offset (each
		// element is another event: the offsets differ; -1 for the
		// session start, which no value comes from).
		var backOf [pattern.MaxContextLimit + 1]int32
		for j := range c.ids {
			backOf[j] = -1
			if e := w.events[oc.emb[j]]; e >= 0 {
				backOf[j] = int32(t) - e
			}
		}
		ctxOf := func(back int32) (int, bool) {
			for j := range c.ids {
				if backOf[j] == back {
					return j, true
				}
			}
			return 0, false
		}
		for k := range rcs {
			rc := &rcs[k]
			if rc.identifying {
				// The privacy rule (pattern.Identifying): another
				// mapping (two sources, a list) may derive it instead.
				continue
			}
			// The events the mapping may name this one by. A list read
			// from the most recent event of a signature and from every
			// recent one share a key: the first found stands for both.
			var keys [4]rawKey
			n := 0
			if j, ok := ctxOf(rc.back); ok {
				keys[n] = rawKey{sig: -1, ctx: j, body: rc.body}
				n++
			}
			src := m.events[t-int(rc.back)].sig
			if rc.recent {
				keys[n] = rawKey{sig: src, body: rc.body}
				n++
			}
			if rc.list {
				keys[n] = rawKey{sig: src, ctx: everyRef, body: rc.body}
				n++
			} else if rc.nth > 0 {
				keys[n] = rawKey{sig: src, ctx: int(rc.nth), body: rc.body}
				n++
			}
			for _, key := range keys[:n] {
				id := key
				if key.sig >= 0 && key.ctx < 0 {
					id.ctx = 0
				}
				fi, ok := found.get(id)
				if !ok {
					fi = int32(len(counts))
					found.put(id, fi)
					counts = append(counts, counted{body: rc.body, key: key, last: -1})
				}
				if f := &counts[fi]; f.last != i {
					f.last = i
					f.count++
				}
			}
		}
	}
	m.scratch.counts = counts
	var out []*argCand
	for fi := range counts {
		if f := &counts[fi]; f.count >= 2 {
			r := pattern.Ref{Ctx: f.key.ctx}
			if f.key.sig >= 0 {
				sg := m.c.Signature(f.key.sig)
				r.Sig = &sg
				if f.key.ctx > 0 {
					r.Ctx, r.Nth = 0, f.key.ctx
				}
			}
			rc := m.shape(f.body)
			ac := candFromRaw(rc, arg, r)
			if f.key.sig >= 0 {
				ac.srcSig = f.key.sig
			}
			if rc.baseSig > 0 {
				sg := m.c.Signature(rc.baseSig)
				ac.m.Base.From = &pattern.Ref{Sig: &sg}
				ac.baseSig = rc.baseSig
			}
			ac.count = f.count
			out = append(out, ac)
		}
	}
	slices.SortStableFunc(out, func(a, b *argCand) int {
		if a.count != b.count {
			return b.count - a.count
		}
		return complexity(a) - complexity(b)
	})
	// Mappings that name an event before the most recent of its signature
	// (pattern.Ref.Nth) take no place of the others: the best of them is
	// validated beside them.
	var nth *argCand
	if i := slices.IndexFunc(out, isNth); i >= 0 {
		nth = out[i]
		out = slices.DeleteFunc(out, isNth)
	}
	if len(out) > maxArgCands {
		// A value of two sources whose second part is a list's element,
		// explaining as many calls as the best mapping, is kept even when
		// simpler places of one element fill the slots (the first line of
		// a listing, from the start and from the end, in this event and
		// in the most recent of its signature, its first part read from
		// one event or another): it also offers the later elements, which
		// the agent often reads in the same step.
		joinedList := func(ac *argCand) bool { return ac.list != nil && ac.m.Base != nil }
		var list *argCand
		if !slices.ContainsFunc(out[:maxArgCands], joinedList) {
			if i := slices.IndexFunc(out[maxArgCands:], joinedList); i >= 0 && out[maxArgCands+i].count == out[0].count {
				list = out[maxArgCands+i]
			}
		}
		out = out[:maxArgCands]
		if list != nil {
			out = append(out, list)
		}
	}
	if nth != nil {
		out = append(out, nth)
	}
	// The most frequent value, as a constant, if more than one session
	// made it: a value that only one session ever used (a file it named,
	// a query it repeated) is that session's, not the tool's, and would
	// take a place among the guesses of every later session.
	best, bestN := "", 0
	for v, cc := range consts {
		if cc.sessions < minConstSessions {
			continue
		}
		if !m.o.KeepValues && pattern.IdentifyingJSON(json.RawMessage(v)) {
			continue // the privacy rule (pattern.Identifying)
		}
		if n := cc.calls; n > bestN || (n == bestN && v < best) {
			best, bestN = v, n
		}
	}
	if bestN >= 2 {
		out = append(out, &argCand{m: pattern.Mapping{Arg: arg, Const: json.RawMessage(best)}, count: bestN})
	}
	for i, ac := range out {
		ac.order = i
	}
	return out
}

// argScratch is argCandidates' memory, reused from one call to the next.
type argScratch struct {
	found  keyTable  // a mapping's key → its index in counts
	counts []counted // in the order first found
	consts map[string]*constCount
}

// maxScratchEntries bounds the maps of argScratch kept for the next call
// (clearing a map costs its size, whatever is left in it).
const maxScratchEntries = 4096

// counted is a mapping being counted; its argCand is built only if it
// explains at least two calls (most explain one).
type counted struct {
	body  int32 // of the first raw candidate found with this key
	key   rawKey
	count int
	last  int // the last call counted, to count each call once
}

// constCount counts a value: the calls that had it, and the sessions they
// were in.
type constCount struct {
	calls, sessions int
	last            int32 // the last session counted
}

// minConstSessions is the least number of sessions a constant must have
// been seen in.
const minConstSessions = 2

// complexity orders equally good mappings: plain reads before lists,
// before text selections and templates.
func complexity(ac *argCand) int {
	n := 0
	if ac.list != nil {
		n += 2
		if ac.list.Every {
			n++
		}
	}
	if ac.m.Text != nil {
		n += 2
	}
	if ac.m.Norm != "" {
		n++
	}
	if ac.m.Prefix != "" || ac.m.Suffix != "" {
		n += 2
	}
	if ac.m.Base != nil {
		n += 2
		if ac.m.Base.From != nil {
			n++ // an event of its own
		}
		if ac.m.Base.Text != nil {
			n++ // a word of a string, not the whole
		}
	}
	if ac.list != nil && ac.list.Lines {
		n++
	}
	if ac.m.From != nil && ac.m.From.Sig != nil {
		n++
		if ac.m.From.Nth > 0 {
			n++ // not the most recent
		}
	}
	return n
}

// isNth reports whether the mapping reads an event before the most recent
// of its signature.
func isNth(ac *argCand) bool { return ac.m.From != nil && ac.m.From.Nth > 0 }

// rawKey identifies the mapping a raw candidate gives with an event: the
// event as the mapping names it (a context element, or the most recent
// event of a signature, or a list in every recent event of one) and the
// candidate's place in it (candRef.body). It is built for every raw
// candidate of every call at every context the call follows, so it holds
// numbers, not strings.
type rawKey struct {
	sig  int32 // the signature named, or -1 for a context element
	ctx  int   // the context element (everyRef for a list in every recent event; with sig, n > 0 for the nth before the most recent)
	body int32
}

// bodyKey is the part of a raw candidate's identity that does not depend
// on the context: where in its event the value was found and how it was
// shaped.
type bodyKey struct {
	part, path, list, norm, prefix, suffix, basePart, basePath string
	baseSig                                                    int32
	lines                                                      bool
	sel, baseSel                                               selKey
}

// selKey is a pattern.TextSel as a key (set: there is one).
type selKey struct {
	set, token bool
	line, tok  int
}

func selKeyOf(sel *pattern.TextSel) selKey {
	if sel == nil {
		return selKey{}
	}
	k := selKey{set: true, line: sel.Line}
	if sel.Token != nil {
		k.token, k.tok = true, *sel.Token
	}
	return k
}

func bodyKeyOf(rc *rawCand) bodyKey {
	return bodyKey{part: rc.part, path: rc.path, list: rc.list, norm: rc.norm, prefix: rc.prefix, suffix: rc.suffix,
		basePart: rc.basePart, basePath: rc.basePath, baseSig: rc.baseSig, lines: rc.lines,
		sel: selKeyOf(rc.sel), baseSel: selKeyOf(rc.baseSel)}
}

func patternComplexity(pt *pattern.Pattern) int {
	n := 0
	if pt.List != nil {
		n += 2
		if pt.List.From.Sig != nil {
			n++
		}
		if pt.List.Every {
			n++
		}
	}
	for i := range pt.Args {
		n += complexity(&argCand{m: pt.Args[i]})
	}
	return n
}

// everyRef marks, in the Ctx of a pattern.Ref built during discovery, a list read
// from every recent event of the signature (pattern.ListSource.Every).
const everyRef = -1

// candFromRaw builds the mapping for arg of a raw candidate's body,
// reading the event r names.
func candFromRaw(rc *rawCand, arg string, r pattern.Ref) *argCand {
	mp := pattern.Mapping{Arg: arg, Part: rc.part, Path: rc.path, Text: rc.sel, Norm: rc.norm, Prefix: rc.prefix, Suffix: rc.suffix}
	if rc.basePart != "" {
		mp.Base = &pattern.Base{Part: rc.basePart, Path: rc.basePath, Text: rc.baseSel}
	}
	ac := &argCand{}
	if rc.isList() {
		every := r.Ctx == everyRef
		if every {
			r.Ctx = 0
		}
		ac.list = &pattern.ListSource{From: r, Part: rc.part, Path: rc.list, Every: every, Lines: rc.lines}
		mp.Part = pattern.PartItem
	} else {
		mp.From = &r
	}
	ac.m = mp
	return ac
}

// sortPatterns orders a pool as pattern files are ordered.
func sortPatterns(ps []pattern.Pattern) { pattern.SortPatterns(ps) }

func ratio(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}
