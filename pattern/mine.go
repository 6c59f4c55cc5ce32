package pattern

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/ahead-dev/ahead/trace"
)

// Options tune mining. The zero value of each field means its default.
type Options struct {
	// MaxContext is k, the number of calls before a prediction its context
	// may reach back (the session start comes on top); 0 means 3, at most
	// MaxContextLimit.
	MaxContext int
	// MinSupport is σ, the least number of occurrences of a context, of a
	// (context, tool) pair, and of the evaluations of a mapping; 0 means 3.
	MinSupport int
	// MinConfidence is τ: patterns with p below it are dropped; 0 means
	// 0.05.
	MinConfidence float64
	// MaxCandidates is how many candidate calls a list pattern predicts
	// (and counts hits for); 0 means 8: agents often fetch a whole list at
	// once, in parallel calls of one step.
	MaxCandidates int
	// Horizon is how many calls after a context count as "soon": a
	// candidate called within them counts in Pattern.Soon; 0 means 8.
	Horizon int
	// Alternatives is how many different mappings are kept per context and
	// tool; 0 means 2.
	Alternatives int
	// Progress, if set, is called now and then with the contexts processed
	// so far and their total.
	Progress func(done, total int)
	// Discriminators, if non-nil, are used instead of discovering them
	// from the sessions: mining new patterns for an existing pool must
	// sign events as that pool does (see Merge).
	Discriminators []Discriminator
}

func (o Options) withDefaults() (Options, error) {
	if o.MaxContext == 0 {
		o.MaxContext = 3
	}
	if o.MaxContext < 1 || o.MaxContext > MaxContextLimit {
		return o, fmt.Errorf("pattern: max context %d out of range 1..%d", o.MaxContext, MaxContextLimit)
	}
	if o.MinSupport == 0 {
		o.MinSupport = 3
	}
	if o.MinSupport < 1 {
		return o, errors.New("pattern: min support must be at least 1")
	}
	if o.MinConfidence == 0 {
		o.MinConfidence = 0.05
	}
	if o.MinConfidence < 0 || o.MinConfidence > 1 {
		return o, errors.New("pattern: min confidence must be in [0, 1]")
	}
	if o.MaxCandidates == 0 {
		o.MaxCandidates = 8
	}
	if o.Horizon == 0 {
		o.Horizon = 8
	}
	if o.Horizon < 1 || o.Horizon > MaxHorizon {
		return o, fmt.Errorf("pattern: horizon %d out of range 1..%d", o.Horizon, MaxHorizon)
	}
	if o.MaxCandidates < 1 || o.MaxCandidates > 64 {
		return o, errors.New("pattern: max candidates must be in 1..64")
	}
	if o.Alternatives == 0 {
		o.Alternatives = 2
	}
	return o, nil
}

// miner holds the traces flattened for mining.
type miner struct {
	o      Options
	x      *Index
	events []mevent
	sess   []int32 // per session: index of its first event in events
	wins   []window
	cands  [][]rawCand          // per target event
	bySig  []map[int32][]int32  // per session: signature → its events, ascending
	byCall []map[uint64][]int32 // per session: call hash → its events, ascending
}

type mevent struct {
	ev     *trace.Event
	pay    Payload
	sig    int32
	sess   int32
	pos    int32 // position in its session
	hash   uint64
	args   []namedValue // top-level arguments, canonical values
	argsOK bool         // the arguments are a canonicalisable object
}

type namedValue struct {
	name  string
	value []byte
}

