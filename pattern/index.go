package pattern

import (
	"encoding/json"
	"fmt"
	"hash/maphash"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"unsafe"

	"github.com/ahead-dev/ahead/trace"
)

// MaxContextLimit bounds a pool's MaxContext: context keys are fixed-size
// arrays, so matching a context allocates nothing.
const MaxContextLimit = 7

// maxListScan bounds how many elements of a list are looked at for
// candidates.
const maxListScan = 256

// Signature ids within an Index.
const (
	UnknownSig int32 = 0 // a signature no pattern mentions
	StartSig   int32 = 1 // the session start
)

// Index is a compiled pool: contexts hashed for lookup, mappings parsed for
// evaluation, and the counts behind p, which Record updates. It is safe for
// concurrent use.
type Index struct {
	signer *Signer
	disc   []Discriminator
	mined  Mined
	convo  json.RawMessage // Pool.Conversation, passed through
	ids    map[Signature]int32
	sigs   []Signature
	byCtx  map[ctxKey][]int32
	pats   []*cpattern
	maxCtx int
	every  map[int32]bool // signatures some list reads in every recent event of
}

type ctxKey struct {
	n   uint8
	ids [MaxContextLimit + 1]int32
}

type cpattern struct {
	src   *Pattern // context, tool and mappings as loaded (read-only)
	tool  string
	exact bool
	list  *csource
	args  []cmapping
	// class numbers the patterns of an Index by what Eval computes from:
	// patterns with the same tool, list and mappings (differing only in
	// their contexts) give the same candidates when they read the same
	// events. -1 outside an Index.
	class int32
	// reads has bit c set if a source reads context element c (counted
	// back from the latest): the window positions the candidates depend
	// on, besides the session's per-signature memory and calls.
	reads uint8
	// The live counts (see Pattern).
	support, toolHits, elseSupport, elseHits atomic.Int64
	repeats, repeatHits                      atomic.Int64
	hits                                     []atomic.Int64
	soon                                     []atomic.Int64 // nil if the pool has none
}

type csource struct {
	ctx   int   // context element, counted back from the latest
	sig   int32 // if > 0, the session's most recent event with this signature instead
	every bool  // a list: read in every recent event with sig
	part  string
	ptr   string   // the path as a JSON pointer (memo key)
	path  []string // the path's tokens
}

type cmapping struct {
	key      []byte // the argument name as a canonical JSON string
	constVal []byte
	src      csource
	text     *TextSel
	norm     string
	prefix   string
	suffix   string
	template bool
}

// NewIndex compiles a pool. The pool is validated and must not be modified
// afterwards.
func NewIndex(p *Pool) (*Index, error) {
	if err := p.validate(); err != nil {
		return nil, err
	}
	x := newIndex(p.Discriminators)
	x.mined = p.Mined
	x.convo = p.Conversation
	classes := make(map[string]int32)
	for i := range p.Patterns {
		pt := &p.Patterns[i]
		if err := x.add(pt); err != nil {
			return nil, fmt.Errorf("%w: patterns[%d]: %v", ErrInvalid, i, err)
		}
		key := pt.Tool + "\x00" + strconv.FormatBool(pt.Exact) + "\x00" + mappingKey(*pt)
		c, ok := classes[key]
		if !ok {
			c = int32(len(classes))
			classes[key] = c
		}
		x.pats[len(x.pats)-1].class = c
	}
	return x, nil
}

func newIndex(disc []Discriminator) *Index {
	x := &Index{
		signer: NewSigner(disc),
		disc:   disc,
		ids:    map[Signature]int32{StartSignature: StartSig},
		sigs:   []Signature{{}, StartSignature},
		byCtx:  make(map[ctxKey][]int32),
		every:  make(map[int32]bool),
	}
	return x
}

