package speculator

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ahead-dev/ahead/callkey"
	"github.com/ahead-dev/ahead/trace"
)

func testLedger(t *testing.T) *ledger {
	m, err := newMetrics(nil, "model")
	if err != nil {
		t.Fatal(err)
	}
	return newLedger(3, 1000, m)
}

func guessOf(rank int, tool, args string) guess {
	k, _ := callkey.Make(tool, []byte(args))
	return guess{rank: rank, tool: tool, key: k, args: json.RawMessage(args)}
}

// TestLearnedP: a (rank, tool) keeps its prior (0.3 halved per rank)
// until it has 20 outcomes, then follows its hit share; the hit rate moves
// breadth: one guess when most windows hit.
func TestLearnedP(t *testing.T) {
	l := testLedger(t)
	now := time.Now()
	if got := l.breadth(true); got != 3 {
		t.Errorf("breadth with nothing known and spare slots = %d, want 3", got)
	}
	seq := 0
	for i := range 25 {
		w, _ := l.observe(result("s", seq, seq+1, "list_items", `{}`, "", 0), now)
		seq++
		next := fmt.Sprintf(`{"name":"n%d"}`, i)
		preds, ok := l.answer(w, []guess{guessOf(0, "read_item", next), guessOf(1, "read_item", `{"name":"never"}`)})
		if !ok {
			t.Fatal("answer for an open window refused")
		}
		if i < priorOutcomes {
			if preds[0].P != 0.3 || preds[1].P != 0.15 {
				t.Errorf("window %d: P = %v, %v; want the priors 0.3, 0.15", i, preds[0].P, preds[1].P)
			}
		} else if preds[0].P != 1 || preds[1].P != 0 {
			t.Errorf("window %d: P = %v, %v; want the learned 1, 0", i, preds[0].P, preds[1].P)
		}
		l.observe(result("s", seq, seq+1, "read_item", next, "", 0), now) // the first guess was right
		seq++
	}
	if got := l.breadth(true); got != 1 {
		t.Errorf("breadth after hits = %d, want 1", got)
	}
	if got := l.m.stats().Hits; got != 25 {
		t.Errorf("hits = %d, want 25", got)
	}
}

// TestWindows: results of one step extend its window; a later step or an
// assistant message closes it; a user message for the same next call does
// not open another.
func TestWindows(t *testing.T) {
	l := testLedger(t)
	now := time.Now()
	w1, _ := l.observe(result("s", 0, 1, "a", `{}`, "", 0), now)
	if o, c := l.observe(result("s", 1, 1, "b", `{}`, "", 0), now); o != nil || c != nil || w1.seq != 2 {
		t.Errorf("same step: opened %v, closed %v, seq %d; want the window extended to seq 2", o, c, w1.seq)
	}
	if o, _ := l.hear(message("s", 2, trace.RoleUser, "go on"), now); o != nil {
		t.Error("a user message opened a second window for the same call")
	}
	if _, c := l.hear(message("s", 2, trace.RoleAssistant, "ok"), now); c != w1 {
		t.Error("the assistant message did not close the window")
	}
	if _, ok := l.answer(w1, []guess{guessOf(0, "a", `{}`)}); ok {
		t.Error("an answer for a closed window was taken")
	}
	w2, _ := l.hear(message("s", 2, trace.RoleUser, "and now?"), now)
	if w2 == nil || w2.seq != 2 {
		t.Fatalf("user message after the model's turn: window %+v, want one for seq 2", w2)
	}
	if _, c := l.observe(result("s", 2, 2, "c", `{}`, "", 0), now); c != w2 {
		t.Error("the next call did not close the window")
	}
}

// TestPromptKeepsNewest: the prompt keeps the system prompt and the newest
// messages and calls within the budget, in the order they happened.
func TestPromptKeepsNewest(t *testing.T) {
	conv := []trace.Event{message("s", 0, trace.RoleSystem, "SYSTEM PROMPT")}
	for i := range 50 {
		conv = append(conv, message("s", i, trace.RoleUser, fmt.Sprintf("message %02d %s", i, strings.Repeat("x", 80))))
	}
	calls := []trace.Event{result("s", 48, 49, "read_item", `{"name":"a"}`, "OUT-48", 0), result("s", 49, 50, "secret", `{}`, "HIDDEN", 0)}
	msgs := buildMessages(2, conv, calls, func(tool string) bool { return tool == "secret" }, 2000)
	b, _ := json.Marshal(msgs)
	text := string(b)
	if len(text) > 4000 {
		t.Errorf("prompt of %d bytes for a budget of 2000 characters", len(text))
	}
	for _, want := range []string{"SYSTEM PROMPT", "message 49", "OUT-48", withheld, "2 most likely"} {
		if !strings.Contains(text, want) {
			t.Errorf("prompt lacks %q", want)
		}
	}
	for _, not := range []string{"message 00", "HIDDEN"} {
		if strings.Contains(text, not) {
			t.Errorf("prompt holds %q", not)
		}
	}
	if i, j := strings.Index(text, "message 48"), strings.Index(text, "OUT-48"); i < 0 || j < i {
		t.Error("message 48 should come before call 48")
	}
}

func TestChecker(t *testing.T) {
	for _, tt := range []struct {
		schema, args string
		ok           bool
	}{
		{``, `{"any":1}`, true},
		{`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`, `{"n":3}`, true},
		{`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`, `{"n":"3"}`, false},
		{`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`, `{}`, false},
		{`{"type":"object","properties":{"e":{"enum":["a","b"]}}}`, `{"e":"c"}`, false},
		// A schema the validator cannot resolve still has its required
		// properties and types checked.
		{`{"$ref":"http://x.invalid/s.json","properties":{"n":{"type":"string"}},"required":["n"]}`, `{}`, false},
		{`{"$ref":"http://x.invalid/s.json","properties":{"n":{"type":"string"}},"required":["n"]}`, `{"n":1}`, false},
		{`{"$ref":"http://x.invalid/s.json","properties":{"n":{"type":"string"}},"required":["n"]}`, `{"n":"a"}`, true},
	} {
		err := newChecker([]byte(tt.schema)).check([]byte(tt.args))
		if (err == nil) != tt.ok {
			t.Errorf("schema %s, args %s: err %v, want ok %v", tt.schema, tt.args, err, tt.ok)
		}
	}
}
