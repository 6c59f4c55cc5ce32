package convo

import (
	"math"
	"slices"

	"github.com/ahead-dev/ahead/trace"
)

// Issue 24: mining replays the sessions about six times (replay below),
// and each replay made every message a segment of its own: the segment,
// its tokens' array and its index by class set, three to four
// allocations per message per replay, half of what mining the
// conversation allocated; the garbage collector then marked the whole
// heap of mining (both parts, patterns and conversation) for them. A
// replay goes through its sessions one after the other, and nothing of a
// session's segments outlives its replay (the states are dropped, what is
// learned is copied out): an arena per replay hands out the segments and
// their arrays, and is reset for the next session.
//
// Bound: the arena holds one session's segments (including those that
// left the window: a segment's memory is reused only by the next
// session) and grows by doubling, so at most twice the largest session's
// segments, tokens (24 bytes each) and indices (4 bytes per token an
// argument reads) stay allocated, per replay running (at most three at
// once in Mine); the shared -conv files' largest session holds 290 KB of
// messages, about 2 MB of tokens.

// replay is what one replay of sessions keeps from one session to the
// next: the lexicon it reads, the arena, and the mining index.
type replay struct {
	lex   *lexicon
	arena arena
	index *mineIndex // nil: not a mining replay
	// words are the vocabulary ids of lex.words in the model of the
	// states made last (modelOf), -1 for those it does not know; codes
	// are its shapes by packed key, as a Predictor's.
	words   []int32
	codes   shapeCodes
	modelOf *compiled
}

// newReplay returns a replay reading lex (may be nil); mining: the states
// it makes index their tokens to find values (tableMiner).
func newReplay(lex *lexicon, mining bool) *replay {
	r := &replay{lex: lex}
	if mining {
		r.index = &mineIndex{}
	}
	return r
}

// state returns the state of a new session s: the previous session's
// state and its segments must no longer be read.
func (r *replay) state(c *compiled, maxBytes int, s trace.Session) *state {
	st := newState(c, maxBytes, false)
	st.lex = r.lex
	if r.modelOf != c {
		r.modelOf = c
		r.codes = newShapeCodes(c.shapeID)
		if r.lex != nil {
			r.words = slices.Grow(r.words[:0], len(r.lex.words))[:len(r.lex.words)]
			for i, w := range r.lex.words {
				r.words[i] = c.wordID(w, hashString(w))
			}
		}
	}
	st.codes = r.codes
	if r.lex != nil {
		st.words = r.words
	}
	r.arena.reset()
	st.arena = &r.arena
	if r.index != nil {
		r.index.reset()
		r.index.wantSession(s, r.lex)
		st.index = r.index
	}
	return st
}

// arena hands out a session's segments and their arrays from blocks
// reused session after session; a full block is replaced by one twice
// its size (the segments already given keep theirs).
type arena struct {
	segs   []segment
	toks   []token
	idx    []int32
	groups []group
}

func (a *arena) reset() {
	clear(a.segs) // the last session's texts and arrays are garbage
	a.segs, a.toks, a.idx, a.groups = a.segs[:0], a.toks[:0], a.idx[:0], a.groups[:0]
}

// take returns the next n elements of *block, of length 0 and not
// zeroed after a reset: the arrays taken are filled by append or
// assignment.
func take[T any](block *[]T, n, least int) []T {
	b := *block
	if cap(b)-len(b) < n {
		b = make([]T, 0, max(2*cap(b), n, least))
	}
	*block = b[:len(b)+n]
	return b[len(b) : len(b) : len(b)+n]
}

// newSeg returns a new zero segment, from the arena when st has one.
func (st *state) newSeg() *segment {
	if st.arena == nil {
		return &segment{}
	}
	s := take(&st.arena.segs, 1, 256)
	return &s[:1][0]
}

// tokArray returns an empty array for n tokens, from the arena when st
// has one, else reusing st.spare when about the size.
func (st *state) tokArray(n int) []token {
	if st.arena != nil {
		return take(&st.arena.toks, n, 16<<10)
	}
	if cap(st.spare) >= n && cap(st.spare) <= 2*n {
		// A full window drops a message per message heard: its tokens'
		// array, if about the size, saves allocating and clearing one
		// (and the collections that follow).
		toks := st.spare[:0]
		st.spare = nil
		return toks
	}
	return make([]token, 0, n)
}

// int32s returns an array of n int32s, from the arena when st has one
// (not zeroed: the caller sets each).
func (st *state) int32s(n int) []int32 {
	if st.arena == nil {
		return make([]int32, n)
	}
	return take(&st.arena.idx, n, 16<<10)[:n]
}

// groupArray returns an array of n groups, from the arena when st has
// one (not zeroed: the caller sets each).
func (st *state) groupArray(n int) []group {
	if st.arena == nil {
		return make([]group, n)
	}
	return take(&st.arena.groups, n, 1024)[:n]
}

// addToolLogLik adds to ll, for each weight of lambdaGrid, the log of the
// probability toolProbsAt gives tool ti: the same arithmetic, with the
// call sequence's log probabilities (which no weight changes) taken once
// for all the weights. buf is scratch space, returned for the next call.
func (st *state) addToolLogLik(ll *[len(lambdaGrid)]float64, ti int, buf []float64) []float64 {
	n := len(st.c.tools)
	buf = slices.Grow(buf[:0], 2*n)[:2*n]
	base, dst := st.seqLogs(buf[:0:n]), buf[n:]
	model := st.modelHeard()
	for g, lambda := range lambdaGrid {
		for i := range base {
			s := base[i]
			if lambda > 0 && st.wsum != nil {
				s += lambda * st.wsum[i]
			}
			if lambda > 0 && model {
				s += lambda * st.msum[i]
			}
			dst[i] = s
		}
		softmaxInPlace(dst)
		ll[g] += math.Log(max(dst[ti], 1e-9))
	}
	return buf
}
