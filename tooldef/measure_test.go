package tooldef

import (
	"testing"

	"github.com/ahead-dev/ahead/callkey"
	"github.com/ahead-dev/ahead/predict"
)

// firstCalls is a constructed set: a user's first message to an agent
// whose tools are the real npm servers' (testdata), and the call the
// agent makes first. Written before the weights were looked at again, in
// the words a user would use; some ask for what the definitions cannot
// tell (which of three read tools, a folder called by a synonym).
var firstCalls = []struct{ server, said, tool, args string }{
	{"filesystem", "Can you read /home/ann/todo.txt for me?", "read_text_file", `{"path":"/home/ann/todo.txt"}`},
	{"filesystem", "show me the contents of the file src/main.go", "read_text_file", `{"path":"src/main.go"}`},
	{"filesystem", "List the directory /var/log please", "list_directory", `{"path":"/var/log"}`},
	{"filesystem", "What's in the folder /srv/www?", "list_directory", `{"path":"/srv/www"}`},
	{"filesystem", "Give me the file info of report.pdf", "get_file_info", `{"path":"report.pdf"}`},
	{"filesystem", "Print the directory tree of /opt/app", "directory_tree", `{"path":"/opt/app"}`},
	{"filesystem", "Which directories are you allowed to access?", "list_allowed_directories", `{}`},
	{"filesystem", "list /etc/nginx with sizes, sorted by size", "list_directory_with_sizes", `{"path":"/etc/nginx","sortBy":"size"}`},
	{"memory", "Open the node Ada_Lovelace", "open_nodes", `{"names":["Ada_Lovelace"]}`},
	{"memory", "search the graph for lovelace", "search_nodes", `{"query":"lovelace"}`},
	{"memory", "Show me the entire knowledge graph", "read_graph", `{}`},
	{"memory", "Delete the entity Charles_Babbage", "delete_entities", `{"entityNames":["Charles_Babbage"]}`},
	{"memory", "what do you remember about Grace?", "search_nodes", `{"query":"Grace"}`},
	{"everything", "Echo hello_world back to me", "echo", `{"message":"hello_world"}`},
	{"everything", "What is the sum of 17 and 25?", "get-sum", `{"a":17,"b":25}`},
	{"everything", "structured content for Los Angeles please", "get-structured-content", `{"location":"Los Angeles"}`},
	{"everything", "Show the weather in New York", "get-structured-content", `{"location":"New York"}`},
	{"everything", "I'd like an annotated message of type success", "get-annotated-message", `{"messageType":"success"}`},
	{"everything", "get me 7 resource links", "get-resource-links", `{"count":7}`},
	{"everything", "Show me the tiny image", "get-tiny-image", `{}`},
	{"everything", "Print the environment variables", "get-env", `{}`},
	{"everything", "research the topic photosynthesis for me", "simulate-research-query", `{"topic":"photosynthesis"}`},
	{"everything", "list the roots the client provided", "get-roots-list", `{}`},
	{"everything", "gzip the file at https://example.com/data.csv", "gzip-file-as-resource", `{"data":"https://example.com/data.csv"}`},
}

// firstCallFigures returns exact_at_1 and exact_at_3 of the set's first
// calls, with the definitions declared or not.
func firstCallFigures(t testing.TB, declare bool) (at1, at3 float64) {
	for i, c := range firstCalls {
		p := New(nil)
		id := "s"
		if declare {
			p.Declare(declared(t, c.server, id))
		}
		preds := p.Hear(user(id, c.said))
		want, err := callkey.Make(c.tool, []byte(c.args))
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
			t.Logf("missed: %q → %s%s; got %v", c.said, c.tool, c.args, brief(preds))
		}
	}
	n := float64(len(firstCalls))
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
	t.Logf("%d first calls of tools never called before: exact_at_1 %.2f, exact_at_3 %.2f with definitions, 0 without", len(firstCalls), at1, at3)
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