// intern returns the id of a signature, adding it if new.
func (x *Index) intern(s Signature) int32 {
	if id, ok := x.ids[s]; ok {
		return id
	}
	id := int32(len(x.sigs))
	x.sigs = append(x.sigs, s)
	x.ids[s] = id
	return id
}

func (x *Index) add(pt *Pattern) error {
	cp, err := x.compile(pt)
	if err != nil {
		return err
	}
	var k ctxKey
	k.n = uint8(len(pt.Context))
	for j, s := range pt.Context {
		k.ids[j] = x.intern(s)
	}
	cp.hits = make([]atomic.Int64, len(pt.Hits))
	cp.support.Store(int64(pt.Support))
	cp.toolHits.Store(int64(pt.ToolHits))
	cp.elseSupport.Store(int64(pt.ElseSupport))
	cp.elseHits.Store(int64(pt.ElseHits))
	cp.repeats.Store(int64(pt.Repeats))
	cp.repeatHits.Store(int64(pt.RepeatHits))
	for r, h := range pt.Hits {
		cp.hits[r].Store(int64(h))
	}
	if pt.Soon != nil {
		cp.soon = make([]atomic.Int64, len(pt.Soon))
		for r, h := range pt.Soon {
			cp.soon[r].Store(int64(h))
		}
	}
	x.pats = append(x.pats, cp)
	x.byCtx[k] = append(x.byCtx[k], int32(len(x.pats)-1))
	x.maxCtx = max(x.maxCtx, len(pt.Context))
	return nil
}

func (x *Index) compile(pt *Pattern) (*cpattern, error) {
	cp := &cpattern{src: pt, tool: pt.Tool, exact: pt.Exact, class: -1}
	source := func(r *Ref, part, path string) (csource, error) {
		steps, ok := parsePointer(path)
		if !ok {
			return csource{}, fmt.Errorf("path %q is not a JSON pointer", path)
		}
		s := csource{part: part, ptr: path, path: steps}
		if r != nil {
			s.ctx = r.Ctx
			if r.Sig != nil {
				s.sig = x.intern(*r.Sig)
			}
		}
		if part != PartItem && s.sig == 0 && s.ctx >= 0 && s.ctx < 8 {
			cp.reads |= 1 << s.ctx
		}
		return s, nil
	}
	if pt.List != nil {
		s, err := source(&pt.List.From, pt.List.Part, pt.List.Path)
		if err != nil {
			return nil, err
		}
		s.every = pt.List.Every
		if s.every {
			x.every[s.sig] = true
		}
		cp.list = &s
	}
	for _, m := range pt.Args {
		cm := cmapping{
			key: appendQuoted(nil, m.Arg), constVal: m.Const, text: m.Text,
			norm: m.Norm, prefix: m.Prefix, suffix: m.Suffix, template: m.template(),
		}
		if m.Const == nil {
			s, err := source(m.From, m.Part, m.Path)
			if err != nil {
				return nil, err
			}
			cm.src = s
		}
		cp.args = append(cp.args, cm)
	}
	return cp, nil
}

// History returns how many of the session's most recent events with a
// signature id the pool's mappings may read: MaxEvery for signatures a
// list reads in every recent event of, else 1.
func (x *Index) History(sig int32) int {
	if x.every[sig] {
		return MaxEvery
	}
	return 1
}

// Len returns the number of patterns.
func (x *Index) Len() int { return len(x.pats) }

// MaxContext returns the longest context of the pool: the window a
// predictor must keep.
func (x *Index) MaxContext() int { return x.maxCtx }

// Pattern returns pattern i as loaded (its counts are those of the pool
// file; see Counts for the live ones). The result must not be modified.
func (x *Index) Pattern(i int32) *Pattern { return x.pats[i].src }

// Tool returns the target tool of pattern i.
func (x *Index) Tool(i int32) string { return x.pats[i].tool }

// Exact reports whether pattern i predicts concrete calls.
func (x *Index) Exact(i int32) bool { return x.pats[i].exact }

