package pattern

import (
	"cmp"
	"encoding/json"
	"slices"
	"sync"
	"unsafe"

	"github.com/ahead-dev/ahead/callkey"
	"github.com/ahead-dev/ahead/predict"
	"github.com/ahead-dev/ahead/trace"
)

// OnlineOptions configure an Online predictor. The zero value of each field
// means its default.
type OnlineOptions struct {
	// MaxPredictions caps the predictions returned per event; 0 means 10.
	MaxPredictions int
	// Frozen turns online learning off: the counts behind p stay those of
	// the pool.
	Frozen bool
	// MaxSessions bounds the sessions tracked at once; when a new session
	// would exceed it, the least recently active one is forgotten. 0 means
	// 10000.
	MaxSessions int
	// MaxCalls bounds the calls remembered per session to tell which list
	// elements were already used; 0 means 1024.
	MaxCalls int
	// Shrink is the pseudo-count that pulls the p of rarely seen patterns
	// towards zero: p = hits / (support + Shrink). 0 means 1; negative
	// means none.
	Shrink float64
}

// Online is the pattern-based predictor (the PASTE paper's Algorithm 2).
// For each session it keeps a bounded window of recent signatures, the
// most recent event of each signature, and the calls made. On each event
// it looks up, by hashed context, every pattern whose context matches a
// suffix of the window, evaluates their mappings on the matched events'
// payloads (only then, and only the paths they read), and returns the
// candidate calls ranked by p, one per call key. Tool-only predictions (Args
// nil) are returned for tools no pattern could predict exactly.
//
// Start predicts a session's first call, before any event, from the
// patterns of the session start alone.
//
// With learning on, each event also settles the previous event's (or
// Start's) predictions: every pattern that fired counts one more occurrence, and a
// hit if the event was its candidate. Snapshot returns the pool with the
// counts (package learn checkpoints it).
//
// Observe retains the event's Args and Output (without copying them) while
// the session's window needs them: callers must not modify them afterwards.
// Online is safe for concurrent use; calls for one session are serialised.
type Online struct {
	x    *Index
	opts OnlineOptions
	k    int // window length

	mu       sync.Mutex // protects sessions and the recency list
	sessions map[string]*session
	// lru is the sentinel of the sessions' recency list: lru.next is the
	// most recently active, lru.prev the least, so that the bound evicts in
	// O(1) (an engine keeping more sessions than MaxSessions hits it at
	// every new session).
	lru session
}

var _ interface {
	Observe(trace.Event) []predict.Prediction
	Start(string) []predict.Prediction
	Forget(string)
	SessionBytes(string) int64
} = (*Online)(nil)

// NewOnline returns a predictor serving the pool. opts may be nil.
func NewOnline(pool *Pool, opts *OnlineOptions) (*Online, error) {
	x, err := NewIndex(pool)
	if err != nil {
		return nil, err
	}
	o := &Online{x: x, sessions: make(map[string]*session)}
	o.lru.next, o.lru.prev = &o.lru, &o.lru
	if opts != nil {
		o.opts = *opts
	}
	if o.opts.MaxPredictions <= 0 {
		o.opts.MaxPredictions = 10
	}
	if o.opts.MaxSessions <= 0 {
		o.opts.MaxSessions = 10000
	}
	if o.opts.MaxCalls <= 0 {
		o.opts.MaxCalls = 1024
	}
	if o.opts.Shrink == 0 {
		o.opts.Shrink = 1
	} else if o.opts.Shrink < 0 {
		o.opts.Shrink = 0
	}
	o.k = max(x.maxContext()-1, 1)
	if pool.Mined.MaxContext > 0 {
		o.k = pool.Mined.MaxContext
	}
	return o, nil
}

// Len returns the number of patterns served.
func (o *Online) Len() int { return o.x.Len() }

// Snapshot returns the pool served, with the counts learnt so far (a
// checkpoint saves it).
func (o *Online) Snapshot() *Pool { return o.x.Snapshot() }

