package mine

import (
	"errors"
	"fmt"
	"hash/maphash"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/ahead-dev/ahead/callkey"
	"github.com/ahead-dev/ahead/internal/rawjson"
	"github.com/ahead-dev/ahead/pattern"
	"github.com/ahead-dev/ahead/trace"
)

// Options tune mining. The zero value of each field means its default.
type Options struct {
	// MaxContext is k, the number of calls before a prediction its context
	// may reach back (the session start comes on top); 0 means
	// DefaultMaxContext, at most pattern.MaxContextLimit.
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
	// candidate called within them counts in pattern.Pattern.Soon; 0 means 8.
	Horizon int
	// Alternatives is how many different mappings are kept per context and
	// tool; 0 means 2.
	Alternatives int
	// Progress, if set, is called now and then with the contexts processed
	// so far and their total.
	Progress func(done, total int)
	// Discriminators, if non-nil, are used instead of discovering them
	// from the sessions: mining new patterns for an existing pool must
	// sign events as that pool does (see pattern.Merge).
	Discriminators []pattern.Discriminator
	// Workers is how many contexts are mined at once (each worker keeps
	// its own view of the events, about 1 KiB a call, and caches of at
	// most 56 MiB: valueCache, outcomeCache, keyTable); 0 means
	// runtime.GOMAXPROCS. The pool does not depend on it.
	Workers int
	// KeepValues keeps constants (argument values, discriminator values)
	// the privacy rule leaves out: strings with a digit, '@', '#' or an
	// upper-case letter (pattern.Identifying). The pool records it
	// (pattern.Mined.KeepValues). False, the default, keeps none.
	KeepValues bool
}

// DefaultMaxContext is the k of Options.MaxContext when none is given.
//
// Why 4 and not 3: an agent with one general tool (a shell) makes the
// same few kinds of call throughout, so the kind of the last call or two
// says little; what says which earlier call comes back (the test run
// again after an edit, the script run after it was written) is the
// rhythm of the last several. Measured on held-out repositories of the
// shared coding traces (with patterns per kind of call): exact_at_3 0.178
// at k=3, 0.183 at 4, 0.187 at 5, 0.184 at 6. On held-out tasks of the
// shared customer-service traces k=4 is as good as 5 and better than 3
// (0.563 with the conversation; 0.556 at 3). Why not 5: a longer reach
// doubles the patterns again (4,422 → 9,077 on both shared files) and
// with them the predictor's time per event (Observe p50 about 9 → 12 µs)
// and mining time, for a gain on one data set only.
const DefaultMaxContext = 4

func (o Options) withDefaults() (Options, error) {
	if o.MaxContext == 0 {
		o.MaxContext = DefaultMaxContext
	}
	if o.MaxContext < 1 || o.MaxContext > pattern.MaxContextLimit {
		return o, fmt.Errorf("mine: max context %d out of range 1..%d", o.MaxContext, pattern.MaxContextLimit)
	}
	if o.MinSupport == 0 {
		o.MinSupport = 3
	}
	if o.MinSupport < 1 {
		return o, errors.New("mine: min support must be at least 1")
	}
	if o.MinConfidence == 0 {
		o.MinConfidence = 0.05
	}
	if o.MinConfidence < 0 || o.MinConfidence > 1 {
		return o, errors.New("mine: min confidence must be in [0, 1]")
	}
	if o.MaxCandidates == 0 {
		o.MaxCandidates = 8
	}
	if o.Horizon == 0 {
		o.Horizon = 8
	}
	if o.Horizon < 1 || o.Horizon > pattern.MaxHorizon {
		return o, fmt.Errorf("mine: horizon %d out of range 1..%d", o.Horizon, pattern.MaxHorizon)
	}
	if o.MaxCandidates < 1 || o.MaxCandidates > 64 {
		return o, errors.New("mine: max candidates must be in 1..64")
	}
	if o.Alternatives == 0 {
		o.Alternatives = 2
	}
	if o.Workers < 0 {
		return o, errors.New("mine: workers must not be negative")
	}
	if o.Workers == 0 {
		o.Workers = runtime.GOMAXPROCS(0)
	}
	return o, nil
}

