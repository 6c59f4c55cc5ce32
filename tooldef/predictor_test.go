package tooldef

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ahead-dev/ahead/callkey"
	"github.com/ahead-dev/ahead/predict"
	"github.com/ahead-dev/ahead/trace"
)

// declared reads the tools a real MCP server lists, as ahead recorded
// them (../mcpproxy's TestDeclaredToolsRecorded writes and checks these
// files).
func declared(t testing.TB, server, session string) trace.Event {
	t.Helper()
	name := filepath.Join("testdata", server+".tools.json")
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

func user(session, text string) trace.Event {
	return trace.Event{Kind: trace.KindMessage, Session: session, Role: trace.RoleUser, Content: text}
}

// rankOf returns the rank of the call among preds, or -1.
func rankOf(preds []predict.Prediction, tool, args string) int {
	for i, p := range preds {
		if p.Tool == tool && string(p.Args) == args {
			return i
		}
	}
	return -1
}

func TestPredictsNeverCalledToolsFromTheirDefinitions(t *testing.T) {
	for _, tc := range []struct {
		server, said, tool, args string
		within                   int // the call's rank is below this
	}{
		// An enum value said, spelt as the schema spells it.
		{"everything", "Show me the structured content for chicago, please.", "get-structured-content", `{"location":"Chicago"}`, 1},
		{"everything", "I need an annotated message of the error kind", "get-annotated-message", `{"messageType":"error"}`, 1},
		{"everything", "get me 4 resource links", "get-resource-links", `{"count":4}`, 1},
		// A path: the look the argument's name implies, near the tool's words.
		{"filesystem", "Can you read /tmp/proj/notes.md for me?", "read_text_file", `{"path":"/tmp/proj/notes.md"}`, 3},
		{"filesystem", "List the directory /srv/data", "list_directory", `{"path":"/srv/data"}`, 5},
		// A list of one name, near the tool's words.
		{"memory", "Open the node Ada_Lovelace", "open_nodes", `{"names":["Ada_Lovelace"]}`, 1},
		{"memory", "search for programmer in the graph", "search_nodes", `{"query":"programmer"}`, 5},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			p := New(nil)
			// Without the definitions, nothing: the tool was never called.
			if got := p.Hear(user("s", tc.said)); got != nil {
				t.Fatalf("predicted %v before any tool was declared", got)
			}
			if got := p.Declare(declared(t, tc.server, "s")); got != nil {
				t.Fatalf("predicted %v from messages heard before the declaration", got)
			}
			got := p.Hear(user("s", tc.said))
			r := rankOf(got, tc.tool, tc.args)
			if r < 0 || r >= tc.within {
				t.Fatalf("%s%s at rank %d of %v, want below %d", tc.tool, tc.args, r, got, tc.within)
			}
			if got[r].P <= 0.02 || got[r].P > maxP || got[r].Origin != predict.OriginMessage {
				t.Errorf("P %v, origin %s", got[r].P, got[r].Origin)
			}
		})
	}
}

func TestNothingWithoutEvidence(t *testing.T) {
	p := New(nil)
	p.Declare(declared(t, "everything", "s"))
	for _, said := range []string{
		"Show me the structured content for Boston, please.", // not a value of the enum
		"hello there",
	} {
		for _, pr := range p.Hear(user("s", said)) {
			if pr.Tool == "get-structured-content" {
				t.Errorf("%q: predicted %s%s", said, pr.Tool, pr.Args)
			}
		}
	}
	// Another session declared nothing: its messages predict nothing.
	if got := p.Hear(user("other", "Show me the structured content for Chicago")); got != nil {
		t.Errorf("undeclared session: %v", got)
	}
}

func TestDistinctValuesAndBounds(t *testing.T) {
	p := New(&Options{MaxSessions: 2, MaxBytes: 64})
	p.Declare(declared(t, "everything", "s"))
	got := p.Hear(user("s", "What is the sum of 12 and 30?"))
	if r := rankOf(got, "get-sum", `{"a":12,"b":30}`); r != 0 {
		t.Errorf("get-sum with the two numbers in the order said at rank %d of %v, want first", r, got)
	}
	p.Hear(user("s", strings.Repeat("x", 100)))
	p.mu.Lock()
	s := p.sessions["s"]
	p.mu.Unlock()
	if s.bytes > 64 || len(s.msgs) != 1 {
		t.Errorf("window holds %d bytes in %d messages, want at most 64 in 1", s.bytes, len(s.msgs))
	}
	p.Declare(declared(t, "memory", "t"))
	p.Declare(declared(t, "memory", "u"))
	if _, ok := p.sessions["s"]; ok || len(p.sessions) != 2 {
		t.Errorf("%d sessions kept, the oldest still there: %v", len(p.sessions), ok)
	}
	if n := p.SessionBytes("u"); n <= 0 {
		t.Errorf("SessionBytes = %d", n)
	}
	p.Forget("u")
	if n := p.SessionBytes("u"); n != 0 {
		t.Errorf("SessionBytes after Forget = %d", n)
	}
}

func TestSchemaReading(t *testing.T) {
	defs := []trace.ToolDef{{Name: "get_order", Description: "Look an order up.", InputSchema: json.RawMessage(`{
		"type": "object",
		"properties": {
			"order_id": {"type": "string", "pattern": "^#W[0-9]{7}$", "description": "The order's id"},
			"when": {"type": ["string", "null"], "format": "date"},
			"contact": {"type": "string", "description": "the customer's email"},
			"ref": {"type": "string", "examples": ["AB-1234"]},
			"bad": {"type": "string", "pattern": "(?<=x)y"}
		},
		"required": ["order_id"]
	}`)}}
	p := New(nil)
	p.Declare(trace.Event{Kind: trace.KindTools, Session: "s", From: trace.FromOpenAI, Tools: defs})
	got := p.Hear(user("s", "Where is my order #W1234567 of 2024-05-01? Write to ann@example.com, ref CD-9876."))
	want := `{"order_id":"#W1234567","contact":"ann@example.com","ref":"CD-9876","when":"2024-05-01"}`
	wk, _ := callkey.Make("get_order", []byte(want))
	if len(got) == 0 || rank(got, wk) != 0 {
		t.Fatalf("predicted %v, want get_order%s first", got, want)
	}
	// A value that the pattern refuses is never the argument's.
	q := New(nil)
	q.Declare(trace.Event{Kind: trace.KindTools, Session: "s", From: trace.FromOpenAI, Tools: defs})
	if got := q.Hear(user("s", "Where is my order W12?")); got != nil {
		t.Errorf("predicted %v from a value the pattern refuses", got)
	}
}