// session is one session's state.
type session struct {
	id         string
	prev, next *session   // the recency list, under Online.mu
	mu         sync.Mutex // serialises Observe for the session; protects all below
	n          int        // events observed
	// ring holds the last k events (the window), oldest at head.
	ring []*slot
	head int
	// last holds the most recent events of each signature, the oldest
	// first: as many as the pool may read (Index.historyOf), so a session
	// keeps at most k + Σ History(sig) events, whatever its length.
	last map[int32][]*slot
	// used holds the calls made (CallHash), the oldest dropped first.
	used  map[uint64]int
	order []uint64
	// recent holds what the patterns predicted after each of the last
	// Horizon events (at least the last), the newest at cur: the newest
	// settle next-call hits, all of them the Soon counts.
	recent []firings
	cur    int
	scored []scored
	// scratch buffers, reused across events.
	free   []*slot // slots neither the window nor last holds any more
	hist   history
	window []int32
	evals  EvalCache // the candidates of this prediction; backs scored's args
	preds  map[predKey]int
}

type slot struct {
	sig  int32
	refs int8 // held by the window and/or the per-signature memory
	ev   trace.Event
	pay  Payload
}

type firing struct {
	pattern   int32
	evaluated bool
	repeat    bool     // its call was made already (see Pattern.Repeats)
	hashes    []uint64 // candidate hashes by rank; nil for tool-only
	credited  uint64   // ranks whose call was made since (Soon counted)
}

// firings are the patterns that fired after one event.
type firings struct {
	fs     []firing
	hashes []uint64 // backs the fs hashes
}

func (f *firings) reset() {
	f.fs = f.fs[:0]
	f.hashes = f.hashes[:0]
}

type predKey struct {
	tool string
	hash uint64 // 0 for tool-only
}

func (o *Online) session(id string) *session {
	o.mu.Lock()
	defer o.mu.Unlock()
	s, ok := o.sessions[id]
	if !ok {
		if len(o.sessions) >= o.opts.MaxSessions {
			o.forgetLocked(o.lru.prev) // the least recently active
		}
		s = &session{id: id, last: make(map[int32][]*slot), used: make(map[uint64]int), preds: make(map[predKey]int),
			recent: make([]firings, max(o.x.horizon(), 1))}
		o.sessions[id] = s
	} else {
		s.prev.next, s.next.prev = s.next, s.prev
	}
	s.prev, s.next = &o.lru, o.lru.next
	o.lru.next.prev = s
	o.lru.next = s
	return s
}

func (o *Online) forgetLocked(s *session) {
	if s == nil || s == &o.lru {
		return
	}
	s.prev.next, s.next.prev = s.next, s.prev
	s.prev, s.next = nil, nil
	delete(o.sessions, s.id)
}

// Forget drops a session's state.
func (o *Online) Forget(session string) {
	o.mu.Lock()
	o.forgetLocked(o.sessions[session])
	o.mu.Unlock()
}

// SessionBytes estimates the memory a session's state holds, in bytes:
// the events its window and per-signature memory keep (their arguments
// and outputs, which Observe retains, and what their payloads decoded),
// the calls it remembers, and a fixed overhead. The state is bounded (k +
// Σ History events, MaxCalls calls), but outputs are as large as tools
// make them: an engine adds this to its memory budget. 0 for an unknown
// session.
func (o *Online) SessionBytes(session string) int64 {
	o.mu.Lock()
	s := o.sessions[session]
	o.mu.Unlock()
	if s == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n := int64(sessionOverhead) + int64(cap(s.order))*8 + int64(len(s.used))*mapEntryBytes +
		int64(cap(s.free))*8 + int64(len(s.free))*int64(unsafe.Sizeof(slot{})) +
		int64(cap(s.window))*4 + int64(cap(s.scored))*int64(unsafe.Sizeof(scored{}))
	for i := range s.recent {
		n += int64(cap(s.recent[i].fs))*int64(unsafe.Sizeof(firing{})) + int64(cap(s.recent[i].hashes))*8
	}
	for _, sl := range s.ring {
		n += sl.bytes()
	}
	for _, l := range s.last {
		n += int64(cap(l)) * 8
		for _, sl := range l {
			if sl.refs == 1 { // not also in the window, counted above
				n += sl.bytes()
			}
		}
	}
	return n
}