// Counts are a pattern's live counts (see Pattern for their meaning).
type Counts struct {
	Support, ToolHits, ElseSupport, ElseHits int64
	Repeats, RepeatHits                      int64
}

// Counts returns the live counts of pattern i.
func (x *Index) Counts(i int32) Counts {
	cp := x.pats[i]
	return Counts{cp.support.Load(), cp.toolHits.Load(), cp.elseSupport.Load(), cp.elseHits.Load(), cp.repeats.Load(), cp.repeatHits.Load()}
}

// Hits returns the live hits of pattern i at rank r (0 beyond its ranks).
func (x *Index) Hits(i int32, r int) int64 {
	cp := x.pats[i]
	if r < 0 || r >= len(cp.hits) {
		return 0
	}
	return cp.hits[r].Load()
}

// Soon returns the live count of occurrences at which pattern i's r-th
// candidate was called within the pool's Horizon (see Pattern.Soon), and
// whether the pattern has such counts.
func (x *Index) Soon(i int32, r int) (int64, bool) {
	cp := x.pats[i]
	if cp.soon == nil {
		return 0, false
	}
	if r < 0 || r >= len(cp.soon) {
		return 0, true
	}
	return cp.soon[r].Load(), true
}

// RecordSoon counts one more occurrence, among those Record counted, at
// which pattern i's r-th candidate was called within the Horizon. Each
// occurrence and candidate is to be counted once.
func (x *Index) RecordSoon(i int32, r int) {
	if cp := x.pats[i]; r >= 0 && r < len(cp.soon) {
		cp.soon[r].Add(1)
	}
}

// Horizon returns the number of calls Soon looks ahead (0 if the pool
// has no Soon counts).
func (x *Index) Horizon() int { return x.mined.Horizon }

// Record counts one more occurrence of pattern i's context (online
// learning). evaluated says whether its mappings could be evaluated; tool
// whether the next call was to its tool; hit is the rank of the candidate
// the next call was, or -1; repeat whether the session had made the
// pattern's call already (see Pattern.Repeats).
func (x *Index) Record(i int32, evaluated, tool bool, hit int, repeat bool) {
	cp := x.pats[i]
	if !evaluated {
		cp.elseSupport.Add(1)
		if tool {
			cp.elseHits.Add(1)
		}
		return
	}
	cp.support.Add(1)
	if tool {
		cp.toolHits.Add(1)
	}
	if hit >= 0 && hit < len(cp.hits) {
		cp.hits[hit].Add(1)
	}
	if repeat {
		cp.repeats.Add(1)
		if hit == 0 {
			cp.repeatHits.Add(1)
		}
	}
}

// List reports whether pattern i iterates a list.
func (x *Index) List(i int32) bool { return x.pats[i].list != nil }

// Ranks returns how many candidate ranks pattern i counts.
func (x *Index) Ranks(i int32) int { return len(x.pats[i].hits) }

// Snapshot returns the pool with the live counts.
func (x *Index) Snapshot() *Pool {
	p := &Pool{Version: Version, Mined: x.mined, Discriminators: slices.Clone(x.disc), Conversation: x.convo}
	p.Patterns = make([]Pattern, len(x.pats))
	for i := range x.pats {
		cp := x.pats[i]
		pt := *cp.src
		pt.Support = int(cp.support.Load())
		pt.ToolHits = int(cp.toolHits.Load())
		pt.ElseSupport = int(cp.elseSupport.Load())
		pt.ElseHits = int(cp.elseHits.Load())
		pt.Repeats = int(cp.repeats.Load())
		pt.RepeatHits = int(cp.repeatHits.Load())
		pt.Hits = make([]int, len(cp.hits))
		for r := range cp.hits {
			pt.Hits[r] = int(cp.hits[r].Load())
		}
		if cp.soon != nil {
			pt.Soon = make([]int, len(cp.soon))
			for r := range cp.soon {
				pt.Soon[r] = int(cp.soon[r].Load())
			}
		}
		pt.P = ratio(pt.Hits[0], pt.Support)
		p.Patterns[i] = pt
	}
	return p
}

