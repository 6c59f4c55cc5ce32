package convo

import (
	"cmp"
	"math/rand/v2"
	"slices"

	"github.com/ahead-dev/ahead/trace"
	"testing"
)

// TestObservedValues: the values of a call's arguments become tokens of
// its segment spelled as they were sent, whatever values before them
// (empty, with spaces, not strings) were left out. An empty value once
// shifted every later token by a byte ("#W2702727" read "\n#W270272").
func TestObservedValues(t *testing.T) {
	c := compile(mineTestdata(t))
	tests := []struct {
		args string
		want []string
	}{
		{`{"a":"","b":"#W2702727","c":"62701"}`, []string{"#W2702727", "62701"}},
		{`{"a":"x y","b":"","c":"IL","d":""}`, []string{"IL"}},
		{`{"a":true,"b":"","c":12,"d":"ola_nordmann_1"}`, []string{"12", "ola_nordmann_1"}},
		{`{"a":"","b":""}`, nil},
	}
	for _, tt := range tests {
		st := newState(c, DefaultMaxBytes, false)
		st.observe(call("s", "some_tool", tt.args))
		var got []string
		for _, seg := range st.segs {
			for i := range seg.toks {
				got = append(got, seg.str(int32(i)))
			}
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("observe(%s): tokens %q, want %q", tt.args, got, tt.want)
		}
	}
}

// TestStaticBase: the static score of every mention an argument reads is
// dot(w, staticX) to the bit, for every normalisation, in messages of each
// role and in calls' values. (TestPredictionsGolden checks the whole of
// prediction on the shared traces; this runs without them.)
func TestStaticBase(t *testing.T) {
	m := mineTestdata(t)
	c := compile(m)
	st := newState(c, DefaultMaxBytes, false)
	for _, s := range readTestdata(t) {
		for ev := range trace.Known(s) {
			if ev.IsMessage() {
				st.hear(ev)
			} else {
				st.observe(ev)
			}
		}
	}
	w := c.w
	checked := 0
	for _, a := range c.args {
		for _, seg := range st.segs {
			for _, k := range a.keys {
				for _, i := range seg.group(k) {
					pre := staticPre(a, w, seg, i)
					for _, tl := range a.tfs {
						x := staticX(a, seg, i, tl.lp)
						if got, want := staticBase(a, w, pre, tl.lp, seg.toks[i].initial), dot(w, x[:]); got != want {
							t.Fatalf("%s: token %q tf %d: staticBase %v, dot %v", a.a.Name, seg.str(i), tl.tf, got, want)
						}
						checked++
					}
				}
			}
		}
	}
	if checked < 100 {
		t.Errorf("checked %d mentions, want at least 100", checked)
	}
	t.Logf("checked %d mentions", checked)
}

// TestTopTools: topTools gives the first maxTools of a stable sort by
// descending probability, ties (frequent: equal counts) in index order.
func TestTopTools(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for n := range 20 {
		for range 50 {
			probs := make([]float64, n)
			for i := range probs {
				probs[i] = float64(rng.IntN(4)) / 4 // many ties
			}
			want := make([]int, n)
			for i := range want {
				want[i] = i
			}
			slices.SortStableFunc(want, func(a, b int) int { return cmp.Compare(probs[b], probs[a]) })
			want = want[:min(maxTools, n)]
			if got := topTools(probs, nil); !slices.Equal(got, want) {
				t.Fatalf("topTools(%v) = %v, want %v", probs, got, want)
			}
		}
	}
}

// TestShapeCodes: looking a shape up by packed key gives the id the
// string look-up gives, for tokens of every kind: the testdata's, long
// ones whose shape is cut, and whole call values with bytes no token has.
func TestShapeCodes(t *testing.T) {
	c := compile(mineTestdata(t))
	st := newState(c, DefaultMaxBytes, false)
	st.codes = newShapeCodes(c.shapeID)
	var toks []string
	for _, s := range readTestdata(t) {
		for _, m := range s.Messages {
			eachToken(m.Content, func(tok string) { toks = append(toks, tok) })
		}
		for _, ev := range s.Events {
			eachToken(string(ev.Args), func(tok string) { toks = append(toks, tok) })
		}
	}
	toks = append(toks, "a1B2c3D4e5F6g7H8i9J0", "x-1_y.2/z~3+w@4#v%5", "a:b,c", "Émile_9", "9a", "a9")
	found := 0
	for _, tok := range toks {
		bits := classBits(tok)
		got, want := st.shapeOf(tok, bits), c.shapeOf(tok, bits)
		if got != want {
			t.Errorf("shape id of %q: %d by packed key, %d by string", tok, got, want)
		}
		if got >= 0 && bits&(bits-1) != 0 {
			found++
		}
	}
	if found == 0 {
		t.Error("no token of several classes had a known shape: the test reads nothing")
	}
}

// TestSpareTokens: in a full window, the token array of the message that
// left it carries the next message's tokens, and the dropped segment
// keeps none (nothing may read them); no two live segments share one.
// Mining keeps a dropped segment's tokens (its index refers to them).
func TestSpareTokens(t *testing.T) {
	c := compile(mineTestdata(t))
	text := "please renew the loan of member ola_nordmann_8812 for book 9780141439518 today"
	for _, mining := range []bool{false, true} {
		st := newState(c, 3*len(text), mining)
		st.hear(msg("s", "system", text))
		base := map[*segment]*token{} // every segment heard, by its array
		reused := 0
		for range 6 {
			st.hear(msg("s", "assistant", text))
			seg := st.segs[len(st.segs)-1]
			p := &seg.toks[:1][0]
			for old, q := range base {
				if q == p && old.dropped {
					reused++
				}
			}
			base[seg] = p
			live := map[*token]bool{}
			for _, s := range st.segs {
				if live[&s.toks[:1][0]] {
					t.Fatalf("mining=%v: two live segments share a token array", mining)
				}
				live[&s.toks[:1][0]] = true
			}
			for old := range base {
				if old.dropped && (old.toks == nil) == mining {
					t.Fatalf("mining=%v: a dropped segment has %d tokens", mining, len(old.toks))
				}
			}
		}
		if got := reused > 0; got == mining {
			t.Errorf("mining=%v: a dropped segment's tokens reused %d times", mining, reused)
		}
	}
}