// sessionOverhead and mapEntryBytes approximate a session's fixed cost
// and the cost of one map entry, in bytes.
const (
	sessionOverhead = 2048
	mapEntryBytes   = 48
)

func (sl *slot) bytes() int64 {
	ev := &sl.ev
	return int64(unsafe.Sizeof(*sl)) + int64(len(ev.Args)+len(ev.Output)+len(ev.Content)+len(ev.Tool)+
		len(ev.Session)+len(ev.TS)+len(ev.ResultTS)) + sl.pay.Retained()
}

// Observe records an authoritative event and returns the predicted next
// calls, best first.
func (o *Online) Observe(ev trace.Event) []predict.Prediction {
	s := o.session(ev.Session)
	s.mu.Lock()
	defer s.mu.Unlock()
	canon, err := callkey.CanonicalView(ev.Args)
	var hash uint64
	if err == nil {
		hash = CallHash(ev.Tool, canon)
	}
	if !o.opts.Frozen {
		o.learn(s, ev.Tool, hash, err == nil)
	}
	s.cur = (s.cur + 1) % len(s.recent)
	s.recent[s.cur].reset()
	if err == nil {
		s.use(hash, o.opts.MaxCalls)
	}
	o.push(s, ev)
	return o.predict(s, false)
}

// Warm shows the predictor an event of a session already under way,
// without learning from it or predicting: how a Learner carries sessions
// over to a new pool.
func (o *Online) Warm(ev trace.Event) {
	s := o.session(ev.Session)
	s.mu.Lock()
	defer s.mu.Unlock()
	if canon, err := callkey.CanonicalView(ev.Args); err == nil {
		s.use(CallHash(ev.Tool, canon), o.opts.MaxCalls)
	}
	o.push(s, ev)
}

// Resume is Warm for one of the last Horizon events of a session already
// under way whose earlier calls were learnt from elsewhere (a fleet's
// previous mining): without learning from it, it makes the predictions
// Observe would have made, so that the session's next events settle them
// (the next one its hits, the next Horizon ones its Soon credits), and
// the calls across the break are counted once. The Soon credits this
// event earned the predictions resumed before it were counted where it was
// learnt: they are only noted, so that a later call does not count them
// again.
func (o *Online) Resume(ev trace.Event) {
	s := o.session(ev.Session)
	s.mu.Lock()
	defer s.mu.Unlock()
	if canon, err := callkey.CanonicalView(ev.Args); err == nil {
		hash := CallHash(ev.Tool, canon)
		o.credit(s, ev.Tool, hash, false)
		s.use(hash, o.opts.MaxCalls)
	}
	s.cur = (s.cur + 1) % len(s.recent)
	s.recent[s.cur].reset()
	o.push(s, ev)
	o.predict(s, false)
}

// Start returns the predicted first calls of a session, best first, before
// it makes any: those of the patterns whose context is the session start
// alone, tool-only or with constant arguments (nothing precedes to derive
// arguments from), ranked and cut as Observe's. With learning on, the
// session's first event settles them like any other predictions. Once the
// session has events Start returns nil; called again before the first
// event, it predicts again and only the last predictions are settled.
func (o *Online) Start(session string) []predict.Prediction {
	s := o.session(session)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n > 0 {
		return nil
	}
	s.recent[s.cur].reset()
	return o.predict(s, true)
}

// learn settles the previous predictions with the call that followed, and
// credits the Soon counts of every candidate of the last Horizon
// predictions this call is.
func (o *Online) learn(s *session, tool string, hash uint64, ok bool) {
	for _, f := range s.recent[s.cur].fs {
		isTool := o.x.Tool(f.pattern) == tool
		hit := -1
		if isTool && ok && f.hashes != nil {
			hit = slices.Index(f.hashes, hash)
		}
		o.x.record(f.pattern, f.evaluated, isTool, hit, f.repeat)
	}
	if ok {
		o.credit(s, tool, hash, true)
	}
}

