package pattern

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"

	"github.com/ahead-dev/ahead/internal/rawjson"
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
	// depth holds, per signature id, how many of the session's most
	// recent events with it some pattern reads: MaxEvery for a list read
	// in every recent one, Nth+1 for a reference to the Nth; absent: 1.
	depth map[int32]int
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
	nth   int   // with sig: the event nth before that one
	every bool  // a list: read in every recent event with sig
	lines bool  // a list: the lines of a text
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
	base     *csource // the first part of a value of two sources
	baseOwn  bool     // base names an event of its own (else: the event of src)
	baseText *TextSel // a line or token of base's string
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
		key := pt.Tool + "\x00" + strconv.FormatBool(pt.Exact) + "\x00" + pt.MappingKey()
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
		depth:  make(map[int32]int),
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
		steps, ok := rawjson.ParsePointer(path)
		if !ok {
			return csource{}, fmt.Errorf("path %q is not a JSON pointer", path)
		}
		s := csource{part: part, ptr: path, path: steps}
		if r != nil {
			s.ctx = r.Ctx
			if r.Sig != nil {
				s.sig, s.nth = x.intern(*r.Sig), r.Nth
				x.depth[s.sig] = max(x.depth[s.sig], r.Nth+1)
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
		s.lines = pt.List.Lines
		if s.every {
			x.depth[s.sig] = MaxEvery
		}
		cp.list = &s
	}
	for _, m := range pt.Args {
		cm := cmapping{
			key: rawjson.AppendQuoted(nil, m.Arg), constVal: m.Const, text: m.Text,
			norm: m.Norm, prefix: m.Prefix, suffix: m.Suffix, template: m.template(),
		}
		if m.Const == nil {
			s, err := source(m.From, m.Part, m.Path)
			if err != nil {
				return nil, err
			}
			cm.src = s
		}
		if b := m.Base; b != nil {
			cm.baseText = b.Text
			if b.From != nil {
				s, err := source(b.From, b.Part, b.Path)
				if err != nil {
					return nil, fmt.Errorf("base: %w", err)
				}
				cm.base, cm.baseOwn = &s, true
			} else {
				// The event src reads: its reads are counted already.
				steps, ok := rawjson.ParsePointer(b.Path)
				if !ok {
					return nil, fmt.Errorf("base: path %q is not a JSON pointer", b.Path)
				}
				cm.base = &csource{part: b.Part, ptr: b.Path, path: steps}
			}
		}
		cp.args = append(cp.args, cm)
	}
	return cp, nil
}

// historyOf returns how many of the session's most recent events with a
// signature id the pool's mappings may read (Index.depth).
func (x *Index) historyOf(sig int32) int {
	return max(x.depth[sig], 1)
}

// Len returns the number of patterns.
func (x *Index) Len() int { return len(x.pats) }

// maxContext returns the longest context of the pool: the window a
// predictor must keep.
func (x *Index) maxContext() int { return x.maxCtx }

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

// recordSoon counts one more occurrence, among those record counted, at
// which pattern i's r-th candidate was called within the Horizon. Each
// occurrence and candidate is to be counted once.
func (x *Index) recordSoon(i int32, r int) {
	if cp := x.pats[i]; r >= 0 && r < len(cp.soon) {
		cp.soon[r].Add(1)
	}
}

// horizon returns the number of calls Soon looks ahead (0 if the pool
// has no Soon counts).
func (x *Index) horizon() int { return x.mined.Horizon }

// record counts one more occurrence of pattern i's context (online
// learning). evaluated says whether its mappings could be evaluated; tool
// whether the next call was to its tool; hit is the rank of the candidate
// the next call was, or -1; repeat whether the session had made the
// pattern's call already (see Pattern.Repeats).
func (x *Index) record(i int32, evaluated, tool bool, hit int, repeat bool) {
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

// isList reports whether pattern i iterates a list.
func (x *Index) isList(i int32) bool { return x.pats[i].list != nil }

// ranks returns how many candidate ranks pattern i counts.
func (x *Index) ranks(i int32) int { return len(x.pats[i].hits) }

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