// SigOf returns the id of an event's signature (UnknownSig if no pattern
// mentions it).
func (x *Index) SigOf(tool string, status trace.Status, args []byte) int32 {
	return x.ids[x.signer.Sign(tool, status, args)]
}

// startKey is the context of the session start alone.
var startKey = ctxKey{n: 1, ids: [MaxContextLimit + 1]int32{StartSig}}

// Start returns the patterns whose context is the session start alone:
// those predicting a session's first call. Their context element 0 is the
// start marker, which has no payload, so their mappings are constants; Eval
// them with pos {0} and a History whose At(0) is nil. The result must not
// be modified.
func (x *Index) Start() []int32 { return x.byCtx[startKey] }

// Match calls fn for every pattern whose context matches the window:
// window holds signature ids, oldest first, ending with the latest event's
// (and starting with StartSig when the session start is within reach). pos
// gives, for each context element counted back from the latest (pos[0] is
// the latest), its position in window: the most recent embedding. fn must
// not retain pos. Match looks contexts up by hash; it never scans the pool.
func (x *Index) Match(window []int32, fn func(pattern int32, pos []int)) {
	n := len(window)
	if n == 0 || n > MaxContextLimit+1 || window[n-1] <= StartSig {
		return
	}
	var seen [1 << MaxContextLimit]ctxKey
	nseen := 0
	var pos [MaxContextLimit + 1]int
	for mask := 0; mask < 1<<(n-1); mask++ {
		var k ctxKey
		ok := true
		for p := 0; p < n-1; p++ {
			if mask&(1<<p) != 0 {
				if window[p] == UnknownSig {
					ok = false
					break
				}
				k.ids[k.n] = window[p]
				k.n++
			}
		}
		if !ok {
			continue
		}
		k.ids[k.n] = window[n-1]
		k.n++
		if slices.Contains(seen[:nseen], k) {
			continue
		}
		seen[nseen] = k
		nseen++
		list := x.byCtx[k]
		if len(list) == 0 {
			continue
		}
		// The most recent embedding: match backwards greedily.
		L := int(k.n)
		p := n - 1
		pos[0] = p
		for b := 1; b < L; b++ {
			want := k.ids[L-1-b]
			for p--; p >= 0 && window[p] != want; p-- {
			}
			pos[b] = p
		}
		for _, pi := range list {
			fn(pi, pos[:L])
		}
	}
}

// Payload is an observed event as mappings read it. It memoises what
// mappings read from it; it is not safe for concurrent use.
type Payload struct {
	Tool   string
	Args   []byte
	Output []byte
	kind   int8 // 0 unknown, 1 text, 2 JSON
	memos  [8]memo
	nmemo  int
	more   []memo // the memos beyond the first 8, up to maxMemos in all
	spare  memo   // when all are taken: a scratch entry, not a cache
}

// maxMemos bounds the paths a payload memoises. Lists of records are read
// at many paths (each field of the first elements, and the lists
// themselves): a user's reservations, orders and address fields easily
// exceed 8, and a path that misses the memo is looked up again for every
// list element a candidate is built from.
const maxMemos = 32

// memo caches the value at one path of a payload.
type memo struct {
	part, ptr     string
	looked, rawOK bool
	raw           []byte
	unquoted, sOK bool
	whole         bool // s is the whole string, not only its first lines
	lines         int  // the lines decoded when not whole
	s             string
}