// Mine mines a pool from sessions (each in seq order, as trace.Collect
// returns them). The result depends only on the input and options: mining
// the same traces twice gives byte-identical pool files.
//
// "Followed" in p means the very next call of the session: p is the share
// of the context's occurrences (at which the mappings could be evaluated)
// whose next call is the predicted one. Calls issued in parallel in one
// step count in their recorded order. Soon counts, per candidate, the
// occurrences at which it was called within the next Horizon calls: what
// running it ahead is worth when the agent takes several calls at once.
func Mine(sessions []trace.Session, opts *Options) (*Pool, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	disc := o.Discriminators
	if disc == nil {
		disc = discoverDiscriminators(sessions, discoverOptions{})
	}
	m := &miner{o: o, x: newIndex(slices.Clone(disc))}
	m.flatten(sessions)
	m.discover()
	pool := &Pool{
		Version:        Version,
		Mined:          Mined{MaxContext: o.MaxContext, MinSupport: o.MinSupport, MinConfidence: o.MinConfidence, Horizon: o.Horizon, Sessions: len(sessions), Calls: len(m.events)},
		Discriminators: m.x.disc,
	}
	if pool.Discriminators == nil {
		pool.Discriminators = []Discriminator{}
	}
	var contexts []minedContext
	frequentContexts(m.wins, o.MinSupport, func(ctx []int32, occs []occurrence) {
		contexts = append(contexts, minedContext{ids: slices.Clone(ctx), occs: occs})
	})
	for i, c := range contexts {
		pool.Patterns = append(pool.Patterns, m.patterns(c)...)
		if o.Progress != nil && (i%64 == 0 || i == len(contexts)-1) {
			o.Progress(i+1, len(contexts))
		}
	}
	sortPatterns(pool.Patterns)
	if pool.Patterns == nil {
		pool.Patterns = []Pattern{}
	}
	return pool, nil
}

type minedContext struct {
	ids  []int32 // most recent first
	occs []occurrence
}

func (m *miner) flatten(sessions []trace.Session) {
	for si := range sessions {
		s := &sessions[si]
		m.sess = append(m.sess, int32(len(m.events)))
		for i := range s.Events {
			ev := &s.Events[i]
			me := mevent{ev: ev, pay: MakePayload(ev), sess: int32(si), pos: int32(i)}
			me.sig = m.x.intern(m.x.signer.Sign(ev.Tool, ev.Status, ev.Args))
			if c, err := CanonicalArgs(ev.Args); err == nil {
				me.argsOK = true
				me.hash = CallHash(ev.Tool, c)
				eachMember(c, func(k, v []byte) bool {
					name, _ := unquote(k)
					me.args = append(me.args, namedValue{name, v})
					return true
				})
			}
			m.events = append(m.events, me)
		}
	}
	// Per session, the events of each signature and of each call, in
	// order: histories look them up instead of scanning sessions back.
	m.bySig = make([]map[int32][]int32, len(sessions))
	m.byCall = make([]map[uint64][]int32, len(sessions))
	for e := range m.events {
		me := &m.events[e]
		if m.bySig[me.sess] == nil {
			m.bySig[me.sess] = make(map[int32][]int32)
			m.byCall[me.sess] = make(map[uint64][]int32)
		}
		m.bySig[me.sess][me.sig] = append(m.bySig[me.sess][me.sig], int32(e))
		if me.argsOK {
			m.byCall[me.sess][me.hash] = append(m.byCall[me.sess][me.hash], int32(e))
		}
	}
	k := m.o.MaxContext
	for si := range sessions {
		first := int(m.sess[si])
		n := len(sessions[si].Events)
		for i := 0; i < n; i++ {
			// The first call's window is the session start alone: its
			// patterns are what a predictor says before any call.
			w := window{target: int32(first + i)}
			for b := 1; b <= k && i-b >= 0; b++ {
				w.items[w.n] = m.events[first+i-b].sig
				w.events[w.n] = int32(first + i - b)
				w.n++
			}
			if i <= k {
				w.items[w.n] = StartSig
				w.events[w.n] = -1
				w.n++
			}
			m.wins = append(m.wins, w)
		}
	}
}

// maxSigSources bounds the earlier events (beyond the context's reach)
// searched per call: the most recent event of each of this many
// signatures.
const maxSigSources = 32

// maxLookback bounds how far back in a session sources are searched, so
// that mining stays linear in very long sessions.
const maxLookback = 512

// maxCandsPerArg bounds the raw candidates kept per argument of a call.
const maxCandsPerArg = 96

