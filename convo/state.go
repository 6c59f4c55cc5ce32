package convo

import (
	"slices"
	"strings"

	"github.com/ahead-dev/ahead/trace"
)

// Roles of the text a token came from.
const (
	roleUser = iota
	roleSystem
	roleAssistant
	roleCall // an earlier call's argument value
)

func roleOf(r string) uint8 {
	switch r {
	case trace.RoleUser:
		return roleUser
	case trace.RoleSystem:
		return roleSystem
	}
	return roleAssistant
}

// segment is one message (or one call's argument values) in a session's
// window, tokenised once when it became known.
type segment struct {
	role    uint8
	dropped bool // left the window
	n       int  // ordinal in the session, for recency
	size    int  // bytes it holds
	text    string
	toks    []token
	// groups index the tokens whose class set some argument reads, by
	// class set.
	groups []group
	// arg names the argument a roleCall token was the value of.
	args []string
}

// token is a token of a segment with what every argument's scorer reads
// of it, computed once.
type group struct {
	bits uint16
	idx  []int32
}

// group returns the indices of the segment's tokens of class set bits.
func (seg *segment) group(bits uint16) []int32 {
	for i := range seg.groups {
		if seg.groups[i].bits == bits {
			return seg.groups[i].idx
		}
	}
	return nil
}

func (seg *segment) index(bits uint16, i int32) {
	if n := len(seg.groups); n > 0 && seg.groups[n-1].bits == bits {
		seg.groups[n-1].idx = append(seg.groups[n-1].idx, i)
		return
	}
	for g := range seg.groups {
		if seg.groups[g].bits == bits {
			seg.groups[g].idx = append(seg.groups[g].idx, i)
			return
		}
	}
	seg.groups = append(seg.groups, group{bits, append(make([]int32, 0, 8), i)})
}

// It holds no pointer, so that the garbage collector need not scan a
// window's tokens.
type token struct {
	h     uint64 // hash of the text, set for words and when an argument reads its class set
	off   uint32 // the text is seg.text[off:off+n]
	word  int32  // vocabulary id, or -1
	shape int32  // shape id (compiled.shapeID), or -1
	bits  uint16
	n     uint8
	// initial marks a capitalised token that begins a sentence of a
	// message ("Could you…", "My order…"): such a token is a word of the
	// sentence far more often than a value (a name, an id).
	initial bool
}

// str returns the text of token i.
func (seg *segment) str(i int32) string {
	tk := &seg.toks[i]
	return seg.text[tk.off : tk.off+uint32(tk.n)]
}

// state is what a session's conversation left: a bounded window of
// segments and a little of its calls. Mining and the predictor share it,
// so that what is learned is what is later read.
//
// The work per message or call is proportional to that message or call,
// not to the window: each message is tokenised once, and each argument's
// candidate mentions (argCache) are brought up to date with the segments
// added since it was last read.
type state struct {
	c        *compiled
	maxBytes int
	segs     []*segment
	bytes    int
	n        int    // segments seen
	epoch    uint64 // counts the drops from the window
	calls    int
	lastCall int    // ordinal of the previous call's segment, or -1
	prev     string // previous call's signature, or "start"
	prevTool int    // index of the previous call's tool, or -1
	prevH    []uint64
	prevSet  []bool // the previous call set the argument (by cArg.id)
	seq      *[2]seqDist
	spoke    bool // the user spoke since the previous call
	userSeg  *segment
	// toolWords are the vocabulary ids heard from the user since the
	// previous call, or in the latest user message if none since;
	// wordIn marks them, wsum sums their logW by tool.
	toolWords []int32
	wordIn    []uint64
	wsum      []float64
	fresh     bool // toolWords were heard since the previous call
	// modelWords are the vocabulary ids of the model's latest message,
	// sorted, and msum sums their logMT by tool. They count in tool
	// choice for the calls up to the second after that message
	// (modelCalls ≤ 1): the reply the user answers says what the next
	// call does ("shall I cancel it?"), and a turn's text says what its
	// calls were for, but neither speaks for the session's later turns.
	modelWords []int32
	msum       []float64
	modelCalls int
	// year is the latest year the session's messages named (dates.go).
	year int
	// used holds hashes of argument values of earlier calls, and
	// usedSame those sent to a given argument.
	used     map[uint64]struct{}
	usedSame map[usedKey]struct{}
	// usedBits has bit h%usedFilterBits set for each hash h in used: a
	// candidate whose bit is clear was never used, without a map look-up
	// (most candidates, on every prediction).
	usedBits [usedFilterBits / 64]uint64
	caches   []argCache // by cArg.id
	sets     []uint8    // indexAll's scratch
	tmp      []entry
	ranks    hset
	// mining only: tokens by normalised text, to find values.
	index *mineIndex
	// codes, when set, look shapes up by packed key (shapeOf); a
	// Predictor shares one among its sessions.
	codes shapeCodes
	// spare is the token array of a segment that left the window, kept
	// for the next message's tokens (not when mining: its index still
	// refers to dropped segments' tokens).
	spare []token
	// lex, when mining, holds the messages' texts read once for all the
	// replays (lexicon.go); nil: each message is read when heard.
	lex *lexicon
	// arena, when replaying for mining, gives the segments and their
	// arrays (replay.go); nil: each is allocated.
	arena *arena
	// words, with lex, are the vocabulary ids of the lexicon's words
	// (replay.words); nil: looked up by text.
	words []int32
}

