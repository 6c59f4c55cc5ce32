package convo

import (
	"runtime"
	"slices"
	"sync"

	"github.com/ahead-dev/ahead/trace"
)

// Issue 24: mining replays every session about six times (the tables and
// the value scorer's instances of the model on all sessions and of each
// half's, the other half's tool choice and calibration), and each replay
// heard every message anew: the scan of its bytes into tokens, their
// hashes, the sentences' starts and the dates' search were a third of
// mining the conversation, the same work six times over. A lexicon reads
// each distinct message once, before the replays; a replay then only
// gives the tokens what its model reads of them (vocabulary ids, shapes).
//
// Bound: one lexTok (8 bytes) per token of each distinct message text
// mined (a token is at least one byte and a separator: at most 4 bytes
// per byte of text, about 1 in practice: 19 MB for the 17 MB of distinct
// text of the shared -conv files), plus a map entry per distinct text;
// the texts are the sessions' own. And one callArgs per distinct
// arguments of a call mined (its names, values and hashes: a few hundred
// bytes). It lives as long as one Mine.

// lexicon holds what a replay needs of each distinct message text,
// whatever the model: read-only once built, shared by the replays that
// run side by side.
type lexicon struct {
	msgs map[string]*lexed
	// calls are the calls' arguments as observe reads them, by their
	// JSON.
	calls map[string]*callArgs
}

// lexed returns what the lexicon read of text, or nil (also when lx is
// nil).
func (lx *lexicon) lexed(text string) *lexed {
	if lx == nil {
		return nil
	}
	return lx.msgs[text]
}

// lexed is a message text's tokens, as state.tokenize finds them.
type lexed struct {
	toks []lexTok
	// months: some token names a month, so dates may be written in
	// words; they are read per replay (a date without a year takes the
	// year the session named before, dates.go). Without one, year is
	// the last year a token names (0: none), what readDates returns.
	months bool
	year   int
}

// lexTok is a token of a message text without what depends on a model
// (8 bytes: its hash is taken per replay, where a model reads it, as
// tokenize does; keeping it would add half the lexicon's memory).
type lexTok struct {
	off   uint32
	bits  uint16
	n     uint8
	flags uint8
}

const (
	lexWord    = 1 << iota // a word of tool choice (state.tokenize)
	lexInitial             // a capitalised word that begins a sentence
)

// newLexicon reads the distinct message texts of sessions, on up to
// GOMAXPROCS goroutines that it waits for.
func newLexicon(sessions []trace.Session) *lexicon {
	n := max(1, min(runtime.GOMAXPROCS(0), len(sessions)))
	parts := make([]*lexicon, n)
	var wg sync.WaitGroup
	for p := range n {
		wg.Go(func() {
			lx := &lexicon{msgs: make(map[string]*lexed), calls: make(map[string]*callArgs)}
			var buf []lexTok
			for _, s := range sessions[p*len(sessions)/n : (p+1)*len(sessions)/n] {
				for _, msg := range s.Messages {
					if _, ok := lx.msgs[msg.Content]; !ok {
						var l *lexed
						l, buf = lex(msg.Content, buf)
						lx.msgs[msg.Content] = l
					}
				}
				for _, ev := range s.Events {
					if _, ok := lx.calls[string(ev.Args)]; !ok {
						lx.calls[string(ev.Args)] = parseCall(ev.Args)
					}
				}
			}
			parts[p] = lx
		})
	}
	wg.Wait()
	lx := parts[0]
	for _, part := range parts[1:] {
		for text, l := range part.msgs {
			if _, ok := lx.msgs[text]; !ok {
				lx.msgs[text] = l
			}
		}
		for args, ca := range part.calls {
			if _, ok := lx.calls[args]; !ok {
				lx.calls[args] = ca
			}
		}
	}
	return lx
}

// call returns what the lexicon read of a call's arguments, or nil (also
// when lx is nil).
func (lx *lexicon) call(args []byte) *callArgs {
	if lx == nil {
		return nil
	}
	return lx.calls[string(args)]
}

// lex reads a message text's tokens as state.tokenize does (the same
// scan; TestTokenizeSame compares the segments made both ways), in buf
// (returned for the next text), then copied to an array of their number.
func lex(s string, buf []lexTok) (*lexed, []lexTok) {
	l := &lexed{}
	toks := buf[:0]
	for i := 0; i < len(s); {
		off, e, j, bits, word := nextToken(s, i)
		t := s[off:e]
		i = j
		if t == "" || len(t) > maxTokenLen {
			continue
		}
		lt := lexTok{off: uint32(off), n: uint8(len(t)), bits: bits}
		if word && len(t) >= 2 && len(t) <= 24 {
			lt.flags |= lexWord
		}
		if sentenceStart(s, off) {
			lt.flags |= lexInitial
		}
		if y := yearOf(t); y > 0 {
			l.year = y
		} else if monthOf(t) != 0 && t != "may" {
			l.months = true
		}
		toks = append(toks, lt)
	}
	l.toks = slices.Clone(toks)
	return l, toks
}

// lexedSegment is newSegment for a text the lexicon read: the same
// segment, with the model's vocabulary ids and shapes.
func (st *state) lexedSegment(role uint8, text string, l *lexed) *segment {
	seg := st.newSeg()
	seg.role, seg.size, seg.text = role, len(text), text
	seg.toks = st.tokArray(len(l.toks))
	c := st.c
	for _, lt := range l.toks {
		tk := token{off: lt.off, n: lt.n, bits: lt.bits, word: -1, shape: -1}
		tk.initial = role != roleCall && lt.flags&lexInitial != 0
		read := c.readsClass(lt.bits)
		word := lt.flags&lexWord != 0
		t := text[lt.off : lt.off+uint32(lt.n)]
		if read || word {
			tk.h = hashString(t)
		}
		if word {
			tk.word = c.wordID(t, tk.h)
		}
		if read {
			tk.shape = st.shapeOf(t, lt.bits)
		}
		seg.toks = append(seg.toks, tk)
	}
	if l.months {
		st.addDates(seg)
	} else if l.year > 0 {
		st.year = l.year
	}
	st.indexAll(seg)
	return seg
}
