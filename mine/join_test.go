package mine_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/ahead-dev/ahead/mine"
	"github.com/ahead-dev/ahead/pattern"
	"github.com/ahead-dev/ahead/trace"
)

// TestMineJoined mines sessions that list a folder of their own (a text
// output, one entry a line, as the filesystem MCP server prints it) and
// read the files in it: each path read is the folder the listing call
// named joined with a name the listing returned, a value of two sources.
// The pool must predict, in a folder never seen, with names never seen,
// the read of every listed name; no folder or name may be in the pool.
func TestMineJoined(t *testing.T) {
	ss, err := trace.Collect(trace.NewReader(nil).Events("testdata/join.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	pool, err := mine.Mine(ss, &mine.Options{MinSupport: 2})
	if err != nil {
		t.Fatal(err)
	}
	var found *pattern.Pattern
	for i := range pool.Patterns {
		pt := &pool.Patterns[i]
		if pt.Tool == "read_text_file" && pt.List != nil && pt.List.Lines && len(pt.Args) == 1 && pt.Args[0].Base != nil {
			found = pt
			break
		}
	}
	if found == nil {
		var got []string
		for _, pt := range pool.Patterns {
			got = append(got, pt.Describe())
		}
		t.Fatalf("no pattern reads base + each line of a listing; mined:\n%s", strings.Join(got, "\n"))
	}
	if m := found.Args[0]; m.Base.Part != pattern.PartArgs || m.Base.Path != "/path" || m.Prefix != "/" || m.Suffix != "" {
		t.Errorf("mapping %s, want args/path + \"/\" + a token of each line", found.Describe())
	}
	data, err := json.Marshal(pool)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"/home/u", "notes.md", "w0"} {
		if strings.Contains(string(data), s) {
			t.Errorf("the pool holds %q, a value of the traces", s)
		}
	}

	o, err := pattern.NewOnline(pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	preds := o.Observe(trace.Event{Session: "new", Tool: "list_directory", Args: json.RawMessage(`{"path":"/srv/fresh"}`), Status: trace.StatusOK,
		Output: "[DIR] cache\n[FILE] alpha.go\n[FILE] beta.yaml\n[FILE] gamma.txt"})
	var got []string
	for _, p := range preds {
		if p.Tool == "read_text_file" && p.Args != nil {
			got = append(got, string(p.Args))
		}
	}
	for _, name := range []string{"alpha.go", "beta.yaml", "gamma.txt"} {
		if want := `{"path":"/srv/fresh/` + name + `"}`; !slices.Contains(got, want) {
			t.Errorf("predictions after a listing lack %s; got %v", want, got)
		}
	}
}