// credit marks every candidate of the last Horizon predictions that this
// call is as called soon, once each, and counts it (Soon) if count.
func (o *Online) credit(s *session, tool string, hash uint64, count bool) {
	if o.x.horizon() == 0 {
		return
	}
	for i := range s.recent {
		fs := s.recent[i].fs
		for j := range fs {
			f := &fs[j]
			if o.x.Tool(f.pattern) != tool {
				continue
			}
			for r, h := range f.hashes {
				if h == hash && f.credited&(1<<r) == 0 {
					f.credited |= 1 << r
					if count {
						o.x.recordSoon(f.pattern, r)
					}
				}
			}
		}
	}
}

func (s *session) use(h uint64, maxCalls int) {
	s.used[h]++
	s.order = append(s.order, h)
	if len(s.order) > maxCalls {
		old := s.order[0]
		s.order = s.order[1:]
		if s.used[old]--; s.used[old] <= 0 {
			delete(s.used, old)
		}
	}
}

// push adds ev to the window and the per-signature memory. The slots
// (an event and its payload's memos, a kilobyte) are recycled once
// neither holds them: nothing else keeps them past an event.
func (o *Online) push(s *session, ev trace.Event) {
	var sl *slot
	if n := len(s.free); n > 0 {
		sl = s.free[n-1]
		s.free[n-1] = nil
		s.free = s.free[:n-1]
	} else {
		sl = new(slot)
	}
	sl.sig, sl.ev = o.x.SigOf(ev.Tool, ev.Status, ev.Args), ev
	sl.pay.Reset(&sl.ev)
	if len(s.ring) < o.k {
		s.ring = append(s.ring, sl)
	} else {
		s.release(s.ring[s.head])
		s.ring[s.head] = sl
		s.head = (s.head + 1) % o.k
	}
	sl.refs++
	if sl.sig != UnknownSig {
		l := s.last[sl.sig]
		if len(l) >= o.x.historyOf(sl.sig) {
			s.release(l[0])
			copy(l, l[1:])
			l = l[:len(l)-1]
		}
		s.last[sl.sig] = append(l, sl)
		sl.refs++
	}
	s.n++
}

// release drops a hold on a slot, freeing it for reuse after the last.
func (s *session) release(sl *slot) {
	if sl.refs--; sl.refs == 0 {
		// The caller's memory (outputs can be megabytes) is not ours to
		// keep.
		sl.ev = trace.Event{}
		sl.pay.Reset(&sl.ev)
		s.free = append(s.free, sl)
	}
}

// at returns the event at ring position i (0 is the oldest).
func (s *session) at(i int) *slot {
	return s.ring[(s.head+i)%len(s.ring)]
}

// history adapts a session to History. Window position 0 is the
// session start marker when present.
type history struct {
	s     *session
	start int // 1 if window[0] is the start marker
}

func (h *history) At(pos int) *Payload {
	i := pos - h.start
	if i < 0 || i >= len(h.s.ring) {
		return nil
	}
	return &h.s.at(i).pay
}

func (h *history) Last(sig int32) *Payload {
	if l := h.s.last[sig]; len(l) > 0 {
		return &l[len(l)-1].pay
	}
	return nil
}

func (h *history) Recent(sig int32, i int) *Payload {
	if l := h.s.last[sig]; i >= 0 && i < len(l) {
		return &l[len(l)-1-i].pay
	}
	return nil
}

func (h *history) Used(call uint64) bool { return h.s.used[call] > 0 }