// miner holds the traces flattened for mining.
type miner struct {
	o      Options
	disc   []pattern.Discriminator
	c      *pattern.Compiler // numbers signatures, compiles patterns to validate
	events []mevent
	sess   []int32 // per session: index of its first event in events
	wins   []window
	// Per target event, its raw candidates, one argument after another
	// in the order of its args, and where each argument's end.
	cands    [][]candRef
	candEnds [][]int32
	bodyMu   sync.Mutex // protects bodies, clashes and shapes
	// During discovery, the numbers of the bodies (candRef.body) by
	// their hash: the first body of each hash, and, in clashes, any other.
	// A hash (8 bytes a body) is kept and grown more cheaply than a
	// bodyKey (eight strings).
	bodies   map[uint64]int32
	clashes  map[bodyKey]int32
	bodySeed maphash.Seed
	// bodyHash, if set, hashes in place of maphash: the tests make every
	// body clash.
	bodyHash func(bodyKey) uint64
	// Per body number, in chunks of shapeChunk (never copied as they
	// grow): a raw candidate with that body (its arg, back and recent are
	// one call's).
	shapes [][]rawCand
	bySig  []map[int32][]int32  // per session: signature → its events, ascending
	byCall []map[uint64][]int32 // per session: call hash → its events, ascending
	byTool []map[string][]int32 // per session: tool → its events in byCall, ascending
	// indexAll indexes every key of every event, not only those the
	// session's calls can look up: the reference the tests compare the
	// filtered discovery with.
	indexAll bool
}