type usedKey struct {
	arg int32
	h   uint64
}

type tokRef struct {
	seg *segment
	i   int32
}

const maxUsed = 4096

const usedFilterBits = 1024

// mayBeUsed reports whether h may be in st.used; false means it is not.
func (st *state) mayBeUsed(h uint64) bool {
	b := h % usedFilterBits
	return st.usedBits[b/64]&(1<<(b%64)) != 0
}

func newState(c *compiled, maxBytes int, mining bool) *state {
	st := &state{c: c, maxBytes: maxBytes, prev: "start", lastCall: -1, prevTool: -1,
		used: make(map[uint64]struct{}), usedSame: make(map[usedKey]struct{})}
	st.seq = c.seqBy["start"]
	if mining {
		st.index = &mineIndex{}
	}
	return st
}

// normKey is how mining looks values up: lower case, no leading '#'.
func normKey(t string) string {
	return strings.ToLower(strings.TrimPrefix(t, "#"))
}

func (st *state) hear(msg trace.Event) {
	role := roleOf(msg.Role)
	var seg *segment
	l := st.lex.lexed(msg.Content)
	if l != nil {
		seg = st.lexedSegment(role, msg.Content, l)
	} else {
		seg = st.newSegment(role, msg.Content)
	}
	seg.n = st.n
	st.n++
	if seg.role == roleUser {
		if !st.fresh {
			st.clearWords()
		}
		st.fresh = true
		st.spoke = true
		for _, tk := range seg.toks {
			if tk.word >= 0 {
				st.addWord(tk.word)
			}
		}
		st.userSeg = seg
	}
	if seg.role == roleAssistant {
		if l != nil && l.model && st.words != nil {
			st.hearModelWords(l.mwords)
		} else {
			st.hearModel(seg)
		}
	}
	st.add(seg)
}

// hearModel makes the words of the model's message seg its latest.
func (st *state) hearModel(seg *segment) {
	st.modelWords = st.modelWords[:0]
	for _, tk := range seg.toks {
		if tk.word >= 0 {
			st.modelWords = append(st.modelWords, tk.word)
		}
	}
	slices.Sort(st.modelWords)
	st.modelWords = slices.Compact(st.modelWords)
	st.heardModel()
}

// hearModelWords is hearModel for a message the lexicon read: its words
// of tool choice by the lexicon's ids, sorted, distinct (lexed.mwords),
// which the vocabulary's ids keep in order (both number words in sorted
// order).
func (st *state) hearModelWords(ids []int32) {
	st.modelWords = st.modelWords[:0]
	for _, id := range ids {
		if w := st.words[id]; w >= 0 {
			st.modelWords = append(st.modelWords, w)
		}
	}
	st.heardModel()
}