// predict returns the predictions after the session's latest event, or,
// if first, before its first event (the session start alone).
func (o *Online) predict(s *session, first bool) []predict.Prediction {
	s.window = s.window[:0]
	// The History is passed as a pointer into the session: a history
	// value would be boxed, one allocation per pattern fired.
	s.hist = history{s: s}
	h := &s.hist
	if s.n <= o.k {
		s.window = append(s.window, StartSig)
		h.start = 1
	}
	for i := range s.ring {
		s.window = append(s.window, s.at(i).sig)
	}
	clear(s.preds)
	s.evals.Reset()
	out := s.scored[:0]
	fired := &s.recent[s.cur]
	// add merges an estimate into the prediction of its key, keeping the
	// best: each matched context is evidence, and the most confident one
	// wins.
	addP := func(k predKey, args []byte, p float64) {
		if p <= 0 {
			return
		}
		if i, ok := s.preds[k]; ok {
			out[i].p = max(out[i].p, p)
			return
		}
		s.preds[k] = len(out)
		out = append(out, scored{key: k, args: args, p: p})
	}
	add := func(k predKey, args []byte, hits float64, support int64) {
		if hits > 0 {
			addP(k, args, hits/(float64(support)+o.opts.Shrink))
		}
	}
	fire := func(pi int32, pos []int) {
		tool := o.x.Tool(pi)
		c := o.x.Counts(pi)
		if !o.x.Exact(pi) {
			add(predKey{tool: tool}, nil, float64(c.ToolHits), c.Support)
			fired.fs = append(fired.fs, firing{pattern: pi, evaluated: true})
			return
		}
		// Lazy evaluation: only now are the matched events' payloads read,
		// and only at the paths this pattern's mappings name.
		cands := o.x.evalCached(&s.evals, pi, pos, h, o.x.ranks(pi))
		if len(cands) == 0 {
			add(predKey{tool: tool}, nil, float64(c.ElseHits), c.ElseSupport)
			fired.fs = append(fired.fs, firing{pattern: pi})
			return
		}
		add(predKey{tool: tool}, nil, float64(c.ToolHits), c.Support)
		// The hashes live in one buffer per session, reused: learning
		// reads them at the next event, before they are overwritten.
		start := len(fired.hashes)
		fired.hashes = append(fired.hashes, make([]uint64, len(cands))...)
		f := firing{pattern: pi, evaluated: true, hashes: fired.hashes[start:len(fired.hashes):len(fired.hashes)]}
		if !o.x.isList(pi) {
			// One call: its p is split by whether the session made it
			// already, each side pulled towards the pattern's p by one
			// pseudo-occurrence, so that a split the traces rarely saw
			// says little.
			cd := cands[0]
			f.hashes[0] = cd.Hash
			f.repeat = h.Used(cd.Hash)
			hits, support := float64(o.x.Hits(pi, 0)), float64(c.Support)
			p0 := hits / (support + o.opts.Shrink)
			if f.repeat {
				hits, support = float64(c.RepeatHits), float64(c.Repeats)
			} else {
				hits, support = hits-float64(c.RepeatHits), support-float64(c.Repeats)
			}
			p := (hits + p0) / (support + 1)
			// A call not made yet is also worth how often it was made
			// soon, not only next (predict.Prediction.P: the session's next
			// calls include it).
			if soon, ok := o.x.Soon(pi, 0); ok && !f.repeat {
				p = max(p, float64(soon)/(float64(c.Support)+o.opts.Shrink))
			}
			addP(predKey{tool: tool, hash: cd.Hash}, cd.Args, p)
			if i, ok := s.preds[predKey{tool: tool, hash: cd.Hash}]; ok && f.repeat {
				out[i].repeat = true
			}
			fired.fs = append(fired.fs, f)
			return
		}
		prev := 1.0
		for _, cd := range cands {
			f.hashes[cd.Rank] = cd.Hash
			// An element is worth running ahead if it is called soon,
			// not only next: agents fetch lists in parallel calls or in
			// turn. Its p is how often it was called within the horizon,
			// later elements with a small pseudo-count falling with the
			// rank (the traces may never have shown them), and never
			// above the element before it, so the list keeps its order.
			hits := float64(o.x.Hits(pi, cd.Rank))
			if soon, ok := o.x.Soon(pi, cd.Rank); ok {
				hits = max(hits, float64(soon))
			}
			if cd.Rank > 0 {
				hits += 1 / float64(cd.Rank+1)
			}
			p := min(hits/(float64(c.Support)+o.opts.Shrink), prev)
			if p > 0 {
				// An element never called (a listing's first entry, a
				// folder among files) does not hold back the rest.
				prev = p
			}
			addP(predKey{tool: tool, hash: cd.Hash}, cd.Args, p)
		}
		fired.fs = append(fired.fs, f)
	}
	if first {
		// The start marker is window position 0, which has no payload.
		startPos := [1]int{0}
		for _, pi := range o.x.Start() {
			fire(pi, startPos[:])
		}
	} else {
		o.x.Match(s.window, fire)
	}
	s.scored = out
	return rank(out, o.opts.MaxPredictions)
}

