package learn

import (
	"fmt"
	"testing"

	"github.com/ahead-dev/ahead/predict"
)

// TestLearnerFillsRepeats: a tool the patterns guess without arguments
// (nothing seen explains them) is guessed with the arguments of the
// session's latest call of it, at the guess's p times how often a tool
// called again had the same arguments; the share learns as calls repeat,
// and a tool the session has not called stays a tool-only guess.
func TestLearnerFillsRepeats(t *testing.T) {
	l, err := NewLearner(EmptyPool(), nil)
	if err != nil {
		t.Fatal(err)
	}
	// Training: b follows a and b, with arguments nothing explains, never
	// the same twice (8 calls made again, none the same: share 1/10).
	for i := range 4 {
		s := fmt.Sprint("train", i)
		l.Observe(ev(s, 0, "a", `{}`, "ok"))
		for j := range 3 {
			l.Observe(ev(s, 1+j, "b", fmt.Sprintf(`{"q":"v%d-%d"}`, i, j), "ok"))
		}
		l.Forget(s)
	}
	if _, err := l.Relearn(); err != nil {
		t.Fatal(err)
	}
	find := func(ps []predict.Prediction, tool string) (predict.Prediction, bool) {
		for _, p := range ps {
			if p.Tool == tool {
				return p, true
			}
		}
		return predict.Prediction{}, false
	}
	after := l.Observe(ev("live", 0, "a", `{}`, "ok"))
	if p, ok := find(after, "b"); !ok || p.Args != nil {
		t.Fatalf("after a (b not called yet): b guessed %+v (found %v), want a tool-only guess", p, ok)
	}
	var last float64
	for j := range 4 {
		ps := l.Observe(ev("live", 1+j, "b", `{"q":"same"}`, "ok"))
		p, ok := find(ps, "b")
		if !ok || string(p.Args) != `{"q":"same"}` || !p.Repeat {
			t.Fatalf("after b #%d: b guessed %+v (found %v), want the call made again", j+1, p, ok)
		}
		// Before this call, j calls of b were made again with the same
		// arguments, besides the 8 that were not.
		share := (float64(j) + 1) / (8 + float64(j) + 2)
		if p.P <= 0 || p.P > share {
			t.Errorf("after b #%d: p %.3f, want in (0, %.3f]: the tool's p times the share", j+1, p.P, share)
		}
		if p.P <= last {
			t.Errorf("after b #%d: p %.3f, not above %.3f: the share did not learn the repeats", j+1, p.P, last)
		}
		last = p.P
	}
}