// heardModel sums the model's latest words (sorted, distinct) by tool,
// up to maxToolWords of them.
func (st *state) heardModel() {
	c := st.c
	if len(st.modelWords) > maxToolWords {
		st.modelWords = st.modelWords[:maxToolWords]
	}
	st.modelCalls = 0
	nt := len(c.tools)
	if st.msum == nil {
		st.msum = make([]float64, nt)
	}
	clear(st.msum)
	for _, w := range st.modelWords {
		for i, lw := range c.logMT[int(w)*nt : int(w)*nt+nt] {
			st.msum[i] += lw
		}
	}
}

// modelHeard reports whether the model's latest words count in tool
// choice now (see state.modelWords).
func (st *state) modelHeard() bool {
	return len(st.modelWords) > 0 && st.modelCalls <= 1
}

const maxToolWords = 256

func (st *state) clearWords() {
	for _, w := range st.toolWords {
		st.wordIn[w/64] &^= 1 << (w % 64)
	}
	st.toolWords = st.toolWords[:0]
	clear(st.wsum)
}

func (st *state) addWord(w int32) {
	c := st.c
	if st.wordIn == nil {
		st.wordIn = make([]uint64, (len(c.words)+63)/64)
		st.wsum = make([]float64, len(c.tools))
	}
	if len(st.toolWords) >= maxToolWords || st.wordIn[w/64]&(1<<(w%64)) != 0 {
		return
	}
	st.wordIn[w/64] |= 1 << (w % 64)
	st.toolWords = append(st.toolWords, w)
	nt := len(c.tools)
	row := c.logWT[int(w)*nt : int(w)*nt+nt]
	for i, lw := range row {
		st.wsum[i] += lw
	}
}

// newSegment tokenises a message's text into a segment, its tokens
// indexed by class set. Its cost is the message's: one pass over the
// bytes, and three allocations whatever its length.
func (st *state) newSegment(role uint8, text string) *segment {
	if l := st.lex.lexed(text); l != nil {
		return st.lexedSegment(role, text, l)
	}
	seg := st.newSeg()
	seg.role, seg.size, seg.text = role, len(text), text
	// Sized by a count of the runs (a token each, at most): the shared
	// traces' messages average six bytes a token, but a third of them
	// have fewer, and growing the array would copy it and keep up to
	// twice the memory in the window.
	seg.toks = st.tokArray(countRuns(text))
	st.tokenize(seg, 0, len(text), "")
	st.addDates(seg)
	st.indexAll(seg)
	return seg
}

// indexAll indexes a new segment's tokens by class set, for the class
// sets some argument reads: a first pass numbers each token's set (in
// st.sets), the lists then share one array sized by it, in place of an
// append per token.
func (st *state) indexAll(seg *segment) {
	const none = 0xff
	var bits [16]uint16 // the class sets, by first appearance
	var count [16]int32
	ns, total := 0, 0
	sets := st.sets[:0]
	for i := range seg.toks {
		b := seg.toks[i].bits
		if !st.c.readsClass(b) {
			sets = append(sets, none)
			continue
		}
		g := 0
		for g < ns && bits[g] != b {
			g++
		}
		if g == len(bits) {
			// More class sets than a message has in practice: one
			// append per token.
			for i := range seg.toks {
				if b := seg.toks[i].bits; st.c.readsClass(b) {
					seg.index(b, int32(i))
				}
			}
			return
		}
		if g == ns {
			bits[g] = b
			ns++
		}
		count[g]++
		total++
		sets = append(sets, uint8(g))
	}
	st.sets = sets
	if total == 0 {
		return
	}
	all := st.int32s(total)
	seg.groups = st.groupArray(ns)
	var at [16]int32 // where each set's list goes on in all
	off := int32(0)
	for g := range ns {
		seg.groups[g] = group{bits: bits[g], idx: all[off : off+count[g] : off+count[g]]}
		at[g] = off
		off += count[g]
	}
	for i, g := range sets {
		if g != none {
			all[at[g]] = int32(i)
			at[g]++
		}
	}
}

