package learn

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/ahead-dev/ahead/callkey"
	"github.com/ahead-dev/ahead/predict"
	"github.com/ahead-dev/ahead/trace"
)

// firstCall is a case of tooldef's constructed set of first calls of the
// real npm MCP servers' tools (../tooldef/testdata/firstcalls.json).
type firstCall struct {
	Server string          `json:"server"`
	Said   string          `json:"said"`
	Tool   string          `json:"tool"`
	Args   json.RawMessage `json:"args"`
}

func readFirstCalls(t *testing.T) []firstCall {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "tooldef", "testdata", "firstcalls.json"))
	if err != nil {
		t.Fatal(err)
	}
	var out []firstCall
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// declaration reads the tools a real MCP server lists, as ahead recorded
// them, declared to session.
func declaration(t *testing.T, server, session string) trace.Event {
	t.Helper()
	name := filepath.Join("..", "tooldef", "testdata", server+".tools.json")
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for ev, err := range trace.NewReader(nil).Read(name, f) {
		if err != nil {
			t.Fatal(err)
		}
		ev.Session = session
		return ev
	}
	t.Fatalf("%s: no line", name)
	return trace.Event{}
}

// TestDeclaredToolsWithTheDefault measures what a pool-less ahead (the
// built-in default learning in memory, joined with the definitions'
// predictor, as ahead mcp and ahead serve run without a pool) predicts
// for the first calls of tooldef's constructed set: a tool declared and
// never called is predicted by its definition, and the default takes
// nothing away; once the tool was called in an earlier session, the
// default knows its arguments too and the two together do better than
// either (issue 24 item 2). go test -run TestDeclaredToolsWithTheDefault
// -v ./learn prints the figures.
func TestDeclaredToolsWithTheDefault(t *testing.T) {
	set := readFirstCalls(t)
	type predictor interface {
		predict.Predictor
		predict.Hearer
		predict.Declarer
	}
	figures := func(noDefault, calledBefore bool) (at1, at3 float64) {
		for i, c := range set {
			p, err := New(EmptyPool(), &Options{NoDefault: noDefault})
			if err != nil {
				t.Fatal(err)
			}
			var pp predictor = p
			if calledBefore {
				// An earlier session that declared the same tools, was
				// asked the same and made the call.
				pre := fmt.Sprintf("before%d", i)
				pp.Declare(declaration(t, c.Server, pre))
				pp.Hear(trace.Event{Kind: trace.KindMessage, Session: pre, Role: trace.RoleUser, Content: c.Said})
				pp.Observe(trace.Event{Session: pre, Tool: c.Tool, Args: c.Args, Status: trace.StatusOK})
				pp.Forget(pre)
			}
			id := fmt.Sprintf("s%d", i)
			preds := predict.Merge(pp.Declare(declaration(t, c.Server, id)),
				pp.Hear(trace.Event{Kind: trace.KindMessage, Session: id, Role: trace.RoleUser, Content: c.Said}))
			want, err := callkey.Make(c.Tool, c.Args)
			if err != nil {
				t.Fatal(err)
			}
			for r, pr := range preds {
				if k, err := callkey.Make(pr.Tool, pr.Args); err == nil && k == want {
					if r == 0 {
						at1++
					}
					if r < 3 {
						at3++
					}
					break
				}
			}
		}
		n := float64(len(set))
		return at1 / n, at3 / n
	}
	defs1, defs3 := figures(true, false)
	new1, new3 := figures(false, false)
	once1, once3 := figures(false, true)
	alone1, alone3 := figures(true, true)
	t.Logf("%d first calls: never called: exact_at_1 %.2f, exact_at_3 %.2f with the default (%.2f, %.2f without it); "+
		"called once in an earlier session: %.2f, %.2f with the default (%.2f, %.2f without it)",
		len(set), new1, new3, defs1, defs3, once1, once3, alone1, alone3)
	if new1 < defs1 || new3 < defs3 {
		t.Errorf("never called: the default beside the definitions gives %.2f, %.2f, below the definitions alone (%.2f, %.2f)", new1, new3, defs1, defs3)
	}
	if defs3 < 0.6 {
		t.Errorf("never called: exact_at_3 %.2f, want at least 0.6 from the definitions", defs3)
	}
	if once1 <= alone1 || once3 < 0.9 {
		t.Errorf("called once before: exact_at_1 %.2f, exact_at_3 %.2f with the default, want above the definitions alone (%.2f) and exact_at_3 at least 0.9", once1, once3, alone1)
	}
}