// discover finds the raw candidates of every target call.
func (m *miner) discover() {
	m.cands = make([][]rawCand, len(m.events))
	for si := range m.sess {
		first := int(m.sess[si])
		end := len(m.events)
		if si+1 < len(m.sess) {
			end = int(m.sess[si+1])
		}
		idx := make(map[int]evIndex) // per session: built lazily, dropped after
		get := func(e int) evIndex {
			x, ok := idx[e]
			if !ok {
				x = indexEvent(&m.events[e].pay)
				idx[e] = x
			}
			return x
		}
		for t := first + 1; t < end; t++ {
			me := &m.events[t]
			if !me.argsOK || len(me.args) == 0 {
				continue
			}
			// Sources: the k calls before, and the most recent call of
			// each earlier signature.
			// Older events of a signature are searched for list
			// elements only (see ListSource.Every).
			type src struct {
				e    int
				rank int // 0 for the most recent event of its signature
			}
			var srcs []src
			seen := make(map[int32]int)
			for e := t - 1; e >= max(first, t-maxLookback); e-- {
				sig := m.events[e].sig
				rank := seen[sig]
				seen[sig]++
				if t-e <= m.o.MaxContext || (rank == 0 && len(seen) <= maxSigSources) || (rank < MaxEvery && len(seen) <= maxSigSources) {
					srcs = append(srcs, src{e, rank})
				}
			}
			var out []rawCand
			for _, a := range me.args {
				start := len(out)
				for _, s := range srcs {
					from := len(out)
					out = findSources(out, get(s.e), a.name, a.value, int32(t-s.e), s.rank == 0)
					if s.rank > 0 && t-s.e > m.o.MaxContext {
						// Beyond the context and not the latest of its
						// signature: only a list of every such event reaches it.
						kept := out[:from]
						for _, rc := range out[from:] {
							if rc.list != "" {
								kept = append(kept, rc)
							}
						}
						out = kept
					}
					if len(out)-start >= maxCandsPerArg {
						out = out[:start+maxCandsPerArg]
						break
					}
				}
			}
			m.cands[t] = out
		}
	}
}

