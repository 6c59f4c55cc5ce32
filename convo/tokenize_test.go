package convo

import (
	"os"
	"slices"
	"testing"

	"github.com/ahead-dev/ahead/trace"
)

// refTokenize is tokenize as it was before it was made fast (one
// seg.index per token, classOf per byte): the reference that
// TestTokenizeSame holds the fast one to.
func (st *state) refTokenize(seg *segment, from, to int, arg string) {
	c := st.c
	s := seg.text[:to]
	for i := from; i < len(s); {
		if tokBits[s[i]] == 0 {
			i++
			continue
		}
		j := i
		var bits uint16
		word := true
		var shp [16]byte
		ns := 0
		var last byte
		for j < len(s) {
			b := s[j]
			cb := tokBits[b]
			if cb == 0 {
				break
			}
			bits |= cb
			if b-'a' > 'z'-'a' {
				word = false
			}
			if cl := classOf(b); cl != last && ns < 16 {
				last = cl
				if ns == 15 {
					shp[ns] = '*'
				} else {
					shp[ns] = cl
				}
				ns++
			}
			j++
		}
		e := j
		for e > i && s[e-1] == '.' {
			e--
		}
		t, off := s[i:e], i
		i = j
		if t == "" || len(t) > maxTokenLen {
			continue
		}
		if e != j {
			bits = classBits(t)
			ns = len(shapeBytes(t, shp[:0]))
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
		ti := int32(len(seg.toks))
		if arg != "" || seg.role == roleCall {
			seg.args = append(seg.args, arg)
		}
		if read {
			if bits&(bits-1) == 0 {
				tk.shape = c.shape1[bits31(bits)]
			} else if id, ok := c.shapeID[string(shp[:ns])]; ok {
				tk.shape = id
			}
			seg.index(bits, ti)
		}
		seg.toks = append(seg.toks, tk)
	}
}

// sameSegment reports how two tokenisations of one text differ, or "".
func sameSegment(got, want *segment) string {
	switch {
	case got.text != want.text || got.size != want.size:
		return "text differs"
	case !slices.Equal(got.toks, want.toks):
		return "tokens differ"
	case !slices.Equal(got.args, want.args):
		return "argument names differ"
	case len(got.groups) != len(want.groups):
		return "groups differ"
	}
	for i := range got.groups {
		if got.groups[i].bits != want.groups[i].bits || !slices.Equal(got.groups[i].idx, want.groups[i].idx) {
			return "groups differ"
		}
	}
	return ""
}

// TestTokenizeSame checks that a message's segment is what the reference
// tokeniser makes of it, token for token, on every message of the
// testdata and of the shared -conv traces (when they are here), and on
// edge cases: trailing dots, long runs, non-ASCII, shapes over 16 classes.
func TestTokenizeSame(t *testing.T) {
	sessions := readTestdata(t)
	c := compile(mineTestdata(t))
	texts := []string{
		"", ".", "...", "a.", "end of sentence. Next one...", "#W123.", "x" + string(make([]byte, 200)),
		"aA9aA9aA9aA9aA9aA9aA9_a-b", "naïve café ünïcode 東京 #Ä1", "ola_nordmann_1001, order #W4000001 please.",
		string(make([]byte, 97)) + "a", "a/b/c.txt:12 (x) [y] {z} \"q\" 'r' +1 -2 ~3 @4 %5",
	}
	for _, name := range []string{"tau2-airline-retail-train-conv", "minisweagent-train-conv"} {
		if _, err := os.Stat(sharedDir + name + ".jsonl.gz"); err != nil {
			continue
		}
		shared, err := trace.Collect(trace.NewReader(nil).Events(sharedDir + name + ".jsonl.gz"))
		if err != nil {
			t.Fatal(err)
		}
		if name == "tau2-airline-retail-train-conv" {
			// A real vocabulary and shapes, so that words and reads are
			// found as they are in use.
			m, err := Mine(shared, nil)
			if err != nil {
				t.Fatal(err)
			}
			c = compile(m)
		}
		sessions = append(sessions, shared...)
	}
	for _, s := range sessions {
		for _, m := range s.Messages {
			texts = append(texts, m.Content)
		}
	}
	st, ref := newState(c, DefaultMaxBytes, false), newState(c, DefaultMaxBytes, false)
	// Mining's replays read the texts from a lexicon (lexicon.go): the
	// same segments.
	lp := newLexPart()
	for _, text := range texts {
		lp.add(text, true)
	}
	lp.renumber(lp.lx.numberWords([]*lexPart{lp}))
	lexSt := newReplay(lp.lx, false).state(c, DefaultMaxBytes, trace.Session{})
	for i, text := range texts {
		for _, role := range []uint8{roleUser, roleAssistant} {
			got := st.newSegment(role, text)
			lexGot := lexSt.newSegment(role, text)
			want := &segment{role: role, size: len(text), text: text}
			ref.refTokenize(want, 0, len(text), "")
			// Dates written in words become tokens too (dates.go); the
			// reference indexes after adding them.
			ref.addDates(want)
			want.groups = nil
			for i, tk := range want.toks {
				if c.readsClass(tk.bits) {
					want.index(tk.bits, int32(i))
				}
			}
			if d := sameSegment(got, want); d != "" {
				t.Fatalf("text %d (%.60q): %s", i, text, d)
			}
			if d := sameSegment(lexGot, want); d != "" {
				t.Fatalf("text %d (%.60q), from the lexicon: %s", i, text, d)
			}
			// The model's words, by the lexicon's ids, are the segment's.
			st.hearModel(got)
			lexSt.hearModelWords(lexSt.lex.lexed(text).mwords)
			if !slices.Equal(st.modelWords, lexSt.modelWords) || !slices.Equal(st.msum, lexSt.msum) {
				t.Fatalf("text %d (%.60q): the model's words from the lexicon %v, want %v", i, text, lexSt.modelWords, st.modelWords)
			}
		}
	}
	t.Logf("%d texts", len(texts))
}