func (p *Payload) memo(part, ptr string) *memo {
	for i := range p.nmemo {
		if m := &p.memos[i]; m.part == part && m.ptr == ptr {
			return m
		}
	}
	for i := range p.more {
		if m := &p.more[i]; m.part == part && m.ptr == ptr {
			return m
		}
	}
	if p.nmemo < len(p.memos) {
		p.memos[p.nmemo] = memo{part: part, ptr: ptr}
		p.nmemo++
		return &p.memos[p.nmemo-1]
	}
	if len(p.memos)+len(p.more) < maxMemos {
		p.more = append(p.more, memo{part: part, ptr: ptr})
		return &p.more[len(p.more)-1]
	}
	p.spare = memo{part: part, ptr: ptr}
	return &p.spare
}

// MakePayload returns the payload of ev. It shares ev's memory (the output
// is viewed, not copied: outputs can be megabytes), so ev must not change
// while the payload is in use.
func MakePayload(ev *trace.Event) Payload {
	return Payload{Tool: ev.Tool, Args: ev.Args, Output: unsafe.Slice(unsafe.StringData(ev.Output), len(ev.Output))}
}

// Reset makes p the payload of ev, as MakePayload does, reusing the memory
// of its memos.
func (p *Payload) Reset(ev *trace.Event) {
	more := p.more
	clear(more) // they view the previous event's output
	*p = MakePayload(ev)
	p.more = more[:0]
}

// Retained is the memory the payload's memos hold beyond the event they
// view (decoded strings and the memos past the first eight), in bytes:
// what a holder of the payload keeps besides the event's own Args and
// Output.
func (p *Payload) Retained() int64 {
	n := int64(cap(p.more)) * int64(unsafe.Sizeof(memo{}))
	for i := range p.nmemo {
		n += int64(len(p.memos[i].s))
	}
	for i := range p.more {
		n += int64(len(p.more[i].s))
	}
	return n
}

// outputIsJSON reports whether the output is a JSON document (an object or
// an array), as opposed to text.
func (p *Payload) outputIsJSON() bool {
	if p.kind == 0 {
		p.kind = 1
		if i := skipSpace(p.Output, 0); i < len(p.Output) && (p.Output[i] == '{' || p.Output[i] == '[') {
			p.kind = 2
		}
	}
	return p.kind == 2
}

// History is what mappings read while a pattern is evaluated.
type History interface {
	// At returns the event at a window position given to Match's fn.
	At(pos int) *Payload
	// Last returns the session's most recent event with a signature id,
	// or nil.
	Last(sig int32) *Payload
	// Recent returns the session's i-th most recent event with a
	// signature id (0 is the most recent, as Last), or nil; i <
	// MaxEvery.
	Recent(sig int32, i int) *Payload
	// Used reports whether the session already made a call (by CallHash).
	Used(call uint64) bool
}

// Candidate is one call a pattern predicts.
type Candidate struct {
	// Args is the canonical JSON object of the arguments; nil for a
	// tool-only pattern.
	Args []byte
	Hash uint64 // CallHash(tool, Args); 0 for a tool-only pattern
	Rank int    // position among the pattern's candidates
}

var callSeed = maphash.MakeSeed()

// CallHash identifies a call within this process: tool and canonical
// arguments (see callkey), hashed.
func CallHash(tool string, canonArgs []byte) uint64 {
	var h maphash.Hash
	h.SetSeed(callSeed)
	h.WriteString(tool)
	h.WriteByte(0)
	h.Write(canonArgs)
	return h.Sum64()
}

// Eval evaluates pattern i's mappings on the matched events (pos, from
// Match) and appends its candidates to dst: one call, or, for a list
// pattern, one per list element not already called in the session, at
// most max, in list order. A tool-only pattern gives one candidate with
// nil Args. Nothing is appended when a source is missing.
func (x *Index) Eval(i int32, pos []int, h History, max int, dst []Candidate) []Candidate {
	dst, _ = x.evalCompiled(x.pats[i], pos, h, max, dst, nil)
	return dst
}

