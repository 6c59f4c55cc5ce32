package convo

import (
	"github.com/ahead-dev/ahead/trace"
)

// Choosing lambda, the weight of the words in tool choice: each half of
// the cross-fit predicts the other half's tools at each weight of
// lambdaGrid, and the weight under which both did best is kept.

// lambdaGrid are the weights of the words that Mine chooses from.
var lambdaGrid = [...]float64{0, 0.02, 0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.7, 1}

// toolLogLik replays sessions with a model fitted on others and adds, for
// each weight of lambdaGrid, the log probability it gave each call's tool.
// lex may be nil.
func toolLogLik(ll *[len(lambdaGrid)]float64, c *compiled, sessions []trace.Session, maxBytes int, lex *lexicon) {
	r := newReplay(lex, false)
	var buf []float64
	for _, s := range sessions {
		buf = replayLogLik(ll, c, r, s, maxBytes, buf)
	}
}

// replayLogLik is toolLogLik of one session, replayed with r; buf is
// scratch, returned for the next.
func replayLogLik(ll *[len(lambdaGrid)]float64, c *compiled, r *replay, s trace.Session, maxBytes int, buf []float64) []float64 {
	st := r.state(c, maxBytes, s)
	for ev := range trace.Known(s) {
		if ev.IsMessage() {
			st.hear(ev)
			continue
		}
		if ti, ok := c.byName[ev.Tool]; ok {
			buf = st.addToolLogLik(ll, ti, buf)
		}
		st.observe(ev)
	}
	return buf
}

// toolLogLikSets is toolLogLik on the sessions of all (the sessions a
// table pass tm replayed) that pick selects, read from what tm recorded
// at each call in place of a replay: the context, and the words heard
// with their ids in tm's vocabulary, a superset of c's (a word seen in
// enough sessions of a half is seen in enough of all). Tool choice reads
// nothing else of the state, and a vocabulary's ids are in the order of
// its words, so the words of c are tm's in the same order, with the same
// sums, and the log likelihoods are toolLogLik's, bit for bit
// (TestToolLogLikSets). A session where tm's words reached
// maxToolWords, which a smaller vocabulary may not, is replayed.
func toolLogLikSets(ll *[len(lambdaGrid)]float64, c *compiled, tm *tableMiner, all []trace.Session, pick func(int) bool, maxBytes int, lex *lexicon) {
	nv, nt := int32(len(tm.vocab)), len(c.tools)
	ids := make([]int32, nv) // tm's word id → c's, or -1
	for i, w := range tm.vocab {
		id, ok := c.vocab[w]
		if !ok {
			id = -1
		}
		ids[i] = id
	}
	var buf []float64
	var r *replay // for the sessions replayed
	st := &state{c: c, wsum: make([]float64, nt), msum: make([]float64, nt)}
	from := int32(0)
	for i := range all {
		samples := tm.samples[from:tm.ends[i]]
		from = tm.ends[i]
		if !pick(i) {
			continue
		}
		capped := false
		for _, sm := range samples {
			u, m := splitSet(tm.wordSets[sm.words], nv)
			capped = capped || len(u) >= maxToolWords || len(m) >= maxToolWords
		}
		if capped {
			if r == nil {
				r = newReplay(lex, false)
			}
			buf = replayLogLik(ll, c, r, all[i], maxBytes, buf)
			continue
		}
		for _, sm := range samples {
			ti, ok := c.byName[sm.tool]
			if !ok {
				continue
			}
			st.seq, st.spoke = c.seqBy[sm.prev], sm.spoke
			// The sums of the words, as addWord and hearModel make
			// them: in the order heard, and by id. An empty sum adds
			// +0, as no sum does.
			u, m := splitSet(tm.wordSets[sm.words], nv)
			clear(st.wsum)
			for _, w := range u {
				if id := ids[w]; id >= 0 {
					for j, lw := range c.logWT[int(id)*nt : int(id)*nt+nt] {
						st.wsum[j] += lw
					}
				}
			}
			st.modelWords = st.modelWords[:0]
			clear(st.msum)
			for _, w := range m {
				if id := ids[w-nv]; id >= 0 {
					st.modelWords = append(st.modelWords, id)
					for j, lw := range c.logMT[int(id)*nt : int(id)*nt+nt] {
						st.msum[j] += lw
					}
				}
			}
			buf = st.addToolLogLik(ll, ti, buf)
		}
	}
}

// splitSet splits a word set of a table pass into the user's words (ids
// below nv) and the model's (nv and up).
func splitSet(set []int32, nv int32) (user, model []int32) {
	u := 0
	for u < len(set) && set[u] < nv {
		u++
	}
	return set[:u], set[u:]
}
