package mine

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ahead-dev/ahead/pattern"
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

func encode(t testing.TB, p *pattern.Pool) []byte {
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
	last := func(tool string) *pattern.Ref { return &pattern.Ref{Sig: &pattern.Signature{Tool: tool}} }
	tests := []struct {
		file string
		tool string // the target whose mapping is checked
		list *pattern.ListSource
		want []pattern.Mapping // one of the exact patterns of the tool has these mappings
	}{
		{"path", "get_profile", nil, []pattern.Mapping{{Arg: "user_id", From: &pattern.Ref{}, Part: pattern.PartOutput, Path: "/user/id"}}},
		{"list", "read_item", &pattern.ListSource{From: pattern.Ref{Sig: &pattern.Signature{Tool: "list_items"}}, Part: pattern.PartOutput, Path: "/items"},
			[]pattern.Mapping{{Arg: "name", Part: pattern.PartItem, Path: "/name"}}},
		{"template", "write_file", nil, []pattern.Mapping{{Arg: "path", From: &pattern.Ref{}, Part: pattern.PartArgs, Path: "/name", Prefix: "/srv/", Suffix: "/README.md"}}},
		{"const", "configure", nil, []pattern.Mapping{
			{Arg: "job", From: &pattern.Ref{}, Part: pattern.PartArgs, Path: "/job"},
			{Arg: "mode", Const: json.RawMessage(`"fast"`)},
		}},
		{"text", "upload", nil, []pattern.Mapping{{Arg: "file", From: &pattern.Ref{}, Part: pattern.PartOutput, Text: &pattern.TextSel{Line: 1, Token: intp(2)}}}},
		// Values of two sources from different events (joined.go): the
		// folder created two calls back + "/" + each name listed, beside
		// the listed folder + "/" + the same name; a base URL one call
		// returned + "/items/" + each id another listed.
		{"move", "move_file", &pattern.ListSource{Part: pattern.PartOutput, Lines: true}, []pattern.Mapping{
			{Arg: "destination", Part: pattern.PartItem, Text: &pattern.TextSel{Token: intp(-1)}, Prefix: "/",
				Base: &pattern.Base{From: last("create_directory"), Part: pattern.PartArgs, Path: "/path"}},
			{Arg: "source", Part: pattern.PartItem, Text: &pattern.TextSel{Token: intp(-1)}, Prefix: "/",
				Base: &pattern.Base{Part: pattern.PartArgs, Path: "/path"}},
		}},
		{"url", "http_get", &pattern.ListSource{Part: pattern.PartOutput, Path: "/items"}, []pattern.Mapping{
			{Arg: "url", Part: pattern.PartItem, Path: "/id", Prefix: "/items/",
				Base: &pattern.Base{From: last("get_service"), Part: pattern.PartOutput, Path: "/base_url"}},
		}},
	}
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
					listOK = pt.List.Part == tt.list.Part && pt.List.Path == tt.list.Path && pt.List.Lines == tt.list.Lines
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

// TestMineDeterministic mines the same traces twice, and on one worker and
// on several (which share out the contexts and each memoise what they read
// of the events): the pool files are the same bytes.
func TestMineDeterministic(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.jsonl")
	ss := readSessions(t, files...)
	a, err := Mine(ss, &Options{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Patterns) == 0 {
		t.Fatal("no patterns mined")
	}
	for _, workers := range []int{1, 3} {
		b, err := Mine(readSessions(t, files...), &Options{Workers: workers})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(encode(t, a), encode(t, b)) {
			t.Errorf("mining the same traces again on %d workers gave a different pool file", workers)
		}
	}
}

func TestMineOptions(t *testing.T) {
	for _, o := range []Options{{MaxContext: pattern.MaxContextLimit + 1}, {MinSupport: -1}, {MinConfidence: 2}, {MaxCandidates: 100}, {Workers: -1}} {
		if _, err := Mine(nil, &o); err == nil {
			t.Errorf("Mine with %+v: no error", o)
		}
	}
	pool, err := Mine(nil, nil)
	if err != nil || len(pool.Patterns) != 0 || pool.Mined.MaxContext != DefaultMaxContext {
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
	if len(got) != 1 || got[0].Tool != "sh" || got[0].Arg != "command" || got[0].Kind != pattern.KindWord {
		t.Fatalf("discriminators = %+v, want sh by the word of command", got)
	}
	// Each program leads somewhere else, so each signs apart (one of them
	// may be Other: the fewest values that tell it all are kept).
	s := pattern.NewSigner(got)
	sign := func(cmd string) pattern.Signature {
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
	var pool *pattern.Pool
	cpu0 := cpuSeconds()
	for b.Loop() {
		var err error
		if pool, err = Mine(ss, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric((cpuSeconds()-cpu0)/float64(b.N), "cpu-s/op")
	b.ReportMetric(float64(len(pool.Patterns)), "patterns")
	b.ReportMetric(float64(len(encode(b, pool)))/(1<<20), "file-MiB")
}

func TestPoolRoundTrip(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.jsonl")
	pool, err := Mine(readSessions(t, files...), nil)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "pool.json")
	if err := pool.Save(path); err != nil {
		t.Fatal(err)
	}
	loaded, err := pattern.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(pool, loaded); diff != "" {
		t.Errorf("pool changed through its file (-saved +loaded):\n%s", diff)
	}
	data, _ := os.ReadFile(path)
	if !bytes.Equal(data, encode(t, loaded)) {
		t.Error("re-encoding a loaded pool changed its bytes")
	}
	// The live counts of an index snapshot back into the same pool.
	x, err := pattern.NewIndex(loaded)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(pool, x.Snapshot()); diff != "" {
		t.Errorf("snapshot differs (-mined +snapshot):\n%s", diff)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("Save left %d files behind, want only the pool", len(entries))
	}
}

// TestMineConstantNeedsSessions checks that a value only one session used,
// however often, does not become a constant of the tool: it would take a
// place among the guesses of every other session. A value two sessions
// used does.
func TestMineConstantNeedsSessions(t *testing.T) {
	call := func(s string, seq int, tool, args string) trace.Event {
		return trace.Event{Session: s, Seq: seq, Step: seq + 1, Tool: tool, Args: json.RawMessage(args), Status: trace.StatusOK, Output: "ok"}
	}
	mineConst := func(t *testing.T, values ...string) []string {
		var ss []trace.Session
		for i, v := range values {
			id := "s" + string(rune('a'+i))
			ss = append(ss, trace.Session{ID: id, Events: []trace.Event{
				call(id, 0, "open", `{}`),
				call(id, 1, "run", `{"cmd":"`+v+`"}`),
				call(id, 2, "open", `{}`),
				call(id, 3, "run", `{"cmd":"`+v+`"}`),
			}})
		}
		pool, err := Mine(ss, &Options{MinSupport: 2})
		if err != nil {
			t.Fatal(err)
		}
		var consts []string
		for _, pt := range pool.Patterns {
			for _, m := range pt.Args {
				if pt.Tool == "run" && m.Const != nil {
					consts = append(consts, string(m.Const))
				}
			}
		}
		return consts
	}
	if got := mineConst(t, "only-mine", "b", "c", "d"); len(got) != 0 {
		t.Errorf("a value of one session became a constant: %v", got)
	}
	if got := mineConst(t, "shared", "shared", "c", "d"); !slices.Contains(got, `"shared"`) {
		t.Errorf("constants = %v, want \"shared\" (two sessions used it)", got)
	}
}

// TestMineKinds checks that each kind of call to a discriminated tool (a
// shell's program) after one context gets its own exact pattern: mined
// over all the tool's calls together, the two most frequent kinds would
// take the context's places and the third would never be predicted.
func TestMineKinds(t *testing.T) {
	var ss []trace.Session
	kinds := []struct{ prefix, arg string }{{"cat ", "file"}, {"rm ", "dir"}, {"ls ", "id"}}
	for i := range 12 {
		k := kinds[0]
		switch {
		case i >= 9:
			k = kinds[2]
		case i >= 5:
			k = kinds[1]
		}
		id := "s" + strconv.Itoa(i)
		args := map[string]string{"file": "f" + strconv.Itoa(i) + ".txt", "dir": "d" + strconv.Itoa(i), "id": "x" + strconv.Itoa(i)}
		open, _ := json.Marshal(args)
		cmd, _ := json.Marshal(map[string]string{"command": k.prefix + args[k.arg]})
		ss = append(ss, trace.Session{ID: id, Events: []trace.Event{
			{Session: id, Seq: 0, Step: 1, Tool: "open", Args: open, Status: trace.StatusOK, Output: "ok"},
			{Session: id, Seq: 1, Step: 2, Tool: "sh", Args: cmd, Status: trace.StatusOK, Output: "ok"},
		}})
	}
	disc := []pattern.Discriminator{{Tool: "sh", Arg: "command", Kind: pattern.KindWord, Values: []string{"cat", "ls", "rm"}}}
	pool, err := Mine(ss, &Options{MinSupport: 2, Discriminators: disc})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range kinds {
		want := pattern.Mapping{Arg: "command", From: &pattern.Ref{}, Part: pattern.PartArgs, Path: "/" + k.arg, Prefix: k.prefix}
		if !slices.ContainsFunc(pool.Patterns, func(pt pattern.Pattern) bool {
			return pt.Tool == "sh" && len(pt.Context) == 1 && !pt.Context[0].Start && len(pt.Args) == 1 && cmp.Equal(pt.Args[0], want)
		}) {
			var got []string
			for _, pt := range pool.Patterns {
				got = append(got, pt.Describe())
			}
			t.Errorf("no pattern open → sh(command = %q + /%s); mined:\n%s", k.prefix, k.arg, strings.Join(got, "\n"))
		}
	}
}