// tokenize appends the tokens of seg.text[from:to] to seg (see
// eachToken), with their classes, vocabulary ids and, for those an
// argument may read, shapes and hashes. It does not index them (see
// indexAll and index).
func (st *state) tokenize(seg *segment, from, to int, arg string) {
	c := st.c
	s := seg.text[:to]
	for i := from; i < len(s); {
		off, e, j, bits, word := nextToken(s, i)
		t := s[off:e]
		i = j
		if t == "" || len(t) > maxTokenLen {
			continue
		}
		tk := token{off: uint32(off), n: uint8(len(t)), bits: bits, word: -1, shape: -1}
		tk.initial = seg.role != roleCall && sentenceStart(s, off)
		read := c.readsClass(bits)
		if read || word && len(t) >= 2 && len(t) <= 24 {
			tk.h = hashString(t)
		}
		if word && len(t) >= 2 && len(t) <= 24 {
			tk.word = c.wordID(t, tk.h)
		}
		if arg != "" || seg.role == roleCall {
			seg.args = append(seg.args, arg)
		}
		if read {
			tk.shape = st.shapeOf(t, bits)
		}
		seg.toks = append(seg.toks, tk)
	}
}

// nextToken finds the first token of s at or after i, as tokenize and the
// lexicon read it: a run of token characters from off to next, its
// trailing dots trimmed (end), bits its class set (of the trimmed token),
// word whether the run is lower-case letters only (a word that ends a
// sentence is not one). At the end of s, off == end == next == len(s).
func nextToken(s string, i int) (off, end, next int, bits uint16, word bool) {
	for i < len(s) && tokBits[s[i]] == 0 {
		i++
	}
	// The scan only gathers the token's class set: whether it is a word
	// follows from it, and its shape is spelled only for the few tokens an
	// argument reads that mix classes.
	j := i
	for j < len(s) {
		cb := tokBits[s[j]]
		if cb == 0 {
			break
		}
		bits |= cb
		j++
	}
	word = bits == lowerBit
	e := j
	for e > i && s[e-1] == '.' {
		e--
	}
	if e != j && e > i && e-i <= maxTokenLen {
		bits = classBits(s[i:e]) // trailing dots trimmed
	}
	return i, e, j, bits, word
}

// shapeOf is c.shapeOf, by packed key where st.codes allows.
func (st *state) shapeOf(t string, bits uint16) int32 {
	if st.codes == nil || bits&(bits-1) == 0 {
		return st.c.shapeOf(t, bits)
	}
	var b [16]byte
	k, ok := packShape(shapeBytes(t, b[:0]))
	if !ok {
		return st.c.shapeOf(t, bits)
	}
	if id, ok := st.codes[k]; ok {
		return id
	}
	return -1
}

// add appends a segment to the window, then drops the middle (neither the
// first system prompt nor the latest user message) while it is too big.
func (st *state) add(seg *segment) {
	st.segs = append(st.segs, seg)
	st.bytes += seg.size
	if st.index != nil {
		st.index.add(seg)
	}
	for st.bytes > st.maxBytes || len(st.segs) > maxSegments {
		drop := -1
		for i, s := range st.segs {
			if (i == 0 && s.role == roleSystem) || s == st.userSeg || i == len(st.segs)-1 {
				continue
			}
			drop = i
			break
		}
		if drop < 0 {
			break
		}
		st.bytes -= st.segs[drop].size
		st.segs[drop].dropped = true
		if st.index == nil {
			// Nothing reads a dropped segment's tokens: a cache drops
			// its entries first thing (argCache.epoch).
			if d := st.segs[drop].toks; cap(d) > cap(st.spare) {
				st.spare = d
			}
			st.segs[drop].toks = nil
		}
		st.epoch++
		st.segs = slices.Delete(st.segs, drop, drop+1)
		// The mining index keeps the dropped segment's tokens; find skips
		// them (rebuilding it per drop cost time quadratic in a session).
	}
}

const maxSegments = 256