// EvalCache remembers the candidates Index.EvalCached computed for one
// state of a History (one prediction), and holds their arguments. A
// matched window names the same events in many contexts, and many
// patterns differ only in their contexts: they need evaluating once. The
// zero value is ready to use; it is not safe for concurrent use.
type EvalCache struct {
	memo  map[evalKey]evalEntry
	cands []Candidate
	buf   []byte // backs the candidates' Args
}

// evalKey names an evaluation: the pattern's class and the window
// positions it reads (one byte per context element, position + 1).
type evalKey struct {
	class int32
	pos   uint64
}

type evalEntry struct {
	start, end int // in cands
	max        int // the max they were computed with
}

// Reset forgets the cached candidates, for a new state of the History:
// the candidates returned so far are overwritten from then on.
func (c *EvalCache) Reset() {
	clear(c.memo)
	clear(c.cands) // drop references into released arguments
	c.cands = c.cands[:0]
	c.buf = c.buf[:0]
}

// EvalCached is Eval for predictors: it returns pattern i's candidates
// (the caller must not modify them), computing them only if c holds none
// for the same evaluation since its last Reset. The History must not
// change between Resets. The candidates and their Args are valid until
// the next Reset.
func (x *Index) EvalCached(c *EvalCache, i int32, pos []int, h History, max int) []Candidate {
	cp := x.pats[i]
	key, ok := cp.evalKey(pos)
	if !ok {
		start := len(c.cands)
		c.cands, c.buf = x.evalCompiled(cp, pos, h, max, c.cands, c.buf)
		return c.cands[start:len(c.cands):len(c.cands)]
	}
	if e, ok := c.memo[key]; ok {
		n := e.end - e.start
		switch {
		case cp.list == nil:
			// One call (or none), whatever max.
			return c.cands[e.start:e.end:e.end]
		case max <= e.max || n < e.max:
			// A list's candidates are those of the first elements not
			// used: with a smaller max, a prefix; if the list ran out
			// before e.max, the same with any max.
			n = min(n, max)
			if n < 0 {
				n = 0
			}
			return c.cands[e.start : e.start+n : e.start+n]
		}
	}
	start := len(c.cands)
	c.cands, c.buf = x.evalCompiled(cp, pos, h, max, c.cands, c.buf)
	if c.memo == nil {
		c.memo = make(map[evalKey]evalEntry)
	}
	c.memo[key] = evalEntry{start: start, end: len(c.cands), max: max}
	return c.cands[start:len(c.cands):len(c.cands)]
}

// evalKey returns the key of the pattern's evaluation at pos, if it has
// one.
func (cp *cpattern) evalKey(pos []int) (evalKey, bool) {
	if cp.class < 0 {
		return evalKey{}, false
	}
	k := evalKey{class: cp.class}
	for c := range 8 {
		if cp.reads&(1<<c) == 0 || c >= len(pos) {
			continue
		}
		v := pos[c] + 1
		if v < 0 || v > 255 {
			return evalKey{}, false
		}
		k.pos |= uint64(v) << (8 * c)
	}
	return k, true
}