type scored struct {
	key    predKey
	args   []byte
	p      float64
	repeat bool // a pattern predicts the session makes this call again
}

// rank orders predictions for speculation and cuts the list: first the
// best concrete call of the most likely next tool (its tool-only guess if
// it has none), so that the likeliest tool is never crowded out by several
// calls of another; then the rest by p, except that a concrete call of a
// tool already listed goes ahead of the tool-only guesses below it. Tool-only
// guesses are kept only for tools without concrete calls: for a tool with
// some, a warm-up adds nothing to running them.
func rank(out []scored, limit int) []predict.Prediction {
	var best string
	bestP := -1.0
	var exact []string // tools with concrete calls (few: a slice beats a map)
	for _, sc := range out {
		if sc.key.hash != 0 && !slices.Contains(exact, sc.key.tool) {
			exact = append(exact, sc.key.tool)
		}
	}
	for _, sc := range out {
		if sc.key.hash == 0 && (sc.p > bestP || (sc.p == bestP && sc.key.tool < best)) {
			best, bestP = sc.key.tool, sc.p
		}
	}
	out = slices.DeleteFunc(out, func(sc scored) bool { return sc.key.hash == 0 && slices.Contains(exact, sc.key.tool) })
	slices.SortFunc(out, func(a, b scored) int {
		if c := cmp.Compare(b.p, a.p); c != 0 {
			return c
		}
		if c := cmp.Compare(a.key.tool, b.key.tool); c != 0 {
			return c
		}
		return slices.Compare(a.args, b.args)
	})
	if i := slices.IndexFunc(out, func(sc scored) bool { return sc.key.tool == best }); i > 0 {
		first := out[i]
		copy(out[1:i+1], out[:i])
		out[0] = first
	}
	// A concrete call of a tool already listed moves ahead of the
	// tool-only guesses below that tool: only a concrete call can be run
	// ahead, and the order in which tools first appear (what the tool
	// guesses are worth) stays the same.
	for i := 1; i < len(out); i++ {
		if out[i].key.hash == 0 {
			continue
		}
		j := i
		for j > 0 && out[j-1].key.hash == 0 && out[j-1].key.tool != out[i].key.tool {
			j--
		}
		if j == i || !slices.ContainsFunc(out[:j], func(sc scored) bool { return sc.key.tool == out[i].key.tool }) {
			continue
		}
		sc := out[i]
		copy(out[j+1:i+1], out[j:i])
		out[j] = sc
	}
	if len(out) > limit {
		out = out[:limit]
	}
	if len(out) == 0 {
		return nil
	}
	// The arguments live in buffers the session reuses: the caller gets
	// copies, all in one allocation.
	n := 0
	for _, sc := range out {
		n += len(sc.args)
	}
	buf := make([]byte, 0, n)
	preds := make([]predict.Prediction, len(out))
	for i, sc := range out {
		preds[i] = predict.Prediction{Tool: sc.key.tool, P: sc.p, Repeat: sc.repeat}
		if sc.args != nil {
			at := len(buf)
			buf = append(buf, sc.args...)
			preds[i].Args = json.RawMessage(buf[at:len(buf):len(buf)])
		}
	}
	return preds
}
