package convo

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"strings"
	"testing"

	"github.com/ahead-dev/ahead/trace"
)

// TestToolLogLikSets: each half's log likelihoods on the other half,
// replayed (toolLogLik) or read from the words the fit on all recorded
// (toolLogLikSets), are those of toolProbsAt in a replay, bit for bit: on the testdata, on 200 sessions of
// the shared tau2 traces, and on sessions whose user says more words
// than a call hears (maxToolWords), which it replays.
func TestToolLogLikSets(t *testing.T) {
	check := func(t *testing.T, sessions []trace.Session) {
		o := (&MineOptions{}).withDefaults()
		lex := newLexicon(sessions)
		_, tm := fitTables(sessions, &o, lex, vocabulary(sessions, o.MinSessions, lex))
		var halves [2][]trace.Session
		half := make([]int, len(sessions))
		for i, s := range sessions {
			if trace.KeyBucket("convo/"+s.ID) < 0.5 {
				half[i] = 1
			}
			halves[half[i]] = append(halves[half[i]], s)
		}
		for h := range halves {
			if len(halves[h]) == 0 {
				t.Fatalf("half %d is empty", h)
			}
			c := compile(fit(halves[h], &o, lex, vocabulary(halves[h], o.MinSessions, lex)))
			var got, want [len(lambdaGrid)]float64
			var replayed [len(lambdaGrid)]float64
			toolLogLikRef(&want, c, halves[1-h], o.MaxBytes, lex)
			toolLogLik(&replayed, c, halves[1-h], o.MaxBytes, lex)
			toolLogLikSets(&got, c, tm, sessions, func(i int) bool { return half[i] != h }, o.MaxBytes, lex)
			for g := range want {
				if math.Float64bits(replayed[g]) != math.Float64bits(want[g]) {
					t.Errorf("half %d, lambda %v: log likelihood replayed %v, want %v", h, lambdaGrid[g], replayed[g], want[g])
				}
				if math.Float64bits(got[g]) != math.Float64bits(want[g]) {
					t.Errorf("half %d, lambda %v: log likelihood %v, want %v", h, lambdaGrid[g], got[g], want[g])
				}
			}
			if want[0] == want[len(want)-1] {
				t.Errorf("half %d: the words change nothing (%v at every lambda)", h, want[0])
			}
		}
	}
	t.Run("testdata", func(t *testing.T) { check(t, readTestdata(t)) })
	t.Run("tau2", func(t *testing.T) {
		sessions, err := trace.Collect(trace.NewReader(nil).Events(sharedDir + "tau2-airline-retail-train-conv.jsonl.gz"))
		if err != nil {
			t.Skipf("shared traces not here: %v", err)
		}
		check(t, sessions[:200])
	})
	t.Run("many words", func(t *testing.T) {
		// 300 words said in every session, in an order of its own, after
		// 60 said only in its half: the fit on all hears the half's 60
		// and the first 196 of the 300 (maxToolWords), a half's model
		// the first 256 of the 300, which only a replay finds.
		word := func(prefix string, i int) string {
			return prefix + strings.Repeat(string(rune('a'+i%26)), 1+i/26)
		}
		var sessions []trace.Session
		for i := range 40 {
			id := fmt.Sprintf("m/%02d", i)
			h := 0
			if trace.KeyBucket("convo/"+id) < 0.5 {
				h = 1
			}
			tool, verb := "renew_loan", "renew"
			if i%2 == 1 {
				tool, verb = "return_book", "return"
			}
			words := []string{"please", verb, "it"}
			for j := range 60 {
				words = append(words, word([]string{"xa", "xb"}[h], j))
			}
			for j := range 300 {
				words = append(words, word("w", (j*7+i*13)%300))
			}
			sessions = append(sessions, trace.Session{ID: id,
				Messages: []trace.Event{msg(id, trace.RoleUser, strings.Join(words, " "))},
				Events: []trace.Event{
					{Session: id, Seq: 0, Step: 1, Tool: tool, Args: json.RawMessage(`{}`), Status: trace.StatusOK},
					{Session: id, Seq: 1, Step: 2, Tool: "show_account", Args: json.RawMessage(`{}`), Status: trace.StatusOK},
				},
			})
		}
		check(t, sessions)
	})
}

// TestVocabularies: the vocabularies of all sessions and of each half,
// counted in one pass, are those of a pass over each.
func TestVocabularies(t *testing.T) {
	sessions, err := trace.Collect(trace.NewReader(nil).Events(sharedDir + "tau2-airline-retail-train-conv.jsonl.gz"))
	if err != nil {
		sessions = readTestdata(t)
	}
	lex := newLexicon(sessions)
	var halves [2][]trace.Session
	half := make([]int, len(sessions))
	for i, s := range sessions {
		half[i] = i % 3 % 2
		halves[half[i]] = append(halves[half[i]], s)
	}
	all, byHalf := vocabularies(sessions, half, 5, lex)
	if want := vocabulary(sessions, 5, nil); !maps.Equal(all, want) || len(all) == 0 {
		t.Errorf("all: %d words, want %d", len(all), len(want))
	}
	for h := range halves {
		if want := vocabulary(halves[h], 5, nil); !maps.Equal(byHalf[h], want) || len(want) == 0 {
			t.Errorf("half %d: %d words, want %d", h, len(byHalf[h]), len(want))
		}
	}
}

// toolLogLikRef is toolLogLik with toolProbsAt at each weight: the
// reference of TestToolLogLikSets.
func toolLogLikRef(ll *[len(lambdaGrid)]float64, c *compiled, sessions []trace.Session, maxBytes int, lex *lexicon) {
	var probs []float64
	r := newReplay(lex, false)
	for _, s := range sessions {
		st := r.state(c, maxBytes, s)
		for ev := range trace.Known(s) {
			if ev.IsMessage() {
				st.hear(ev)
				continue
			}
			if ti, ok := c.byName[ev.Tool]; ok {
				for g, l := range lambdaGrid {
					probs = st.toolProbsAt(probs, l)
					ll[g] += math.Log(max(probs[ti], 1e-9))
				}
			}
			st.observe(ev)
		}
	}
}