// evalCompiled appends the pattern's candidates to dst (see Eval), and
// their arguments to buf, which backs them.
func (x *Index) evalCompiled(cp *cpattern, pos []int, h History, max int, dst []Candidate, buf []byte) ([]Candidate, []byte) {
	if !cp.exact {
		return append(dst, Candidate{}), buf
	}
	if cp.list == nil {
		start := len(buf)
		b, ok := cp.appendArgs(buf, pos, h, nil)
		if !ok {
			return dst, b[:start]
		}
		args := b[start:len(b):len(b)]
		return append(dst, Candidate{Args: args, Hash: CallHash(cp.tool, args)}), b
	}
	start := len(dst)
	rank, scanned := 0, 0
	each := func(n int, el []byte) bool {
		if scanned++; scanned > maxListScan || rank >= max {
			return false
		}
		at := len(buf)
		b, ok := cp.appendArgs(buf, pos, h, el)
		if !ok {
			buf = b[:at]
			return true
		}
		args := b[at:len(b):len(b)]
		hash := CallHash(cp.tool, args)
		if h.Used(hash) || slices.ContainsFunc(dst[start:], func(c Candidate) bool { return c.Hash == hash }) {
			buf = b[:at]
			return true
		}
		buf = b
		dst = append(dst, Candidate{Args: args, Hash: hash, Rank: rank})
		rank++
		return true
	}
	if cp.list.every {
		// Lists the session has started on come first, the most recent
		// first, then the untouched ones: an agent going through the
		// elements of several lists (the flights of each booking) finishes
		// one before it starts the next, even when a newer list arrived
		// in between. Whether a list was started is worked out once, when
		// first needed.
		const (
			unknown = iota
			started
			untouched
		)
		var state [MaxEvery]uint8
		for pass := 0; pass < 2 && rank < max && scanned <= maxListScan; pass++ {
			for r := range MaxEvery {
				p := h.Recent(cp.list.sig, r)
				if p == nil {
					break
				}
				list, ok := p.listAt(cp.list)
				if !ok {
					continue
				}
				if state[r] == unknown {
					state[r] = untouched
					var s bool
					if s, buf = cp.started(list, pos, h, buf); s {
						state[r] = started
					}
				}
				if (state[r] == started) != (pass == 0) {
					continue
				}
				eachElem(list, each)
				if rank >= max || scanned > maxListScan {
					break
				}
			}
		}
		return dst, buf
	}
	list, text, _, ok := cp.resolve(cp.list, pos, h, nil)
	if !ok || text {
		return dst, buf
	}
	eachElem(list, each)
	return dst, buf
}

// started reports whether the session already made the call of one of
// list's elements. It uses buf's spare capacity as scratch, and returns
// it with the same length.
func (cp *cpattern) started(list []byte, pos []int, h History, buf []byte) (bool, []byte) {
	found := false
	at := len(buf)
	eachElem(list, func(n int, el []byte) bool {
		if n >= maxListScan {
			return false
		}
		b, ok := cp.appendArgs(buf, pos, h, el)
		buf = b[:at]
		if ok && h.Used(CallHash(cp.tool, b[at:])) {
			found = true
		}
		return !found
	})
	return found, buf
}

// listAt returns the JSON array a list source names in this event.
func (p *Payload) listAt(s *csource) ([]byte, bool) {
	raw := p.Args
	if s.part == PartOutput {
		if !p.outputIsJSON() {
			return nil, false
		}
		raw = p.Output
	}
	if len(s.path) == 0 {
		return raw, raw != nil
	}
	return p.lookup(s.part, raw, s.ptr, s.path)
}

// lookup returns the value at a path of a part, through the memo: paths
// that share a prefix (the fields of one list element) step from the
// prefix's value instead of scanning from the top again.
func (p *Payload) lookup(part string, raw []byte, ptr string, path []string) ([]byte, bool) {
	m := p.memo(part, ptr)
	if m.looked {
		return m.raw, m.rawOK
	}
	from := raw
	if len(path) > 1 {
		parent, ok := p.lookup(part, raw, ptr[:strings.LastIndexByte(ptr, '/')], path[:len(path)-1])
		if !ok {
			m = p.memo(part, ptr) // the entry may have moved to the spare slot
			m.looked, m.rawOK = true, false
			return nil, false
		}
		from, path = parent, path[len(path)-1:]
		m = p.memo(part, ptr)
	}
	m.looked = true
	m.raw, m.rawOK = lookup(from, path)
	return m.raw, m.rawOK
}

