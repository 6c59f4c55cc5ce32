package convo

import (
	"encoding/json"
	"fmt"
	"math"
	"testing"

	"github.com/ahead-dev/ahead/trace"
)

// TestToolWordsBeyondContext: the words' weights in tool choice are what
// the words say beyond the call sequence. A word that tells two tools
// apart after the same context gets a large weight for its tool; a word
// heard before a tool that the previous call already implies gets little,
// though naive Bayes counted it as strongly as the first.
func TestToolWordsBeyondContext(t *testing.T) {
	var sessions []trace.Session
	for i := range 60 {
		id := fmt.Sprintf("c/%02d", i)
		tool, word := "renew_loan", "renew"
		if i%2 == 1 {
			tool, word = "return_book", "return"
		}
		item := fmt.Sprint(1000 + i)
		sessions = append(sessions, trace.Session{ID: id,
			Messages: []trace.Event{
				msg(id, trace.RoleUser, "hello, please "+word+" the book for me, item "+item),
				{Session: id, Kind: trace.KindMessage, Role: trace.RoleUser, Seq: 1, Content: "and then show my account balance"},
			},
			Events: []trace.Event{
				{Session: id, Seq: 0, Step: 1, Tool: tool, Args: json.RawMessage(`{"item":"` + item + `"}`), Status: trace.StatusOK},
				{Session: id, Seq: 1, Step: 2, Tool: "show_account", Args: json.RawMessage(`{}`), Status: trace.StatusOK},
			},
		})
	}
	m, err := Mine(sessions, &MineOptions{NoCalibration: true})
	if err != nil {
		t.Fatal(err)
	}
	if m.ToolWords != toolWordsLogit {
		t.Fatalf("ToolWords = %q, want %q", m.ToolWords, toolWordsLogit)
	}
	weight := func(tool, word string) float64 {
		for _, tm := range m.Tools {
			if tm.Name == tool {
				return tm.WordWeights[word]
			}
		}
		t.Fatalf("no tool %s in the model", tool)
		return 0
	}
	renew, ret := weight("renew_loan", "renew"), weight("return_book", "return")
	balance := weight("show_account", "balance")
	t.Logf("weights: renew→renew_loan %.3f, return→return_book %.3f, balance→show_account %.3f", renew, ret, balance)
	if renew < 1 || ret < 1 {
		t.Errorf("the words that tell the tools apart weigh %.3f and %.3f, want ≥ 1", renew, ret)
	}
	if balance > 0.2*min(renew, ret) {
		t.Errorf("a word the previous call already implies weighs %.3f, want below a fifth of %.3f", balance, min(renew, ret))
	}
	// The chosen tool follows the words in the compiled model too.
	c := compile(m)
	for _, w := range []string{"renew", "return"} {
		st := newState(c, DefaultMaxBytes, false)
		st.hear(msg("x", trace.RoleUser, "hello, please "+w+" the book for me"))
		probs := st.toolProbs(nil)
		want := map[string]string{"renew": "renew_loan", "return": "return_book"}[w]
		best := 0
		for i := range probs {
			if probs[i] > probs[best] {
				best = i
			}
		}
		if got := c.tools[best].t.Name; got != want {
			t.Errorf("after %q the likeliest tool is %s (P %.3f), want %s", w, got, probs[best], want)
		}
	}
}

// toolWordWeightsRef is toolWordWeights as it was before its passes were
// shared (choiceFit): one sum per word set, one gradient per word, one
// softmax per call. TestFitsSame holds the fast one to it, bit
// for bit.
func toolWordWeightsRef(c *compiled, sets [][]int32, samples []choiceSample) []float64 {
	nt, nv := len(c.tools), len(c.words)
	// Features: the user's words, then the model's (ids nv and up).
	nw := 2 * nv
	type row struct {
		off []float64
		set int
		y   int
	}
	rows := make([]row, 0, len(samples))
	used := make([]bool, nw)
	usedSet := make([]bool, len(sets))
	var probs []float64
	for _, s := range samples {
		y, ok := c.byName[s.tool]
		if !ok {
			continue
		}
		st := &state{c: c, seq: c.seqBy[s.prev], spoke: s.spoke}
		probs = st.toolProbsAt(probs, 0)
		if probs[y] >= certain {
			// The context alone says the tool: the call teaches the
			// words next to nothing (a coding agent's shell after its
			// shell), and skipping it keeps mining fast.
			continue
		}
		usedSet[s.words] = true
		off := make([]float64, nt)
		for i, p := range probs {
			off[i] = math.Log(max(p, 1e-12))
		}
		for _, w := range sets[s.words] {
			used[w] = true
		}
		rows = append(rows, row{off, s.words, y})
	}
	// The used sets, and for each word the used sets it is in, in
	// order: the gradient of a word's row is the sum of its sets' rows,
	// added in set order as a loop over the sets would (the same
	// floating-point sums, so the same weights, bit for bit), but row by
	// row, where the rows stay in cache.
	var active []int32
	bySet := make([][]int32, nw)
	for si, set := range sets {
		if !usedSet[si] {
			continue
		}
		active = append(active, int32(si))
		for _, w := range set {
			bySet[w] = append(bySet[w], int32(si))
		}
	}
	W := make([]float64, nw*nt) // by word, then tool
	g := make([]float64, nw*nt)
	m1 := make([]float64, nw*nt)
	m2 := make([]float64, nw*nt)
	// The words' sums and gradients by word set: the calls of a turn
	// share one, so each set's words are read once per pass, not once
	// per call.
	ws := make([]float64, len(sets)*nt)
	gs := make([]float64, len(sets)*nt)
	z := make([]float64, nt)
	const b1, b2, eps = 0.9, 0.999, 1e-8
	for it := 1; it <= choiceIters; it++ {
		clear(ws)
		for _, si := range active {
			sumRows(ws[int(si)*nt:int(si)*nt+nt], W, sets[si], nt)
		}
		clear(gs)
		for _, r := range rows {
			sum := ws[r.set*nt : r.set*nt+nt]
			best := math.Inf(-1)
			for i := range z {
				z[i] = r.off[i] + sum[i]
				best = max(best, z[i])
			}
			var tot float64
			for i := range z {
				z[i] = math.Exp(z[i] - best)
				tot += z[i]
			}
			gr := gs[r.set*nt : r.set*nt+nt]
			for i := range z {
				gr[i] += z[i] / tot
			}
			gr[r.y]--
		}
		clear(g)
		for w, list := range bySet {
			if len(list) > 0 {
				sumRows(g[w*nt:w*nt+nt], gs, list, nt)
			}
		}
		c1 := 1 - math.Pow(b1, float64(it))
		c2 := 1 - math.Pow(b2, float64(it))
		for w := range nw {
			if !used[w] {
				continue
			}
			for i := w * nt; i < w*nt+nt; i++ {
				gi := g[i] + choiceL2*W[i]
				m1[i] = b1*m1[i] + (1-b1)*gi
				m2[i] = b2*m2[i] + (1-b2)*gi*gi
				W[i] -= choiceRate * (m1[i] / c1) / (math.Sqrt(m2[i]/c2) + eps)
			}
		}
	}
	return W
}
