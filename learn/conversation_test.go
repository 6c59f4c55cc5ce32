package learn

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ahead-dev/ahead/trace"
)

// TestLearnerRelearnsConversation is issue 24 item 1: from an empty pool,
// the messages heard are mined with the calls when relearning, and the
// conversation model is swapped in beside the patterns: a new session's
// first call, whose argument only the user said, is then predicted; the
// session in progress keeps what it heard before the swap; and the pool
// saved carries the model, without the values heard. (Without the
// built-in default, which predicts the order id before any relearning:
// TestLearnerDefault.)
func TestLearnerRelearnsConversation(t *testing.T) {
	p, err := New(EmptyPool(), &Options{Learn: true, NoDefault: true})
	if err != nil {
		t.Fatal(err)
	}
	say := func(s, text string) {
		p.Hear(trace.Event{Kind: trace.KindMessage, Session: s, Role: trace.RoleUser, Content: text})
	}
	id := func(i int) string { return fmt.Sprintf("W%07d", 1000003*i%9999991) }
	for i := range 12 {
		s := fmt.Sprintf("s%d", i)
		say(s, "hello, please look up my order "+id(i)+" thanks")
		p.Observe(trace.Event{Session: s, Seq: 0, Tool: "get_order", Args: json.RawMessage(`{"order_id":"` + id(i) + `"}`), Status: trace.StatusOK, Output: `{"status":"pending"}`})
		p.Forget(s)
	}
	wants := func(preds []string, v string) bool {
		for _, q := range preds {
			if strings.Contains(q, v) {
				return true
			}
		}
		return false
	}
	heard := func(s, text string) []string {
		var out []string
		for _, q := range p.Hear(trace.Event{Kind: trace.KindMessage, Session: s, Role: trace.RoleUser, Content: text}) {
			out = append(out, q.Tool+string(q.Args))
		}
		return out
	}
	// Before relearning, nothing knows the conversation.
	if got := heard("before", "hello, please look up my order "+id(50)+" thanks"); wants(got, id(50)) {
		t.Fatalf("predicted %v before any relearning", got)
	}
	if _, err := p.learner.Relearn(); err != nil {
		t.Fatal(err)
	}
	if got := heard("after", "hello, please look up my order "+id(51)+" thanks"); !wants(got, `get_order{"order_id":"`+id(51)+`"}`) {
		t.Errorf("after relearning, the user's order id is not predicted: %v", got)
	}
	// The session that was live at the swap was heard again.
	var again []string
	for _, q := range p.Start("before") {
		again = append(again, q.Tool+string(q.Args))
	}
	if !wants(again, id(50)) {
		t.Errorf("the session live at the swap lost what it heard: %v", again)
	}
	pool := p.learner.Snapshot()
	if len(pool.Conversation) == 0 {
		t.Fatal("the pool saved carries no conversation model")
	}
	for i := range 12 {
		if strings.Contains(string(pool.Conversation), id(i)) {
			t.Errorf("the conversation model holds the value %s", id(i))
		}
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestLearnerDefault is issue 24 item 2: from an empty pool, before any
// relearning, the built-in default reads the argument of a tool seen
// called once from what the user of the next session says.
func TestLearnerDefault(t *testing.T) {
	p, err := New(EmptyPool(), &Options{Learn: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	p.Hear(trace.Event{Kind: trace.KindMessage, Session: "s1", Role: trace.RoleUser, Content: "hello, please look up my order W1234567 thanks"})
	p.Observe(trace.Event{Session: "s1", Seq: 0, Tool: "get_order", Args: json.RawMessage(`{"order_id":"W1234567"}`), Status: trace.StatusOK})
	p.Forget("s1")
	preds := p.Hear(trace.Event{Kind: trace.KindMessage, Session: "s2", Role: trace.RoleUser, Content: "hi, where is my order W7654321 please"})
	if len(preds) == 0 || preds[0].Tool != "get_order" || string(preds[0].Args) != `{"order_id":"W7654321"}` {
		t.Errorf("the second session's first call predicted %v, want get_order with the order id its user said", preds)
	}
}

// TestRelearnInMemory is issue 24 item 6: without a pool file the
// predictor relearns both parts every CheckpointEvery, in memory.
func TestRelearnInMemory(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, err := New(EmptyPool(), &Options{Learn: true, CheckpointEvery: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 6 {
			s := fmt.Sprint("s", i)
			q := fmt.Sprint("topic", i)
			p.Observe(trace.Event{Session: s, Seq: 0, Tool: "search", Args: json.RawMessage(`{"q":"` + q + `"}`), Status: trace.StatusOK, Output: `{"url":"https://` + q + `.example"}`})
			p.Observe(trace.Event{Session: s, Seq: 1, Tool: "fetch", Args: json.RawMessage(`{"url":"https://` + q + `.example"}`), Status: trace.StatusOK, Output: "page"})
			p.Forget(s)
		}
		if n := p.Patterns(); n != 0 {
			t.Fatalf("%d patterns before the first relearning, want 0", n)
		}
		time.Sleep(time.Minute + time.Second)
		synctest.Wait()
		if n := p.Patterns(); n == 0 {
			t.Errorf("no patterns after a minute, want those relearnt in memory")
		}
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
	})
}
