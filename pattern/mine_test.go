package pattern

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ahead-dev/ahead/callkey"

	"github.com/ahead-dev/ahead/trace"
)

var update = flag.Bool("update", false, "rewrite the golden pool files in testdata")

func readSessions(t testing.TB, paths ...string) []trace.Session {
	t.Helper()
	ss, err := trace.Collect(trace.NewReader(nil).Events(paths...))
	if err != nil {
		t.Fatal(err)
	}
	return ss
}

func encode(t testing.TB, p *Pool) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := p.Encode(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func intp(i int) *int { return &i }

// TestMineGolden mines one small hand-made trace per kind of mapping,
// checks that the kind is found, and compares the whole pool with its
// golden file (go test -update rewrites them).
func TestMineGolden(t *testing.T) {
	last := func(tool string) *Ref { return &Ref{Sig: &Signature{Tool: tool}} }
	tests := []struct {
		file string
		tool string // the target whose mapping is checked
		list *ListSource
		want []Mapping // one of the exact patterns of the tool has these mappings
	}{
		{"path", "get_profile", nil, []Mapping{{Arg: "user_id", From: &Ref{}, Part: PartOutput, Path: "/user/id"}}},
		{"list", "read_item", &ListSource{From: Ref{Sig: &Signature{Tool: "list_items"}}, Part: PartOutput, Path: "/items"},
			[]Mapping{{Arg: "name", Part: PartItem, Path: "/name"}}},
		{"template", "write_file", nil, []Mapping{{Arg: "path", From: &Ref{}, Part: PartArgs, Path: "/name", Prefix: "/srv/", Suffix: "/README.md"}}},
		{"const", "configure", nil, []Mapping{
			{Arg: "job", From: &Ref{}, Part: PartArgs, Path: "/job"},
			{Arg: "mode", Const: json.RawMessage(`"fast"`)},
		}},
		{"text", "upload", nil, []Mapping{{Arg: "file", From: &Ref{}, Part: PartOutput, Text: &TextSel{Line: 1, Token: intp(2)}}}},
	}
	_ = last
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			pool, err := Mine(readSessions(t, filepath.Join("testdata", tt.file+".jsonl")), &Options{MinSupport: 2})
			if err != nil {
				t.Fatal(err)
			}
			found := false
			var seen []string
			for _, pt := range pool.Patterns {
				if pt.Tool != tt.tool || !pt.Exact {
					continue
				}
				seen = append(seen, pt.Describe())
				listOK := (tt.list == nil) == (pt.List == nil)
				if listOK && tt.list != nil {
					listOK = pt.List.Part == tt.list.Part && pt.List.Path == tt.list.Path
				}
				if listOK && cmp.Equal(tt.want, pt.Args) {
					found = true
					if pt.P < 0.9 {
						t.Errorf("%s: p = %.2f, want ≥ 0.9", pt.Describe(), pt.P)
					}
				}
			}
			if !found {
				t.Errorf("no pattern for %s with mappings %+v; found:\n%v", tt.tool, tt.want, seen)
			}
			golden := filepath.Join("testdata", tt.file+".pool.json")
			got := encode(t, pool)
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("pool differs from %s (-want +got):\n%s", golden, diff)
			}
		})
	}
}

// TestListFallback checks "the first element not used yet": the
// candidates skip what the session already called, in list order.
func TestListFallback(t *testing.T) {
	pool, err := Mine(readSessions(t, "testdata/list.jsonl"), &Options{MinSupport: 2})
	if err != nil {
		t.Fatal(err)
	}
	x, err := NewIndex(pool)
	if err != nil {
		t.Fatal(err)
	}
	list := trace.Event{Session: "n", Tool: "list_items", Args: json.RawMessage(`{"folder":"z"}`), Status: trace.StatusOK,
		Output: `{"items": [{"name": "p"}, {"name": "q"}, {"name": "r"}, {"name": "s"}]}`}
	read := func(name string) trace.Event {
		return trace.Event{Session: "n", Tool: "read_item", Args: json.RawMessage(`{"name":"` + name + `"}`), Status: trace.StatusOK, Output: "content"}
	}
	h := newTestHistory(x, list, read("p"))
	var got [][]string
	h.match(func(pi int32, pos []int) {
		if x.Tool(pi) != "read_item" || !x.Exact(pi) || x.Pattern(pi).List == nil {
			return
		}
		var names []string
		for _, c := range x.Eval(pi, pos, h, 3, nil) {
			names = append(names, string(c.Args))
		}
		got = append(got, names)
	})
	if len(got) == 0 {
		t.Fatal("no list pattern matched")
	}
	want := []string{`{"name":"q"}`, `{"name":"r"}`, `{"name":"s"}`}
	for _, g := range got {
		if !slices.Equal(g, want) {
			t.Errorf("candidates %v, want %v (p was read)", g, want)
		}
	}
}