type mevent struct {
	ev     *trace.Event
	pay    pattern.Payload
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
func Mine(sessions []trace.Session, opts *Options) (*pattern.Pool, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	m := newMiner(sessions, o)
	m.discover()
	pool := &pattern.Pool{
		Version:        pattern.Version,
		Mined:          pattern.Mined{MaxContext: o.MaxContext, MinSupport: o.MinSupport, MinConfidence: o.MinConfidence, Horizon: o.Horizon, Sessions: len(sessions), Calls: len(m.events), KeepValues: o.KeepValues},
		Discriminators: m.disc,
	}
	if pool.Discriminators == nil {
		pool.Discriminators = []pattern.Discriminator{}
	}
	var contexts []minedContext
	frequentContexts(m.wins, o.MinSupport, func(ctx []int32, occs []occurrence) {
		contexts = append(contexts, minedContext{ids: slices.Clone(ctx), occs: occs})
	})
	for _, pts := range m.eachContext(contexts) {
		pool.Patterns = append(pool.Patterns, pts...)
	}
	sortPatterns(pool.Patterns)
	pool.Scrub() // templates: what is evaluated is what is written
	if pool.Patterns == nil {
		pool.Patterns = []pattern.Pattern{}
	}
	return pool, nil
}

// newMiner flattens sessions for mining with options o (defaults set).
func newMiner(sessions []trace.Session, o Options) *miner {
	disc := slices.Clone(o.Discriminators)
	if disc == nil {
		disc = discoverDiscriminators(sessions, discoverOptions{})
	}
	if !o.KeepValues {
		// Values the privacy rule forbids sign as Other.
		for i := range disc {
			disc[i].Values = slices.DeleteFunc(slices.Clone(disc[i].Values), pattern.Identifying)
		}
	}
	m := &miner{o: o, disc: disc, c: pattern.NewCompiler(disc), bodySeed: maphash.MakeSeed()}
	m.flatten(sessions)
	return m
}

// worker mines the patterns of contexts. Evaluating a mapping memoises
// what it read in the event's payload, so each worker has its own
// payloads (and Compiler): the contexts share events, and what a worker
// finds does not depend on what another read.
type worker struct {
	*miner
	c    *pattern.Compiler
	pays []pattern.Payload // per event of the miner
	vals valueCache
	memo contextMemo // what was validated after the context being mined
	outs outcomeCache
	// Scratch of argCandidates.
	scratch argScratch
	// Scratch of validate.
	refs    []int
	evCands []pattern.Candidate
	buf     []byte
	h       mineHistory // the History of the occurrence being evaluated
}

// eachContext mines the patterns of every context on o.Workers workers
// and returns them per context, in the order of contexts: the same pool
// whatever the number of workers.
func (m *miner) eachContext(contexts []minedContext) [][]pattern.Pattern {
	out := make([][]pattern.Pattern, len(contexts))
	var next atomic.Int64 // the next context to take
	var mu sync.Mutex     // protects done, and calls to Progress
	done := 0
	var wg sync.WaitGroup
	for range min(m.o.Workers, max(len(contexts), 1)) {
		w := &worker{miner: m, c: m.c.Clone(), pays: make([]pattern.Payload, len(m.events))}
		for e := range m.events {
			w.pays[e] = pattern.MakePayload(m.events[e].ev)
		}
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(contexts) {
					return
				}
				out[i] = w.patterns(contexts[i])
				if m.o.Progress != nil {
					mu.Lock()
					done++
					if done%64 == 0 || done == len(contexts) {
						m.o.Progress(done, len(contexts))
					}
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	return out
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
			me := mevent{ev: ev, pay: pattern.MakePayload(ev), sess: int32(si), pos: int32(i)}
			me.sig = m.c.Sign(ev.Tool, ev.Status, ev.Args)
			if c, err := callkey.CanonicalView(ev.Args); err == nil {
				me.argsOK = true
				me.hash = pattern.CallHash(ev.Tool, c)
				rawjson.EachMember(c, func(k, v []byte) bool {
					name, _ := rawjson.Unquote(k)
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
	m.byTool = make([]map[string][]int32, len(sessions))
	for e := range m.events {
		me := &m.events[e]
		if m.bySig[me.sess] == nil {
			m.bySig[me.sess] = make(map[int32][]int32)
			m.byCall[me.sess] = make(map[uint64][]int32)
			m.byTool[me.sess] = make(map[string][]int32)
		}
		m.bySig[me.sess][me.sig] = append(m.bySig[me.sess][me.sig], int32(e))
		if me.argsOK {
			m.byCall[me.sess][me.hash] = append(m.byCall[me.sess][me.hash], int32(e))
			m.byTool[me.sess][me.ev.Tool] = append(m.byTool[me.sess][me.ev.Tool], int32(e))
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
				w.items[w.n] = pattern.StartSig
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

// maxNthRef bounds the events before the most recent of a signature that
// a mapping names by its place (pattern.Ref.Nth). 2 found nothing more
// than 1 on the shared traces.
const maxNthRef = 1

// maxLookback bounds how far back in a session sources are searched, so
// that mining stays linear in very long sessions.
const maxLookback = 512

// maxCandsPerArg bounds the raw candidates kept per argument of a call.
const maxCandsPerArg = 96

// body numbers a raw candidate's bodyKey. The numbers depend on the order
// sessions are discovered in, which workers make vary: they are only
// compared, never ordered, so the pool does not depend on them.
func (m *miner) body(rc *rawCand) int32 {
	k := bodyKeyOf(rc)
	var h uint64
	if m.bodyHash != nil {
		h = m.bodyHash(k)
	} else {
		h = maphash.Comparable(m.bodySeed, k)
	}
	m.bodyMu.Lock()
	defer m.bodyMu.Unlock()
	if m.bodies == nil {
		m.bodies = make(map[uint64]int32)
		m.clashes = make(map[bodyKey]int32)
	}
	id, ok := m.bodies[h]
	if ok && bodyKeyOf(m.shape(id)) == k {
		return id
	}
	if ok {
		if id, ok := m.clashes[k]; ok {
			return id
		}
	}
	id = int32(len(m.bodies) + len(m.clashes))
	if ok {
		m.clashes[k] = id
	} else {
		m.bodies[h] = id
	}
	if id%shapeChunk == 0 {
		m.shapes = append(m.shapes, make([]rawCand, 0, shapeChunk))
	}
	last := &m.shapes[len(m.shapes)-1]
	*last = append(*last, *rc)
	return id
}

// shapeChunk is the number of bodies a chunk of miner.shapes holds.
const shapeChunk = 4096

// shape returns a raw candidate of the body numbered id.
func (m *miner) shape(id int32) *rawCand {
	return &m.shapes[id/shapeChunk][id%shapeChunk]
}

// candRef is a raw candidate as kept for Phase II: what depends on the
// call it explains, and the number of the rest (miner.shape). What
// argCandidates reads of each raw candidate at each context the call
// follows is here, together, 12 bytes.
type candRef struct {
	back   int32 // rawCand.back
	body   int32
	recent bool  // rawCand.recent
	nth    uint8 // rawCand.nth
	list   bool  // rawCand.isList
	// The privacy rule leaves the candidate's constant frame out
	// (pattern.Identifying).
	identifying bool
}

// discover finds the raw candidates of every target call, sessions on
// o.Workers workers (each session's events are its own, and what is found
// in one session does not depend on another).
func (m *miner) discover() {
	m.cands = make([][]candRef, len(m.events))
	m.candEnds = make([][]int32, len(m.events))
	var next atomic.Int64 // the next session to take
	var wg sync.WaitGroup
	for range min(m.o.Workers, max(len(m.sess), 1)) {
		wg.Go(func() {
			sc := &discoverScratch{seen: make(map[int32]int)}
			for {
				si := int(next.Add(1)) - 1
				if si >= len(m.sess) {
					return
				}
				m.discoverSession(si, sc)
			}
		})
	}
	wg.Wait()
	m.bodies, m.clashes = nil, nil // numbered: the keys are not needed any more
}

// discoverSession finds the raw candidates of a session's target calls.
func (m *miner) discoverSession(si int, sc *discoverScratch) {
	first := int(m.sess[si])
	end := len(m.events)
	if si+1 < len(m.sess) {
		end = int(m.sess[si+1])
	}
	// The keys the session's calls can be looked up by (keys.go): the
	// indexes keep only those.
	want := &sc.want
	want.reset()
	for t := first + 1; t < end; t++ {
		if me := &m.events[t]; me.argsOK {
			for _, a := range me.args {
				want.add(a.value)
			}
		}
	}
	idx := sc.idx[:0] // per session: built lazily, dropped after
	idx = append(idx, make([]*evIndex, end-first)...)
	defer func() {
		clear(idx)
		sc.idx = idx[:0]
	}()
	get := func(e int) *evIndex {
		x := idx[e-first]
		if x == nil {
			ks := want.set
			if m.indexAll {
				ks = nil
			}
			x = indexEvent(&m.events[e].pay, ks)
			idx[e-first] = x
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
		// elements only (see pattern.ListSource.Every).
		srcs, seen := sc.srcs[:0], sc.seen
		clear(seen)
		for e := t - 1; e >= max(first, t-maxLookback); e-- {
			if t-e > m.o.MaxContext && len(seen) > maxSigSources {
				break // no earlier event is searched
			}
			sig := m.events[e].sig
			rank := seen[sig]
			seen[sig]++
			if t-e <= m.o.MaxContext || (rank == 0 && len(seen) <= maxSigSources) || (rank < pattern.MaxEvery && len(seen) <= maxSigSources) {
				srcs = append(srcs, source{e, rank})
			}
		}
		sc.srcs = srcs
		// The events a value's first part may be read from when the
		// rest comes from another (joined.go): the most recent of
		// each signature, as a signature reference names them.
		bases := sc.bases[:0]
		for _, s := range srcs {
			if s.rank == 0 {
				bases = append(bases, baseSource{back: int32(t - s.e), sig: m.events[s.e].sig, x: get(s.e)})
			}
		}
		sc.bases = bases
		out, later := sc.out[:0], sc.later[:0]
		ends := make([]int32, len(me.args))
		for ai, a := range me.args {
			start := len(out)
			for _, s := range srcs {
				from := len(out)
				out = findSources(out, get(s.e), a.name, a.value, int32(t-s.e), s.rank == 0)
				nth := uint8(0)
				if s.rank > 0 && s.rank <= maxNthRef {
					nth = uint8(s.rank)
				}
				if s.rank > 0 && t-s.e > m.o.MaxContext {
					// Beyond the context and not the latest of its
					// signature: only a list of every such event reaches
					// it, or a reference to the nth of them for a value
					// repeated whole (after the others, whose places they
					// do not take). A template or a word of an event
					// before the latest found little for its cost: most
					// of the time the latest has the same.
					kept := out[:from]
					for _, rc := range out[from:] {
						if rc.isList() {
							kept = append(kept, rc)
						} else if nth > 0 && rc.whole() {
							rc.nth = nth
							later = append(later, rc)
						}
					}
					out = kept
				} else if nth > 0 {
					for i := from; i < len(out); i++ {
						if out[i].whole() {
							out[i].nth = nth
						}
					}
				}
				if len(out)-start >= maxCandsPerArg {
					out = out[:start+maxCandsPerArg]
					break
				}
			}
			for _, rc := range later {
				if len(out)-start >= maxCandsPerArg {
					break
				}
				out = append(out, rc)
			}
			later = later[:0]
			out = joinAcross(out, start, bases)
			ends[ai] = int32(len(out))
		}
		refs := make([]candRef, len(out))
		for i := range out {
			rc := &out[i]
			refs[i] = candRef{back: rc.back, body: m.body(rc), recent: rc.recent, nth: rc.nth, list: rc.isList(),
				identifying: !m.o.KeepValues && (pattern.Identifying(rc.prefix) || pattern.Identifying(rc.suffix))}
		}
		m.cands[t], m.candEnds[t] = refs, ends
		clear(out) // the scratch keeps no strings of this call alive
		sc.out, sc.later = out[:0], later[:0]
	}
}

// discoverScratch is the memory a worker of discover reuses from one call
// (and session) to the next.
type discoverScratch struct {
	want       wantedKeys
	idx        []*evIndex
	srcs       []source
	seen       map[int32]int
	bases      []baseSource
	out, later []rawCand
}

// source is an earlier event searched for a call's values.
type source struct {
	e    int
	rank int // 0 for the most recent event of its signature
}