// observe takes a call: its string argument values become candidates
// of later arguments, and the call sequence moves on.
func (st *state) observe(ev trace.Event) {
	c := st.c
	st.calls++
	st.lastCall = st.n
	st.prev = ev.Tool + ":" + string(ev.Status)
	st.seq = c.seqBy[st.prev]
	st.prevTool = -1
	ti, known := c.byName[ev.Tool]
	var ct *cTool
	if known {
		st.prevTool = ti
		ct = c.tools[ti]
		if st.prevH == nil {
			st.prevH = make([]uint64, len(c.args))
			st.prevSet = make([]bool, len(c.args))
		}
		for _, a := range ct.args {
			st.prevSet[a.id] = false
		}
	}
	st.spoke = false
	st.fresh = false
	st.modelCalls++
	seg := st.newSeg()
	seg.role, seg.n = roleCall, st.n
	st.n++
	ca := st.lex.call(ev.Args)
	if ca == nil {
		ca = parseCall(ev.Args, false)
	}
	if !ca.ok {
		return
	}
	for _, arg := range ca.args {
		if !arg.scalar {
			continue
		}
		h := arg.h
		var a *cArg
		if ct != nil {
			a = ct.args[arg.name]
		}
		if a != nil {
			st.prevH[a.id], st.prevSet[a.id] = h, true
		}
		if len(st.used) < maxUsed {
			st.used[h] = struct{}{}
			b := h % usedFilterBits
			st.usedBits[b/64] |= 1 << (b % 64)
			if a != nil {
				st.usedSame[usedKey{a.id, h}] = struct{}{}
			}
		}
	}
	seg.text = ca.text
	off := 0
	for _, arg := range ca.args {
		s, k := arg.val, arg.name
		if s == "" {
			continue
		}
		seg.size += len(s)
		before := len(seg.toks)
		st.tokenize(seg, off, off+len(s), k)
		for i := before; i < len(seg.toks); i++ {
			if b := seg.toks[i].bits; c.readsClass(b) {
				seg.index(b, int32(i))
			}
		}
		// A value is one candidate as a whole, not only by its tokens.
		if len(seg.toks) != before+1 || seg.str(int32(before)) != s {
			bits := classBits(s)
			tk := token{off: uint32(off), n: uint8(len(s)), bits: bits, word: -1, shape: -1}
			i := int32(len(seg.toks))
			seg.args = append(seg.args, k)
			if c.readsClass(bits) {
				tk.shape = st.shapeOf(s, bits)
				tk.h = hashString(s)
				seg.index(bits, i)
			}
			seg.toks = append(seg.toks, tk)
		}
		off += len(s) + 1
	}
	if len(seg.toks) > 0 {
		st.add(seg)
	}
}

// near calls f with the vocabulary ids of the words around token i.
func (seg *segment) near(i int32, f func(w int32)) {
	lo, hi := max(0, int(i)-4), min(len(seg.toks), int(i)+3)
	for j := lo; j < hi; j++ {
		if j != int(i) && seg.toks[j].word >= 0 {
			f(seg.toks[j].word)
		}
	}
}

// nearSum sums v over the vocabulary ids of the words around token i.
func (seg *segment) nearSum(i int32, v []float64) float64 {
	lo, hi := max(0, int(i)-4), min(len(seg.toks), int(i)+3)
	var s float64
	for j := lo; j < hi; j++ {
		if w := seg.toks[j].word; j != int(i) && w >= 0 {
			s += v[w]
		}
	}
	return s
}

// hset is a small open-addressing map from a hash to an int32, cleared in
// time proportional to what it holds.
type hset struct {
	keys []uint64
	vals []int32
	used []int32 // slots in use
}

func (s *hset) reset(n int) {
	size := 64
	for size < 2*n {
		size *= 2
	}
	if len(s.keys) < size {
		s.keys = make([]uint64, size)
		s.vals = make([]int32, size)
		for i := range s.vals {
			s.vals[i] = -1
		}
		s.used = s.used[:0]
		return
	}
	for _, i := range s.used {
		s.vals[i] = -1
	}
	s.used = s.used[:0]
}

// slot returns the value slot of h, and whether it was there.
func (s *hset) slot(h uint64) (*int32, bool) {
	mask := uint64(len(s.keys) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		if s.vals[i] < 0 {
			s.keys[i] = h
			s.used = append(s.used, int32(i))
			return &s.vals[i], false
		}
		if s.keys[i] == h {
			return &s.vals[i], true
		}
	}
}