// resolve returns the value a source names: JSON, or text (for a text
// output read whole), and the event it was read from (nil for a list
// item).
func (cp *cpattern) resolve(s *csource, pos []int, h History, item []byte) (val []byte, text bool, from *Payload, ok bool) {
	if s.part == PartItem {
		if item == nil {
			return nil, false, nil, false
		}
		if len(s.path) == 0 {
			return item, false, nil, true
		}
		v, ok := lookup(item, s.path)
		return v, false, nil, ok
	}
	var p *Payload
	if s.sig > 0 {
		p = h.Last(s.sig)
	} else if s.ctx < len(pos) {
		p = h.At(pos[s.ctx])
	}
	if p == nil {
		return nil, false, nil, false
	}
	raw := p.Args
	if s.part == PartOutput {
		raw = p.Output
		if !p.outputIsJSON() {
			if len(s.path) > 0 {
				return nil, false, p, false
			}
			return raw, true, p, true
		}
	}
	if raw == nil {
		return nil, false, p, false
	}
	if len(s.path) == 0 {
		return raw, false, p, true
	}
	v, ok := p.lookup(s.part, raw, s.ptr, s.path)
	return v, false, p, ok
}

// appendArgs appends the canonical arguments object.
func (cp *cpattern) appendArgs(buf []byte, pos []int, h History, item []byte) ([]byte, bool) {
	buf = append(buf, '{')
	for j := range cp.args {
		m := &cp.args[j]
		if j > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, m.key...)
		buf = append(buf, ':')
		var ok bool
		if buf, ok = cp.appendValue(buf, m, pos, h, item); !ok {
			return buf, false
		}
	}
	return append(buf, '}'), true
}

func (cp *cpattern) appendValue(buf []byte, m *cmapping, pos []int, h History, item []byte) ([]byte, bool) {
	if m.constVal != nil {
		return append(buf, m.constVal...), true
	}
	raw, text, from, ok := cp.resolve(&m.src, pos, h, item)
	if !ok || len(raw) == 0 {
		return buf, false
	}
	if !m.template {
		if text {
			return appendQuoted(buf, bytesString(raw)), true
		}
		c, ok := canonValue(raw)
		if !ok {
			return buf, false
		}
		return append(buf, c...), true
	}
	var s string
	switch {
	case text:
		s = bytesString(raw)
	case raw[0] == '"':
		if from != nil {
			// Patterns read the same string (a command, a summary)
			// again and again; decode it once per event, and only as
			// many lines as they read.
			need := -1
			if m.text != nil && m.text.Line >= 0 {
				need = m.text.Line + 1
			}
			mm := from.memo(m.src.part, m.src.ptr)
			if !mm.unquoted || (!mm.whole && (need < 0 || need > mm.lines)) {
				mm.unquoted = true
				mm.s, mm.sOK, mm.whole = unquoteLines(raw, need)
				mm.lines = need
			}
			s, ok = mm.s, mm.sOK
		} else {
			s, ok = unquote(raw)
		}
		if !ok {
			return buf, false
		}
	case raw[0] == '-' || (raw[0] >= '0' && raw[0] <= '9'):
		s = bytesString(raw)
	default:
		return buf, false
	}
	return appendTemplate(buf, s, m.text, m.norm, m.prefix, m.suffix)
}

// appendTemplate applies a text selection, a normalisation and a template
// to s and appends the result as a JSON string.
func appendTemplate(buf []byte, s string, sel *TextSel, norm, prefix, suffix string) ([]byte, bool) {
	var ok bool
	if sel != nil {
		if s, ok = lineAt(s, sel.Line); !ok {
			return buf, false
		}
		if sel.Token != nil {
			if s, ok = tokenAt(s, *sel.Token); !ok {
				return buf, false
			}
		}
	}
	if s, ok = normalize(s, norm); !ok {
		return buf, false
	}
	buf = append(buf, '"')
	buf = appendEscaped(buf, prefix)
	buf = appendEscaped(buf, s)
	buf = appendEscaped(buf, suffix)
	return append(buf, '"'), true
}

// bytesString views b as a string without copying; b must not change.
func bytesString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

func ratio(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}
