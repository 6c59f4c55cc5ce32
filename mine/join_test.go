package mine_test

import (
	"encoding/json"
	"slices"
	"strconv"
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

// TestMineJoinedAcross mines values of two sources from different events
// (a folder created two calls back + "/" + each name a listing returned; a
// base URL one call returned + "/items/" + each id another listed), writes
// the pool and reads it back, and predicts, in a session with a folder, a
// URL and names never seen, every call of the list. No value of the
// traces may be in the pool.
func TestMineJoinedAcross(t *testing.T) {
	tests := []struct {
		file   string
		values []string // of the traces: none may be in the pool
		events []trace.Event
		tool   string
		want   []string
	}{{
		file:   "testdata/move.jsonl",
		values: []string{"/home/u", "archive", "inbox", "alpha0"},
		events: []trace.Event{
			{Tool: "create_directory", Args: json.RawMessage(`{"path":"/srv/q/done"}`), Output: "Successfully created directory /srv/q/done"},
			{Tool: "list_directory", Args: json.RawMessage(`{"path":"/srv/q/todo"}`), Output: "[FILE] one.go\n[FILE] two.yaml"},
		},
		tool: "move_file",
		want: []string{
			`{"destination":"/srv/q/done/one.go","source":"/srv/q/todo/one.go"}`,
			`{"destination":"/srv/q/done/two.yaml","source":"/srv/q/todo/two.yaml"}`,
		},
	}, {
		file:   "testdata/url.jsonl",
		values: []string{"example.org", "k0x0", "cat0"},
		events: []trace.Event{
			{Tool: "get_service", Args: json.RawMessage(`{"name":"catalog"}`), Output: `{"name":"catalog","base_url":"http://10.0.0.7:8080/v3","region":"us"}`},
			{Tool: "search_items", Args: json.RawMessage(`{"query":"lamp"}`), Output: `{"items":[{"id":"Q-17","title":"lamp"},{"id":"Q-21","title":"shade"}]}`},
		},
		tool: "http_get",
		want: []string{`{"url":"http://10.0.0.7:8080/v3/items/Q-17"}`, `{"url":"http://10.0.0.7:8080/v3/items/Q-21"}`},
	}}
	for _, tt := range tests {
		t.Run(tt.tool, func(t *testing.T) {
			ss, err := trace.Collect(trace.NewReader(nil).Events(tt.file))
			if err != nil {
				t.Fatal(err)
			}
			mined, err := mine.Mine(ss, &mine.Options{MinSupport: 2})
			if err != nil {
				t.Fatal(err)
			}
			var b strings.Builder
			if err := mined.Encode(&b); err != nil {
				t.Fatal(err)
			}
			for _, s := range tt.values {
				if strings.Contains(b.String(), s) {
					t.Errorf("the pool holds %q, a value of the traces", s)
				}
			}
			pool, err := pattern.Decode([]byte(b.String()))
			if err != nil {
				t.Fatalf("the pool written is not read back: %v", err)
			}
			across := 0
			for _, pt := range pool.Patterns {
				for _, m := range pt.Args {
					if m.Base != nil && m.Base.From != nil {
						across++
					}
				}
			}
			if across == 0 {
				t.Fatal("no mapping reads its first part from an event of its own")
			}
			o, err := pattern.NewOnline(pool, nil)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for i, ev := range tt.events {
				ev.Session, ev.Seq, ev.Status = "new", i, trace.StatusOK
				got = got[:0]
				for _, p := range o.Observe(ev) {
					if p.Tool == tt.tool && p.Args != nil {
						got = append(got, string(p.Args))
					}
				}
			}
			for _, w := range tt.want {
				if !slices.Contains(got, w) {
					t.Errorf("predictions after the listing lack %s; got %v", w, got)
				}
			}
		})
	}
}

// TestMineJoinedWord mines sessions that write scripts and run each with
// the session's own interpreter, a word with a digit ("python3", "node18")
// that the privacy rule keeps out of a pool as a constant. The run is the
// interpreter word of the session's earlier run joined with the name of the
// script just written: the pool must predict it in a session with an
// interpreter and names never seen, and hold none of the traces' words.
func TestMineJoinedWord(t *testing.T) {
	runners := []string{"python3", "node18", "ruby2", "perl5", "lua54", "php8", "pip3", "gcc12", "java21", "bun1", "deno2", "go126"}
	var ss []trace.Session
	for i, r := range runners {
		s := trace.Session{ID: "s" + string(rune('a'+i))}
		add := func(cmd string) {
			s.Events = append(s.Events, trace.Event{Session: s.ID, Seq: len(s.Events), Tool: "sh",
				Args: json.RawMessage(`{"cmd":` + strconv.Quote(cmd) + `}`), Status: trace.StatusOK, Output: "ok"})
		}
		add("ls")
		for j := range 4 {
			name := "step" + strconv.Itoa(i*10+j) + "_check.src"
			add("cat <<'EOF' > " + name + "\nbody\nEOF")
			add("grep -n body " + name)
			add(r + " " + name)
		}
		ss = append(ss, s)
	}
	mined, err := mine.Mine(ss, &mine.Options{MinSupport: 2})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := mined.Encode(&b); err != nil {
		t.Fatal(err)
	}
	for _, s := range append(runners, "step") {
		if strings.Contains(b.String(), s) {
			t.Errorf("the pool holds %q, a value of the traces", s)
		}
	}
	pool, err := pattern.Decode([]byte(b.String()))
	if err != nil {
		t.Fatalf("the pool written is not read back: %v", err)
	}
	words := 0
	for _, pt := range pool.Patterns {
		for _, m := range pt.Args {
			if m.Base != nil && m.Base.Text != nil && m.Base.From != nil &&
				strings.Contains(pt.Describe(), `base text(args(sh[*])/cmd, line 0, token 0) + " " + `) {
				words++
			}
		}
	}
	if words == 0 {
		t.Error(`no mapping reads its first part as the first word of an earlier call ("base text(args(sh[*])/cmd, line 0, token 0)")`)
	}
	o, err := pattern.NewOnline(pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for i, cmd := range []string{"ls", "cat <<'EOF' > a.tcl\nx\nEOF", "grep -n x a.tcl", "tclsh9 a.tcl", "cat <<'EOF' > b.tcl\ny\nEOF", "grep -n y b.tcl"} {
		got = got[:0]
		ev := trace.Event{Session: "new", Seq: i, Tool: "sh", Args: json.RawMessage(`{"cmd":` + strconv.Quote(cmd) + `}`), Status: trace.StatusOK, Output: "ok"}
		for _, p := range o.Observe(ev) {
			if p.Args != nil {
				got = append(got, string(p.Args))
			}
		}
	}
	if want := `{"cmd":"tclsh9 b.tcl"}`; !slices.Contains(got, want) {
		var pats []string
		for _, pt := range pool.Patterns {
			pats = append(pats, pt.Describe())
		}
		t.Errorf("predictions after the second script lack %s; got %v; mined:\n%s", want, got, strings.Join(pats, "\n"))
	}
}
