package convo

import (
	"encoding/json"
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
	role uint8
	n    int // ordinal in the session, for recency
	size int // bytes it holds
	toks []token
	// byKey indexes the tokens whose class set some argument reads.
	byKey map[uint16][]int32
	// arg names the argument a roleCall token was the value of.
	args []string
}

type token struct {
	text  string
	shape string // set when an argument reads its class set
	bits  uint16
	word  int32 // vocabulary id, or -1
}

// state is what a session's conversation left: a bounded window of
// segments and a little of its calls. Mining and the predictor share it,
// so that what is learned is what is later read.
type state struct {
	c        *compiled
	maxBytes int
	segs     []*segment
	bytes    int
	n        int // segments seen
	calls    int
	lastCall int    // ordinal of the previous call's segment, or -1
	prev     string // previous call's signature, or "start"
	prevTool string
	prevArgs map[string]string // the previous call's scalar argument values
	spoke    bool              // the user spoke since the previous call
	userSeg  *segment
	// toolWords are the vocabulary ids heard from the user since the
	// previous call, or in the latest user message if none since.
	toolWords []int32
	fresh     bool // toolWords were heard since the previous call
	// used holds argument values of earlier calls: bit 1 for any, and the
	// tool+arg they were sent to in usedSame.
	used     map[string]bool
	usedSame map[string]bool
	seen     map[string]int // scratch of argCands
	mentions []int32        // scratch of argCands
	// mining only: tokens by normalised text, to find values.
	index map[string][]tokRef
}

type tokRef struct {
	seg *segment
	i   int32
}

const maxUsed = 4096

func newState(c *compiled, maxBytes int, mining bool) *state {
	st := &state{c: c, maxBytes: maxBytes, prev: "start", lastCall: -1, used: make(map[string]bool), usedSame: make(map[string]bool)}
	if mining {
		st.index = make(map[string][]tokRef)
	}
	return st
}

// normKey is how mining looks values up: lower case, no leading '#'.
func normKey(t string) string {
	return strings.ToLower(strings.TrimPrefix(t, "#"))
}

func (st *state) hear(msg trace.Event) {
	seg := &segment{role: roleOf(msg.Role), n: st.n, size: len(msg.Content)}
	st.n++
	st.tokenize(seg, msg.Content, "")
	if seg.role == roleUser {
		if !st.fresh {
			st.toolWords = st.toolWords[:0]
		}
		st.fresh = true
		st.spoke = true
		for _, tk := range seg.toks {
			if tk.word >= 0 && !slices.Contains(st.toolWords, tk.word) && len(st.toolWords) < 256 {
				st.toolWords = append(st.toolWords, tk.word)
			}
		}
		st.userSeg = seg
	}
	st.add(seg)
}

func (st *state) tokenize(seg *segment, s, arg string) {
	eachToken(s, func(t string) {
		tk := token{text: t, bits: classBits(t), word: -1}
		if isWord(t) {
			if id, ok := st.c.vocab[t]; ok {
				tk.word = id
			}
		}
		i := int32(len(seg.toks))
		seg.toks = append(seg.toks, tk)
		if arg != "" || seg.role == roleCall {
			seg.args = append(seg.args, arg)
		}
		if st.c.readsClass(tk.bits) {
			seg.toks[i].shape = shape(t)
			if seg.byKey == nil {
				seg.byKey = make(map[uint16][]int32)
			}
			seg.byKey[tk.bits] = append(seg.byKey[tk.bits], i)
		}
	})
}

// add appends a segment to the window, then drops the middle (neither the
// first system prompt nor the latest user message) while it is too big.
func (st *state) add(seg *segment) {
	st.segs = append(st.segs, seg)
	st.bytes += seg.size
	if st.index != nil {
		st.indexSeg(seg)
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
		st.segs = slices.Delete(st.segs, drop, drop+1)
		if st.index != nil {
			st.reindex()
		}
	}
}

const maxSegments = 256

func (st *state) indexSeg(seg *segment) {
	for i, tk := range seg.toks {
		k := normKey(tk.text)
		st.index[k] = append(st.index[k], tokRef{seg, int32(i)})
		if d, ok := apply(tfDigits, tk.text); ok {
			st.index["\x00"+d] = append(st.index["\x00"+d], tokRef{seg, int32(i)})
		}
	}
}

func (st *state) reindex() {
	clear(st.index)
	for _, s := range st.segs {
		st.indexSeg(s)
	}
}

// observe takes a call: its string argument values become candidates
// of later arguments, and the call sequence moves on.
func (st *state) observe(ev trace.Event) {
	st.calls++
	st.lastCall = st.n
	st.prev = ev.Tool + ":" + string(ev.Status)
	st.prevTool = ev.Tool
	if st.prevArgs == nil {
		st.prevArgs = make(map[string]string)
	}
	clear(st.prevArgs)
	st.spoke = false
	st.fresh = false
	seg := &segment{role: roleCall, n: st.n}
	st.n++
	var args map[string]json.RawMessage
	if json.Unmarshal(ev.Args, &args) != nil {
		return
	}
	names := make([]string, 0, len(args))
	for k := range args {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		v := args[k]
		var s string
		if json.Unmarshal(v, &s) != nil {
			if len(v) == 0 || (v[0] != '-' && (v[0] < '0' || v[0] > '9')) {
				continue
			}
			s = string(v)
		}
		st.prevArgs[k] = s
		if len(st.used) < maxUsed {
			st.used[s] = true
			st.usedSame[ev.Tool+"\x00"+k+"\x00"+s] = true
		}
		if len(s) > maxTokenLen || strings.ContainsAny(s, " \t\n") {
			continue
		}
		seg.size += len(s)
		before := len(seg.toks)
		st.tokenize(seg, s, k)
		// A value is one candidate as a whole, not only by its tokens.
		if len(seg.toks) != before+1 || seg.toks[before].text != s {
			tk := token{text: s, bits: classBits(s), word: -1}
			i := int32(len(seg.toks))
			seg.toks = append(seg.toks, tk)
			seg.args = append(seg.args, k)
			if st.c.readsClass(tk.bits) {
				seg.toks[i].shape = shape(s)
				if seg.byKey == nil {
					seg.byKey = make(map[uint16][]int32)
				}
				seg.byKey[tk.bits] = append(seg.byKey[tk.bits], i)
			}
		}
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