// testHistory is a History over a few events of one session.
type testHistory struct {
	x      *Index
	events []trace.Event
	pays   []Payload
	sigs   []int32
	used   map[uint64]bool
	start  int
}

func newTestHistory(x *Index, evs ...trace.Event) *testHistory {
	h := &testHistory{x: x, events: evs, used: make(map[uint64]bool)}
	h.pays = make([]Payload, len(evs))
	for i := range h.events {
		ev := &h.events[i]
		h.pays[i] = MakePayload(ev)
		h.sigs = append(h.sigs, x.SigOf(ev.Tool, ev.Status, ev.Args))
		if c, err := callkey.Canonical(ev.Args); err == nil {
			h.used[CallHash(ev.Tool, c)] = true
		}
	}
	return h
}

func (h *testHistory) match(fn func(int32, []int)) {
	k := h.x.mined.MaxContext
	var w []int32
	first := max(0, len(h.events)-k)
	h.start = 0
	if len(h.events) <= k {
		w = append(w, StartSig)
		h.start = 1
	}
	w = append(w, h.sigs[first:]...)
	h.start -= first
	h.x.Match(w, fn)
}

func (h *testHistory) At(pos int) *Payload {
	i := pos - h.start
	if i < 0 || i >= len(h.pays) {
		return nil
	}
	return &h.pays[i]
}

func (h *testHistory) Last(sig int32) *Payload {
	for i := len(h.sigs) - 1; i >= 0; i-- {
		if h.sigs[i] == sig {
			return &h.pays[i]
		}
	}
	return nil
}

func (h *testHistory) Recent(sig int32, n int) *Payload {
	if n >= MaxEvery {
		return nil
	}
	for i := len(h.sigs) - 1; i >= 0; i-- {
		if h.sigs[i] == sig {
			if n == 0 {
				return &h.pays[i]
			}
			n--
		}
	}
	return nil
}

func (h *testHistory) Used(call uint64) bool { return h.used[call] }

