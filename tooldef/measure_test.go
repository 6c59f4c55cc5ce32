package tooldef

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/ahead-dev/ahead/callkey"
	"github.com/ahead-dev/ahead/predict"
)

// A firstCall is a case of a constructed set: a user's first message to
// an agent whose tools are the real npm servers' (testdata), and the call
// the agent makes first. Written before the weights were looked at again, in
// the words a user would use; some ask for what the definitions cannot
// tell (which of three read tools, a folder called by a synonym).
type firstCall struct {
	Server string          `json:"server"`
	Said   string          `json:"said"`
	Tool   string          `json:"tool"`
	Args   json.RawMessage `json:"args"`
}

// firstCalls reads the set (testdata/firstcalls.json; ../learn measures
// the same set with the built-in default beside the definitions).
func firstCalls(t testing.TB) []firstCall {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "firstcalls.json"))
	if err != nil {
		t.Fatal(err)
	}
	var out []firstCall
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatalf("testdata/firstcalls.json: %v", err)
	}
	return out
}

// firstCallFigures returns exact_at_1 and exact_at_3 of the set's first
// calls, with the definitions declared or not.
func firstCallFigures(t testing.TB, declare bool) (at1, at3 float64) {
	set := firstCalls(t)
	for i, c := range set {
		p := New(nil)
		id := "s"
		if declare {
			p.Declare(declared(t, c.Server, id))
		}
		preds := p.Hear(user(id, c.Said))
		want, err := callkey.Make(c.Tool, c.Args)
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		r := rank(preds, want)
		if r == 0 {
			at1++
		}
		if r >= 0 && r < 3 {
			at3++
		} else if testing.Verbose() && declare {
			t.Logf("missed: %q → %s%s; got %v", c.Said, c.Tool, c.Args, brief(preds))
		}
	}
	n := float64(len(set))
	return at1 / n, at3 / n
}

func rank(preds []predict.Prediction, want callkey.Key) int {
	for i, p := range preds {
		if k, err := callkey.Make(p.Tool, p.Args); err == nil && k == want {
			return i
		}
	}
	return -1
}

func brief(preds []predict.Prediction) []string {
	var out []string
	for _, p := range preds[:min(3, len(preds))] {
		out = append(out, p.Tool+string(p.Args))
	}
	return out
}

// TestWhatDefinitionsAdd measures the first calls of the constructed set:
// without definitions a fresh ahead predicts none of these tools (none
// was ever called); with them, most (go test -run TestWhatDefinitionsAdd
// -v ./tooldef prints the figures and the misses).
func TestWhatDefinitionsAdd(t *testing.T) {
	at1, at3 := firstCallFigures(t, false)
	if at1 != 0 || at3 != 0 {
		t.Errorf("without definitions: exact_at_1 %.2f, exact_at_3 %.2f, want 0", at1, at3)
	}
	at1, at3 = firstCallFigures(t, true)
	t.Logf("%d first calls of tools never called before: exact_at_1 %.2f, exact_at_3 %.2f with definitions, 0 without", len(firstCalls(t)), at1, at3)
	if at3 < 0.6 {
		t.Errorf("with definitions: exact_at_3 %.2f, want at least 0.6", at3)
	}
}

// BenchmarkHear is the cost of a message to a session that declared the
// filesystem server's 14 tools (go test -bench Hear ./tooldef).
func BenchmarkHear(b *testing.B) {
	p := New(nil)
	p.Declare(declared(b, "filesystem", "s"))
	msg := user("s", "Can you read /home/ann/todo.txt for me? And then list the directory /var/log, please.")
	for b.Loop() {
		p.Hear(msg)
	}
}