// patterns mines the patterns of one frequent context.
func (m *miner) patterns(c minedContext) []Pattern {
	o := m.o
	// The context, oldest first, as signatures.
	ctx := make([]Signature, len(c.ids))
	for j, id := range c.ids {
		ctx[len(c.ids)-1-j] = m.x.sigs[id]
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
	var out []Pattern
	for _, tool := range tools {
		hit := byTool[tool]
		// Exact patterns carry the tool's odds too, split by whether their
		// mappings evaluate; the tool-only pattern is for the rest.
		if exact := m.exactPatterns(c, ctx, tool, hit); len(exact) > 0 {
			out = append(out, exact...)
			continue
		}
		out = append(out, Pattern{
			Context: ctx, Tool: tool, Support: len(c.occs), Hits: []int{len(hit)},
			ToolHits: len(hit), P: ratio(len(hit), len(c.occs)),
		})
	}
	return out
}

// argCand is a mapping for one argument being validated.
type argCand struct {
	m       Mapping
	list    *ListSource
	count   int // calls whose value it was found to explain (discovery)
	matches int // validated: calls it reproduces
	evals   int // validated: occurrences where it evaluates
	values  int // distinct values matched, up to 2
	first   string
	order   int
}

// maxArgCands bounds the mappings validated per argument.
const maxArgCands = 6

// exactPatterns finds mappings for the arguments of calls to tool after
// the context and validates them.
func (m *miner) exactPatterns(c minedContext, ctx []Signature, tool string, hit []int) []Pattern {
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
	perArg := make([][]*argCand, len(args))
	for ai, arg := range args {
		cands := m.argCandidates(c, hit, arg)
		for _, ac := range cands {
			m.validateArg(c, tool, arg, ac)
		}
		// A mapping must explain values that vary: one that only ever
		// reproduced a single value is a constant in disguise (a token
		// that happened to sit in a template), and the constant candidate
		// says it better.
		cands = slices.DeleteFunc(cands, func(ac *argCand) bool {
			return ac.matches == 0 || (ac.m.Const == nil && ac.values < 2)
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
	var lists []*ListSource
	for _, cands := range perArg {
		for _, ac := range cands {
			if ac.list != nil && !slices.ContainsFunc(lists, func(l *ListSource) bool { return sameList(l, ac.list) }) {
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
	var out []Pattern
	seen := make(map[string]bool)
	for _, v := range variants {
		pt, ok := m.assemble(ctx, tool, v)
		if !ok {
			continue
		}
		key := mappingKey(pt)
		if seen[key] {
			continue
		}
		seen[key] = true
		m.validate(c, &pt)
		// A pattern below τ is still kept if its tool is not (the
		// tool-only pattern would be) and its mappings reproduce a good
		// share of the tool's calls: a concrete call can be run ahead, a
		// tool-only guess cannot.
		hits := 0
		for _, h := range pt.Hits {
			hits += h
		}
		weak := pt.P < o.MinConfidence && (ratio(pt.ToolHits, pt.Support) < o.MinConfidence || 10*hits < 3*pt.ToolHits)
		if pt.Support < o.MinSupport || pt.Hits[0] < 2 || weak {
			continue
		}
		out = append(out, pt)
	}
	slices.SortStableFunc(out, func(a, b Pattern) int {
		if a.Hits[0] != b.Hits[0] {
			return b.Hits[0] - a.Hits[0]
		}
		return patternComplexity(&a) - patternComplexity(&b)
	})
	// Alternatives the traces cannot tell apart (the same counts: reading
	// the context's latest event or "the most recent event of its
	// signature", which is the same event) are one: keep the simplest.
	out = slices.CompactFunc(out, func(a, b Pattern) bool {
		return a.Support == b.Support && a.ToolHits == b.ToolHits && a.ElseSupport == b.ElseSupport &&
			a.ElseHits == b.ElseHits && a.Repeats == b.Repeats && a.RepeatHits == b.RepeatHits && slices.Equal(a.Hits, b.Hits)
	})
	if len(out) > o.Alternatives {
		out = out[:o.Alternatives]
	}
	return out
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
	var list *ListSource
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

func sameList(a, b *ListSource) bool {
	return a.Part == b.Part && a.Path == b.Path && a.Every == b.Every && sameRef(a.From, b.From)
}

func sameRef(a, b Ref) bool {
	if (a.Sig == nil) != (b.Sig == nil) {
		return false
	}
	if a.Sig != nil {
		return *a.Sig == *b.Sig
	}
	return a.Ctx == b.Ctx
}

// assemble builds a pattern from one mapping per argument.
func (m *miner) assemble(ctx []Signature, tool string, v []*argCand) (Pattern, bool) {
	pt := Pattern{Context: ctx, Tool: tool, Exact: true}
	for _, ac := range v {
		if ac.list != nil {
			if pt.List == nil {
				l := *ac.list
				pt.List = &l
			} else if !sameList(pt.List, ac.list) {
				return Pattern{}, false
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

func mappingKey(pt Pattern) string {
	b, _ := json.Marshal(struct {
		L *ListSource
		A []Mapping
	}{pt.List, pt.Args})
	return string(b)
}

func (m *miner) target(oc occurrence) *mevent {
	return &m.events[m.wins[oc.win].target]
}

// argCandidates gathers the mappings that explain arg in the calls hit
// (indices into c.occs), naming their events relative to the context, and
// the most frequent constant.
func (m *miner) argCandidates(c minedContext, hit []int, arg string) []*argCand {
	type counted struct {
		ac   *argCand
		last int // the last call counted, to count each call once
	}
	found := make(map[string]*counted)
	var order []string
	consts := make(map[string]int)
	for _, i := range hit {
		oc := c.occs[i]
		w := &m.wins[oc.win]
		t := int(w.target)
		for _, a := range m.events[t].args {
			if a.name == arg {
				consts[string(a.value)]++
			}
		}
		// Which context element, if any, is each back offset.
		ctxOf := make(map[int32]int, len(c.ids))
		for j := range c.ids {
			e := w.events[oc.emb[j]]
			if e >= 0 {
				ctxOf[int32(t)-e] = j
			}
		}
		for k := range m.cands[t] {
			rc := &m.cands[t][k]
			if rc.arg != arg {
				continue
			}
			var refs []Ref
			if j, ok := ctxOf[rc.back]; ok {
				refs = append(refs, Ref{Ctx: j})
			}
			if rc.recent {
				s := m.x.sigs[m.events[t-int(rc.back)].sig]
				refs = append(refs, Ref{Sig: &s})
			}
			if rc.list != "" {
				// The list in every recent event of the signature: the
				// same mapping whichever of them held the value.
				s := m.x.sigs[m.events[t-int(rc.back)].sig]
				refs = append(refs, Ref{Sig: &s, Ctx: everyRef})
			}
			for _, r := range refs {
				key := rawKey(rc, r)
				f, ok := found[key]
				if !ok {
					f = &counted{ac: candFromRaw(rc, r), last: -1}
					found[key] = f
					order = append(order, key)
				}
				if f.last != i {
					f.last = i
					f.ac.count++
				}
			}
		}
	}
	var out []*argCand
	for _, key := range order {
		if f := found[key]; f.ac.count >= 2 {
			out = append(out, f.ac)
		}
	}
	slices.SortStableFunc(out, func(a, b *argCand) int {
		if a.count != b.count {
			return b.count - a.count
		}
		return complexity(a) - complexity(b)
	})
	if len(out) > maxArgCands {
		out = out[:maxArgCands]
	}
	// The most frequent value, as a constant.
	best, bestN := "", 0
	for v, n := range consts {
		if n > bestN || (n == bestN && v < best) {
			best, bestN = v, n
		}
	}
	if bestN >= 2 {
		out = append(out, &argCand{m: Mapping{Arg: arg, Const: json.RawMessage(best)}, count: bestN})
	}
	for i, ac := range out {
		ac.order = i
	}
	return out
}

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
	if ac.m.From != nil && ac.m.From.Sig != nil {
		n++
	}
	return n
}

// rawKey identifies the mapping a raw candidate gives with event r.
func rawKey(rc *rawCand, r Ref) string {
	var b strings.Builder
	if r.Sig != nil {
		b.WriteString(r.Sig.String())
	} else {
		b.WriteString(strconv.Itoa(r.Ctx))
	}
	for _, f := range []string{rc.part, rc.path, rc.list, rc.norm, rc.prefix, rc.suffix} {
		b.WriteByte(0)
		b.WriteString(f)
	}
	if rc.sel != nil {
		b.WriteByte(0)
		b.WriteString(strconv.Itoa(rc.sel.Line))
		if rc.sel.Token != nil {
			b.WriteByte(':')
			b.WriteString(strconv.Itoa(*rc.sel.Token))
		}
	}
	return b.String()
}

func patternComplexity(pt *Pattern) int {
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

// everyRef marks, in the Ctx of a Ref built during discovery, a list read
// from every recent event of the signature (ListSource.Every).
const everyRef = -1

func candFromRaw(rc *rawCand, r Ref) *argCand {
	mp := Mapping{Arg: rc.arg, Part: rc.part, Path: rc.path, Text: rc.sel, Norm: rc.norm, Prefix: rc.prefix, Suffix: rc.suffix}
	ac := &argCand{}
	if rc.list != "" {
		every := r.Ctx == everyRef
		if every {
			r.Ctx = 0
		}
		ac.list = &ListSource{From: r, Part: rc.part, Path: rc.list, Every: every}
		mp.Part = PartItem
	} else {
		mp.From = &r
	}
	ac.m = mp
	return ac
}

// mineHistory is the History of one occurrence during mining.
type mineHistory struct {
	m      *miner
	target int
	sess   int32
}

func (h *mineHistory) At(e int) *Payload {
	if e < 0 {
		return nil
	}
	return &h.m.events[e].pay
}

// before returns how many of the ascending event indices come before the
// target.
func (h *mineHistory) before(events []int32) int {
	i, _ := slices.BinarySearch(events, int32(h.target))
	return i
}

func (h *mineHistory) Last(sig int32) *Payload {
	events := h.m.bySig[h.sess][sig]
	if i := h.before(events); i > 0 {
		return &h.m.events[events[i-1]].pay
	}
	return nil
}

func (h *mineHistory) Recent(sig int32, i int) *Payload {
	events := h.m.bySig[h.sess][sig]
	n := h.before(events)
	if i < 0 || i >= n || i >= MaxEvery {
		return nil
	}
	return &h.m.events[events[n-1-i]].pay
}

// Used looks as far back as the predictor remembers calls (maxUsedCalls).
func (h *mineHistory) Used(call uint64) bool {
	events := h.m.byCall[h.sess][call]
	i := h.before(events)
	return i > 0 && h.target-int(events[i-1]) <= maxUsedCalls
}

// maxUsedCalls is how far back "not called yet" looks, as the predictor's
// default memory of calls (predict.OnlineOptions.MaxCalls).
const maxUsedCalls = 1024

// history returns the History of an occurrence and its context positions
// (event indices, as At takes them).
func (m *miner) history(c minedContext, oc occurrence, pos []int) (*mineHistory, []int) {
	w := &m.wins[oc.win]
	t := int(w.target)
	pos = pos[:0]
	for j := range c.ids {
		pos = append(pos, int(w.events[oc.emb[j]]))
	}
	return &mineHistory{m: m, target: t, sess: m.events[t].sess}, pos
}

// validateArg counts, over all occurrences of the context, where the
// mapping evaluates and where it gives the next call's argument (any list
// element counts).
func (m *miner) validateArg(c minedContext, tool, arg string, ac *argCand) {
	pt := Pattern{Context: make([]Signature, len(c.ids)), Tool: tool, Exact: true, List: ac.list, Args: []Mapping{ac.m}, Hits: []int{0}}
	cp, err := m.x.compile(&pt)
	if err != nil {
		return
	}
	var pos []int
	var buf []byte
	for _, oc := range c.occs {
		h, p := m.history(c, oc, pos)
		pos = p
		t := &m.events[h.target]
		var want []byte
		if t.ev.Tool == tool {
			for _, a := range t.args {
				if a.name == arg {
					want = a.value
				}
			}
		}
		evaluated, matched := false, false
		check := func(item []byte) bool {
			var ok bool
			buf, ok = cp.appendValue(buf[:0], &cp.args[0], pos, h, item)
			if ok {
				evaluated = true
				if want != nil && string(buf) == string(want) {
					matched = true
					return false
				}
			}
			return true
		}
		if cp.list == nil {
			check(nil)
		} else if list, text, _, ok := cp.resolve(cp.list, pos, h, nil); ok && !text {
			eachElem(list, func(n int, el []byte) bool { return n < maxListScan && check(el) })
		}
		if evaluated {
			ac.evals++
		}
		if matched {
			ac.matches++
			if ac.values < 2 {
				switch {
				case ac.values == 0:
					ac.first = string(want)
					ac.values = 1
				case ac.first != string(want):
					ac.values = 2
				}
			}
		}
	}
}

// validate evaluates a full pattern at every occurrence of its context and
// sets its counts.
func (m *miner) validate(c minedContext, pt *Pattern) {
	cp, err := m.x.compile(pt)
	if err != nil {
		return
	}
	var pos []int
	var cands []Candidate
	var buf []byte
	for _, oc := range c.occs {
		h, p := m.history(c, oc, pos)
		pos = p
		cands, buf = m.x.evalCompiled(cp, pos, h, len(pt.Hits), cands[:0], buf[:0])
		t := &m.events[h.target]
		if len(cands) == 0 {
			pt.ElseSupport++
			if t.ev.Tool == pt.Tool {
				pt.ElseHits++
			}
			continue
		}
		pt.Support++
		for _, cd := range cands {
			if m.calledSoon(h.target, cd.Hash) {
				pt.Soon[cd.Rank]++
			}
		}
		repeat := pt.List == nil && h.Used(cands[0].Hash)
		if repeat {
			pt.Repeats++
		}
		if t.ev.Tool != pt.Tool {
			continue
		}
		pt.ToolHits++
		if !t.argsOK {
			continue
		}
		if repeat && cands[0].Hash == t.hash {
			pt.RepeatHits++
		}
		for _, cd := range cands {
			if cd.Hash == t.hash {
				pt.Hits[cd.Rank]++
				break
			}
		}
	}
	pt.P = ratio(pt.Hits[0], pt.Support)
}

// calledSoon reports whether the call with hash is made at event target or
// within the Horizon-1 events after it, in the same session.
func (m *miner) calledSoon(target int, hash uint64) bool {
	me := &m.events[target]
	for _, e := range m.byCall[me.sess][hash] {
		if d := int(e) - target; d >= 0 && d < m.o.Horizon {
			return true
		}
	}
	return false
}

// sortPatterns orders a pool: by context, tool, then tool-only first, then
// by mapping.
// patternKey identifies a pattern by what it predicts, whatever its
// counts: its context, tool and mappings.
func patternKey(pt *Pattern) string {
	return FormatContext(pt.Context) + "\x00" + pt.Tool + "\x00" + strconv.FormatBool(pt.Exact) + "\x00" + mappingKey(*pt)
}

func sortPatterns(ps []Pattern) {
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