func TestMineDeterministic(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.jsonl")
	ss := readSessions(t, files...)
	a, err := Mine(ss, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Mine(readSessions(t, files...), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(encode(t, a), encode(t, b)) {
		t.Error("mining the same traces twice gave different pool files")
	}
	if len(a.Patterns) == 0 {
		t.Error("no patterns mined")
	}
}

func TestMineOptions(t *testing.T) {
	for _, o := range []Options{{MaxContext: MaxContextLimit + 1}, {MinSupport: -1}, {MinConfidence: 2}, {MaxCandidates: 100}} {
		if _, err := Mine(nil, &o); err == nil {
			t.Errorf("Mine with %+v: no error", o)
		}
	}
	pool, err := Mine(nil, nil)
	if err != nil || len(pool.Patterns) != 0 || pool.Mined.MaxContext != 3 {
		t.Errorf("Mine(nil) = %+v, %v", pool, err)
	}
}

// TestMineDiscriminator checks that a shell tool's program becomes part of
// its signatures when it tells what comes next, and an identifier does not.
func TestMineDiscriminator(t *testing.T) {
	var ss []trace.Session
	for i := range 40 {
		s := trace.Session{ID: "s" + string(rune('A'+i%26)) + string(rune('a'+i/26))}
		add := func(tool, args, out string) {
			s.Events = append(s.Events, trace.Event{Session: s.ID, Seq: len(s.Events), Tool: tool, Args: json.RawMessage(args), Status: trace.StatusOK, Output: out})
		}
		for j := range 4 {
			id := `"` + string(rune('a'+(i*4+j)%26)) + string(rune('a'+(i*7+j)%26)) + `"`
			add("lookup", `{"id":`+id+`}`, "x")
			if j%2 == 0 {
				add("sh", `{"command":"make all -j4"}`, "built")
				add("sh", `{"command":"./test --fast"}`, "PASS")
			} else {
				add("sh", `{"command":"ls -la"}`, "files")
				add("notify", `{"text":"done"}`, "ok")
			}
		}
		ss = append(ss, s)
	}
	got := discoverDiscriminators(ss, discoverOptions{})
	if len(got) != 1 || got[0].Tool != "sh" || got[0].Arg != "command" || got[0].Kind != KindWord {
		t.Fatalf("discriminators = %+v, want sh by the word of command", got)
	}
	// Each program leads somewhere else, so each signs apart (one of them
	// may be Other: the fewest values that tell it all are kept).
	s := NewSigner(got)
	sign := func(cmd string) Signature {
		return s.Sign("sh", trace.StatusOK, []byte(`{"command":"`+cmd+`"}`))
	}
	if a, b, c := sign("make x"), sign("./test"), sign("ls -l"); a == b || b == c || a == c {
		t.Errorf("signatures %v %v %v, want three different ones (values %v)", a, b, c, got[0].Values)
	}
	if sig := s.Sign("sh", trace.StatusError, []byte(`{"command":"ls"}`)); sig.Tool != "sh" || !sig.Error || sig.Value == "" {
		t.Errorf("Sign = %+v", sig)
	}
}

// BenchmarkMineShared mines both shared trace files (AHEAD_TRACES, or the
// team's checkout; skipped when absent, except in CI).
func BenchmarkMineShared(b *testing.B) {
	dir := os.Getenv("AHEAD_TRACES")
	if dir == "" {
		dir = filepath.Join("..", "..", "shared", "traces")
	}
	files := []string{filepath.Join(dir, "tau2-airline-retail-train.jsonl.gz"), filepath.Join(dir, "minisweagent-train.jsonl.gz")}
	for _, f := range files {
		if _, err := os.Stat(f); err != nil {
			if os.Getenv("CI") == "true" {
				b.Fatalf("shared traces missing (set AHEAD_TRACES): %v", err)
			}
			b.Skipf("shared traces missing (set AHEAD_TRACES): %v", err)
		}
	}
	ss := readSessions(b, files...)
	var pool *Pool
	for b.Loop() {
		var err error
		if pool, err = Mine(ss, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(pool.Patterns)), "patterns")
	b.ReportMetric(float64(len(encode(b, pool)))/(1<<20), "file-MiB")
}

// TestListEveryStarted checks that a list read from every recent event of
// a signature continues the list the session has started on before it
// turns to a newer, untouched one.
func TestListEveryStarted(t *testing.T) {
	lister := Signature{Tool: "list_items"}
	pool := &Pool{
		Version: Version,
		Mined:   Mined{MaxContext: 3, MinSupport: 2},
		Patterns: []Pattern{{
			Context: []Signature{{Tool: "read_item"}}, Tool: "read_item", Exact: true,
			List:    &ListSource{From: Ref{Sig: &lister}, Part: PartOutput, Path: "/items", Every: true},
			Args:    []Mapping{{Arg: "name", Part: PartItem, Path: "/name"}},
			Support: 4, Hits: []int{2, 1, 1}, ToolHits: 4, P: 0.5,
		}},
	}
	x, err := NewIndex(pool)
	if err != nil {
		t.Fatal(err)
	}
	list := func(names ...string) trace.Event {
		var items []string
		for _, n := range names {
			items = append(items, `{"name": "`+n+`"}`)
		}
		return trace.Event{Session: "n", Tool: "list_items", Args: json.RawMessage(`{}`), Status: trace.StatusOK,
			Output: `{"items": [` + strings.Join(items, ", ") + `]}`}
	}
	read := trace.Event{Session: "n", Tool: "read_item", Args: json.RawMessage(`{"name":"a1"}`), Status: trace.StatusOK, Output: "content"}
	h := newTestHistory(x, list("a1", "a2"), list("b1", "b2"), read)
	var got []string
	h.match(func(pi int32, pos []int) {
		for _, c := range x.Eval(pi, pos, h, 3, nil) {
			got = append(got, string(c.Args))
		}
	})
	want := []string{`{"name":"a2"}`, `{"name":"b1"}`, `{"name":"b2"}`}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("candidates (-want +got):\n%s", diff)
	}
}
