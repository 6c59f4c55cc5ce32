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
	// words are the distinct words (isWordTok) of the texts, sorted: a
	// replay looks a token's vocabulary id up in an array by its index
	// here (replay.words), not by its text.
	words []string
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
	// wids are the lexicon's ids (lexicon.words) of the tokens that are
	// words (isWordTok), in order; mwords, for a text the model said,
	// the ids of its words of tool choice (lexWord), sorted, distinct:
	// what hearModel reads, in the order it sums them.
	wids   []int32
	mwords []int32
	model  bool // the model said the text
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
	parts := make([]*lexPart, n)
	var wg sync.WaitGroup
	for p := range n {
		wg.Go(func() {
			lp := newLexPart()
			for _, s := range sessions[p*len(sessions)/n : (p+1)*len(sessions)/n] {
				for _, msg := range s.Messages {
					lp.add(msg.Content, roleOf(msg.Role) == roleAssistant)
				}
				for _, ev := range s.Events {
					if _, ok := lp.lx.calls[string(ev.Args)]; !ok {
						lp.lx.calls[string(ev.Args)] = parseCall(ev.Args, true)
					}
				}
			}
			parts[p] = lp
		})
	}
	wg.Wait()
	lx := parts[0].lx
	for _, part := range parts[1:] {
		for text, l := range part.lx.msgs {
			if kept, ok := lx.msgs[text]; !ok {
				lx.msgs[text] = l
			} else if l.model {
				kept.model = true
			}
		}
		for args, ca := range part.lx.calls {
			if _, ok := lx.calls[args]; !ok {
				lx.calls[args] = ca
			}
		}
	}
	ids := lx.numberWords(parts)
	for _, part := range parts {
		wg.Go(func() { part.renumber(ids) })
	}
	wg.Wait()
	return lx
}

// lexPart is the part of a lexicon one goroutine reads: its texts, and
// their words numbered in the order found (renumbered by the lexicon's
// once the parts are merged).
type lexPart struct {
	lx    *lexicon
	texts []*lexed // in the order read
	words []string // by the part's word id
	ids   map[string]int32
	buf   []lexTok
}

func newLexPart() *lexPart {
	return &lexPart{lx: &lexicon{msgs: make(map[string]*lexed), calls: make(map[string]*callArgs)}, ids: make(map[string]int32)}
}

// add reads text, unless read before; model: the model said it.
func (lp *lexPart) add(text string, model bool) {
	if l, ok := lp.lx.msgs[text]; ok {
		l.model = l.model || model
		return
	}
	var l *lexed
	l, lp.buf = lex(text, lp.buf, lp.wordID)
	l.model = model
	lp.lx.msgs[text] = l
	lp.texts = append(lp.texts, l)
}

// wordID returns the part's id of word w, numbering it if new.
func (lp *lexPart) wordID(w string) int32 {
	id, ok := lp.ids[w]
	if !ok {
		id = int32(len(lp.words))
		lp.ids[w] = id
		lp.words = append(lp.words, w)
	}
	return id
}

// numberWords numbers the words of all parts in sorted order (as compile
// numbers a vocabulary) in lx.words, and returns the ids by word.
func (lx *lexicon) numberWords(parts []*lexPart) map[string]int32 {
	ids := parts[0].ids
	for _, part := range parts[1:] {
		for _, w := range part.words {
			if _, ok := ids[w]; !ok {
				ids[w] = 0
			}
		}
	}
	lx.words = make([]string, 0, len(ids))
	for w := range ids {
		lx.words = append(lx.words, w)
	}
	slices.Sort(lx.words)
	for i, w := range lx.words {
		ids[w] = int32(i)
	}
	return ids
}

// renumber gives the part's texts' words the lexicon's ids, and the texts
// the model said their sorted words of tool choice.
func (lp *lexPart) renumber(ids map[string]int32) {
	to := make([]int32, len(lp.words))
	for i, w := range lp.words {
		to[i] = ids[w]
	}
	for _, l := range lp.texts {
		for i, id := range l.wids {
			l.wids[i] = to[id]
		}
		if !l.model {
			continue
		}
		k := 0
		for _, lt := range l.toks {
			if !isWordTok(lt) {
				continue
			}
			if lt.flags&lexWord != 0 {
				l.mwords = append(l.mwords, l.wids[k])
			}
			k++
		}
		slices.Sort(l.mwords)
		l.mwords = slices.Clip(slices.Compact(l.mwords))
	}
}

// isWordTok reports whether a token is a word that statistics may keep
// (isWord): the tokens that have a word id (lexed.wids).
func isWordTok(lt lexTok) bool { return lt.bits == lowerBit && lt.n >= 2 && lt.n <= 24 }

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
// (returned for the next text), then copied to an array of their number;
// wordID numbers the words (isWordTok).
func lex(s string, buf []lexTok, wordID func(string) int32) (*lexed, []lexTok) {
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
		if isWordTok(lt) {
			l.wids = append(l.wids, wordID(t))
		}
		toks = append(toks, lt)
	}
	l.toks = slices.Clone(toks)
	l.wids = slices.Clip(l.wids)
	return l, toks
}

// lexedSegment is newSegment for a text the lexicon read: the same
// segment, with the model's vocabulary ids and shapes.
func (st *state) lexedSegment(role uint8, text string, l *lexed) *segment {
	seg := st.newSeg()
	seg.role, seg.size, seg.text = role, len(text), text
	seg.toks = st.tokArray(len(l.toks))
	c := st.c
	k := 0 // l.wids[k] is the next word's
	for _, lt := range l.toks {
		tk := token{off: lt.off, n: lt.n, bits: lt.bits, word: -1, shape: -1}
		tk.initial = role != roleCall && lt.flags&lexInitial != 0
		read := c.readsClass(lt.bits)
		word := lt.flags&lexWord != 0
		t := text[lt.off : lt.off+uint32(lt.n)]
		if read || word {
			tk.h = hashString(t)
		}
		if isWordTok(lt) {
			if word {
				if st.words != nil {
					tk.word = st.words[l.wids[k]]
				} else {
					tk.word = c.wordID(t, tk.h)
				}
			}
			k++
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
