package convo

import (
	"encoding/json"
	"fmt"
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
