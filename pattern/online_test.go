package pattern_test

import (
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ahead-dev/ahead/mine"
	"github.com/ahead-dev/ahead/pattern"
	"github.com/ahead-dev/ahead/predict"
	"github.com/ahead-dev/ahead/trace"
)

func minePool(t testing.TB, files ...string) *pattern.Pool {
	t.Helper()
	ss, err := trace.Collect(trace.NewReader(nil).Events(files...))
	if err != nil {
		t.Fatal(err)
	}
	pool, err := mine.Mine(ss, &mine.Options{MinSupport: 2})
	if err != nil {
		t.Fatal(err)
	}
	return pool
}

func testdata(name string) string { return filepath.Join("..", "mine", "testdata", name) }

func ev(session string, seq int, tool, args, out string) trace.Event {
	return trace.Event{Session: session, Seq: seq, Tool: tool, Args: json.RawMessage(args), Status: trace.StatusOK, Output: out}
}

type brief struct {
	Tool, Args string
}

func briefs(ps []predict.Prediction) []brief {
	var out []brief
	for _, p := range ps {
		out = append(out, brief{p.Tool, string(p.Args)})
	}
	return out
}

func TestOnlineListCandidates(t *testing.T) {
	o, err := pattern.NewOnline(minePool(t, testdata("list.jsonl")), &pattern.OnlineOptions{Frozen: true})
	if err != nil {
		t.Fatal(err)
	}
	items := `{"items": [{"name": "p"}, {"name": "q"}, {"name": "r"}, {"name": "s"}]}`
	got := briefs(o.Observe(ev("n", 0, "list_items", `{"folder":"x"}`, items)))
	// The whole list, in order: agents fetch lists in parallel calls.
	want := []brief{{"read_item", `{"name":"p"}`}, {"read_item", `{"name":"q"}`}, {"read_item", `{"name":"r"}`}, {"read_item", `{"name":"s"}`}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("after list_items (-want +got):\n%s", diff)
	}
	// p is used: the first element not used yet comes first. Each call
	// appears once, however many patterns predict it.
	got = briefs(o.Observe(ev("n", 1, "read_item", `{"name": "p"}`, "content")))
	want = []brief{{"read_item", `{"name":"q"}`}, {"read_item", `{"name":"r"}`}, {"read_item", `{"name":"s"}`}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("after read_item p (-want +got):\n%s", diff)
	}
	// Another session is independent.
	if got := briefs(o.Observe(ev("m", 0, "list_items", `{"folder":"x"}`, items))); len(got) == 0 || got[0].Args != `{"name":"p"}` {
		t.Errorf("other session: %v", got)
	}
}

// TestOnlineSoon checks that later list elements are worth what the traces
// say of them being called soon (not next), that the list keeps its order,
// and that live calls within the horizon credit the Soon counts once.
func TestOnlineSoon(t *testing.T) {
	pool := minePool(t, testdata("list.jsonl"))
	if pool.Mined.Horizon == 0 {
		t.Fatal("mined pool has no horizon")
	}
	o, err := pattern.NewOnline(pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	x := o.Index()
	var pi int32 = -1
	for i := range int32(x.Len()) {
		if pt := x.Pattern(i); pt.List != nil && len(pt.Context) == 1 && pt.Context[0].Tool == "list_items" {
			pi = i
		}
	}
	if pi < 0 {
		t.Fatal("no list pattern after list_items")
	}
	soon1, ok := x.Soon(pi, 1)
	if !ok || soon1 <= x.Hits(pi, 1) {
		t.Fatalf("rank 1: soon %d (ok %v) not above hits %d", soon1, ok, x.Hits(pi, 1))
	}
	items := `{"items": [{"name": "p"}, {"name": "q"}, {"name": "r"}]}`
	preds := o.Observe(ev("n", 0, "list_items", `{"folder":"x"}`, items))
	if len(preds) != 3 {
		t.Fatalf("got %d predictions, want 3: %v", len(preds), briefs(preds))
	}
	sup := float64(x.Counts(pi).Support) + 1 // the default shrink
	// No rank-1 call was ever next (hits 0): its p comes from Soon.
	if want := float64(soon1) / sup; preds[1].P < want-1e-9 || preds[1].P > preds[0].P {
		t.Errorf("rank 1 p = %v, want ≥ %v (from soon counts) and ≤ rank 0's %v", preds[1].P, want, preds[0].P)
	}
	if preds[2].P > preds[1].P {
		t.Errorf("rank 2 p %v above rank 1's %v", preds[2].P, preds[1].P)
	}
	// q called second (not next) is credited to rank 1 once; p, called
	// next, to rank 0.
	soon0, _ := x.Soon(pi, 0)
	o.Observe(ev("n", 1, "read_item", `{"name":"p"}`, "c"))
	o.Observe(ev("n", 2, "read_item", `{"name":"q"}`, "c"))
	o.Observe(ev("n", 3, "read_item", `{"name":"q"}`, "c"))
	if got, _ := x.Soon(pi, 0); got != soon0+1 {
		t.Errorf("rank 0 soon = %d, want %d", got, soon0+1)
	}
	if got, _ := x.Soon(pi, 1); got != soon1+1 {
		t.Errorf("rank 1 soon = %d, want %d", got, soon1+1)
	}
}

func TestOnlineProbabilities(t *testing.T) {
	o, err := pattern.NewOnline(minePool(t, testdata("list.jsonl")), &pattern.OnlineOptions{Frozen: true})
	if err != nil {
		t.Fatal(err)
	}
	preds := o.Observe(ev("n", 0, "list_items", `{"folder":"x"}`, `{"items": [{"name": "p"}, {"name": "q"}]}`))
	for i, p := range preds {
		if p.P <= 0 || p.P > 1 {
			t.Errorf("prediction %d has p = %v", i, p.P)
		}
		if i > 0 && p.P > preds[i-1].P && i > 1 {
			t.Errorf("predictions not ranked by p after the first: %v", preds)
		}
	}
}

func TestOnlineToolOnly(t *testing.T) {
	pool := &pattern.Pool{Version: pattern.Version, Mined: pattern.Mined{MaxContext: 2}, Patterns: []pattern.Pattern{
		{Context: []pattern.Signature{{Tool: "a"}}, Tool: "b", Support: 10, Hits: []int{8}, ToolHits: 8},
	}}
	o, err := pattern.NewOnline(pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	preds := o.Observe(ev("s", 0, "a", `{}`, ""))
	if len(preds) != 1 || preds[0].Tool != "b" || preds[0].Args != nil {
		t.Fatalf("predictions = %+v, want b tool-only", preds)
	}
	if want := 8.0 / 11; preds[0].P != want {
		t.Errorf("p = %v, want %v (hits / (support + 1))", preds[0].P, want)
	}
	if preds := o.Observe(ev("s", 1, "unknown", `{}`, "")); preds != nil {
		t.Errorf("after an unknown tool: %+v", preds)
	}
}

func TestOnlineLearns(t *testing.T) {
	pool := minePool(t, testdata("path.jsonl"))
	support := func(o *pattern.Online) int {
		n := 0
		for _, p := range o.Snapshot().Patterns {
			n += p.Support + p.ElseSupport
		}
		return n
	}
	for _, frozen := range []bool{false, true} {
		o, err := pattern.NewOnline(pool, &pattern.OnlineOptions{Frozen: frozen})
		if err != nil {
			t.Fatal(err)
		}
		before := support(o)
		preds := o.Observe(ev("n", 0, "lookup_user", `{"name":"z"}`, `{"user": {"id": "u9"}}`))
		if len(preds) == 0 || string(preds[0].Args) != `{"user_id":"u9"}` {
			t.Fatalf("predictions = %+v", preds)
		}
		o.Observe(ev("n", 1, "get_profile", `{"user_id":"u9"}`, "{}"))
		snap := o.Snapshot()
		grew := support(o) - before
		if frozen && grew != 0 {
			t.Errorf("frozen predictor learnt: support grew by %d", grew)
		}
		if !frozen {
			if grew == 0 {
				t.Error("support did not grow")
			}
			for _, p := range snap.Patterns {
				if p.Tool == "get_profile" && p.Exact && p.Hits[0] != p.Support {
					t.Errorf("%s: hits %v of support %d, want the hit counted", p.Describe(), p.Hits, p.Support)
				}
			}
		}
	}
}

func TestOnlineSessionsBounded(t *testing.T) {
	o, err := pattern.NewOnline(minePool(t, testdata("path.jsonl")), &pattern.OnlineOptions{MaxSessions: 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"a", "b", "a", "c"} {
		o.Observe(ev(s, 0, "lookup_user", `{}`, `{}`))
	}
	n, has := o.Tracked("a", "b")
	hasA, hasB := has[0], has[1]
	if n != 2 || !hasA || hasB {
		t.Errorf("sessions after a, b, a, c with room for 2: n=%d a=%v b=%v; want the least recently active (b) evicted", n, hasA, hasB)
	}
	o.Forget("a")
	_, has = o.Tracked("a")
	hasA = has[0]
	if hasA {
		t.Error("Forget kept the session")
	}
}

func TestOnlineConcurrent(t *testing.T) {
	o, err := pattern.NewOnline(minePool(t, testdata("list.jsonl")), nil)
	if err != nil {
		t.Fatal(err)
	}
	items := `{"items": [{"name": "p"}, {"name": "q"}, {"name": "r"}]}`
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				s := fmt.Sprint("s", g, "-", i%5)
				o.Observe(ev(s, 0, "list_items", `{}`, items))
				o.Observe(ev(s, 1, "read_item", `{"name":"p"}`, ""))
				if i%7 == 0 {
					o.Forget(s)
				}
			}
		})
	}
	wg.Go(func() {
		for range 20 {
			if err := o.Snapshot().Save(filepath.Join(t.TempDir(), "p.json")); err != nil {
				t.Error(err)
			}
		}
	})
	wg.Wait()
}

func TestNGram(t *testing.T) {
	g := predict.NewNGram(3)
	g.Train([]trace.Session{
		{ID: "1", Events: []trace.Event{ev("1", 0, "a", `{}`, ""), ev("1", 1, "b", `{"x":1}`, ""), ev("1", 2, "c", `{}`, "")}},
		{ID: "2", Events: []trace.Event{ev("2", 0, "a", `{}`, ""), ev("2", 1, "b", `{"x":2}`, ""), ev("2", 2, "b", `{}`, "")}},
	})
	got := g.Observe(ev("s", 0, "a", `{"q":1}`, ""))
	if len(got) != 1 || got[0].Tool != "b" || got[0].Args != nil || got[0].P != 1 {
		t.Errorf("after a: %+v, want b tool-only with p 1", got)
	}
	got = g.Observe(ev("s", 1, "b", `{"x":3}`, ""))
	// After (a, b): c or b, half each; b repeats its last arguments.
	want := []brief{{"b", `{"x":3}`}, {"c", ""}}
	if diff := cmp.Diff(want, briefs(got)); diff != "" {
		t.Errorf("after a, b (-want +got):\n%s", diff)
	}
	g.Forget("s")
	if got := g.Observe(ev("s", 0, "b", `{}`, "")); len(got) == 0 || got[0].Args == nil {
		t.Errorf("after Forget, b then: %+v", got)
	}
}

// TestOnlineRepeats checks that a one-call pattern's p depends on whether
// the session made the call already, from the pattern's repeat counts,
// and that learning counts repeats.
func TestOnlineRepeats(t *testing.T) {
	pool := &pattern.Pool{Version: pattern.Version, Mined: pattern.Mined{MaxContext: 2}, Patterns: []pattern.Pattern{{
		Context: []pattern.Signature{{Tool: "a"}}, Tool: "b", Exact: true,
		Args:    []pattern.Mapping{{Arg: "x", From: &pattern.Ref{}, Part: pattern.PartArgs, Path: "/x"}},
		Support: 10, Hits: []int{5}, ToolHits: 5, Repeats: 5, RepeatHits: 0,
	}}}
	o, err := pattern.NewOnline(pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	p0 := 5.0 / 11
	fresh := o.Observe(ev("s", 0, "a", `{"x":1}`, ""))
	if want := (5 + p0) / 6; len(fresh) != 1 || fresh[0].P != want {
		t.Fatalf("a call not made yet: %+v, want p = %v", fresh, want)
	}
	o.Observe(ev("s", 1, "b", `{"x":1}`, "")) // a hit, not a repeat
	again := o.Observe(ev("s", 2, "a", `{"x":1}`, ""))
	// p is now 6/12 (one learnt hit), and no repeat was ever made again.
	if want := (6.0 / 12) / 6; len(again) != 1 || again[0].P != want {
		t.Fatalf("a call made already: %+v, want p = %v", again, want)
	}
	o.Observe(ev("s", 3, "b", `{"x":1}`, "")) // a hit, and a repeat
	got := o.Snapshot().Patterns[0]
	if got.Support != 12 || got.Hits[0] != 7 || got.Repeats != 6 || got.RepeatHits != 1 {
		t.Errorf("learnt counts: support %d hits %v repeats %d repeat hits %d, want 12 [7] 6 1",
			got.Support, got.Hits, got.Repeats, got.RepeatHits)
	}
}

// startSessions are sessions whose first call is mostly setup with a
// constant mode, else browse with a query that varies.
func startSessions() []trace.Session {
	var ss []trace.Session
	for i := range 10 {
		id := fmt.Sprint("s", i)
		first := ev(id, 0, "setup", `{"mode":"fast"}`, "ok")
		switch {
		case i >= 6 && i < 9:
			first = ev(id, 0, "browse", fmt.Sprintf(`{"q":"q%d"}`, i), "ok")
		case i == 9:
			first = ev(id, 0, "setup", `{"mode":"slow"}`, "ok")
		}
		ss = append(ss, trace.Session{ID: id, Events: []trace.Event{first, ev(id, 1, "work", fmt.Sprintf(`{"n":%d}`, i), "done")}})
	}
	return ss
}

func TestOnlineStart(t *testing.T) {
	pool, err := mine.Mine(startSessions(), &mine.Options{MinSupport: 2})
	if err != nil {
		t.Fatal(err)
	}
	// startCounts sums the counts of the session-start patterns.
	startCounts := func(o *pattern.Online) (support, hits int) {
		for _, p := range o.Snapshot().Patterns {
			if len(p.Context) == 1 && p.Context[0].Start {
				support += p.Support
				hits += p.Hits[0]
			}
		}
		return support, hits
	}
	o, err := pattern.NewOnline(pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(o.Index().Start()); n != 2 {
		t.Fatalf("%d session-start patterns, want 2 (setup exact, browse tool-only)", n)
	}
	// The constant is predicted; browse, whose query varies, is tool-only.
	got := o.Start("n")
	want := []brief{{"setup", `{"mode":"fast"}`}, {"browse", ""}}
	if diff := cmp.Diff(want, briefs(got)); diff != "" {
		t.Fatalf("Start (-want +got):\n%s", diff)
	}
	// p = (hits + p0) / (support + 1) with p0 = 6/11, as after an event.
	if wantP := (6 + 6.0/11) / 11; math.Abs(got[0].P-wantP) > 1e-12 {
		t.Errorf("setup p = %v, want %v", got[0].P, wantP)
	}
	if wantP := 3.0 / 11; math.Abs(got[1].P-wantP) > 1e-12 {
		t.Errorf("browse p = %v, want %v", got[1].P, wantP)
	}
	// A second Start before any event predicts the same, and the first
	// event settles the predictions once.
	if diff := cmp.Diff(got, o.Start("n")); diff != "" {
		t.Errorf("second Start (-first +second):\n%s", diff)
	}
	support, hits := startCounts(o)
	after := o.Observe(ev("n", 0, "setup", `{"mode":"fast"}`, "ok"))
	if len(after) == 0 || after[0].Tool != "work" {
		t.Errorf("after the first event: %+v, want work", after)
	}
	s2, h2 := startCounts(o)
	if s2 != support+2 || h2 != hits+1 {
		t.Errorf("after a hit: support %d → %d, hits %d → %d; want +2 (both patterns) and +1 (setup)", support, s2, hits, h2)
	}
	// After events, Start says nothing and settles nothing.
	if preds := o.Start("n"); preds != nil {
		t.Errorf("Start after an event: %+v", preds)
	}
	o.Observe(ev("n", 1, "work", `{"n":1}`, "done"))
	if s3, h3 := startCounts(o); s3 != s2 || h3 != h2 {
		t.Errorf("a later event changed the start counts: support %d → %d, hits %d → %d", s2, s3, h2, h3)
	}
	// A miss counts an occurrence and no hit.
	o.Start("m")
	o.Observe(ev("m", 0, "browse", `{"q":"new"}`, "ok"))
	if s4, h4 := startCounts(o); s4 != s2+2 || h4 != h2 {
		t.Errorf("after a miss of setup: support %d → %d, hits %d → %d; want +2 and +0", s2, s4, h2, h4)
	}
	// Without Start, the first event settles nothing.
	o.Observe(ev("x", 0, "setup", `{"mode":"fast"}`, "ok"))
	if s5, _ := startCounts(o); s5 != s2+2 {
		t.Errorf("a first event without Start changed the start support: %d → %d", s2+2, s5)
	}
}

func TestNGramStart(t *testing.T) {
	g := predict.NewNGram(3)
	g.Train(startSessions())
	want := []brief{{"setup", ""}, {"browse", ""}}
	got := g.Start("n")
	if diff := cmp.Diff(want, briefs(got)); diff != "" {
		t.Errorf("Start (-want +got):\n%s", diff)
	}
	if len(got) == 2 && (got[0].P != 0.7 || got[1].P != 0.3) {
		t.Errorf("p = %v, %v; want 0.7, 0.3", got[0].P, got[1].P)
	}
	g.Observe(ev("n", 0, "setup", `{"mode":"fast"}`, "ok"))
	if got := g.Start("n"); got != nil {
		t.Errorf("Start after an event: %+v", got)
	}
	if got := predict.NewNGram(3).Start("n"); got != nil {
		t.Errorf("untrained Start: %+v", got)
	}
}

func TestOnlineSessionBytes(t *testing.T) {
	o, err := pattern.NewOnline(minePool(t, testdata("list.jsonl")), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := o.SessionBytes("s"); got != 0 {
		t.Errorf("SessionBytes of an unknown session = %d, want 0", got)
	}
	big := `{"items": [{"name": "p"}], "pad": "` + strings.Repeat("x", 64<<10) + `"}`
	o.Observe(ev("s", 0, "list_items", `{}`, big))
	one := o.SessionBytes("s")
	if one < 64<<10 {
		t.Errorf("SessionBytes after a 64 KiB output = %d, want at least %d: the output is retained", one, 64<<10)
	}
	// The window and the per-signature memory are bounded: however many
	// large outputs come, the state stays within a few events' worth.
	for i := range 100 {
		o.Observe(ev("s", i+1, "list_items", `{}`, big))
	}
	if got, limit := o.SessionBytes("s"), int64(o.Window()+4)*one; got > limit {
		t.Errorf("SessionBytes after 101 outputs of 64 KiB = %d, want at most %d", got, limit)
	}
	o.Forget("s")
	if got := o.SessionBytes("s"); got != 0 {
		t.Errorf("SessionBytes after Forget = %d, want 0", got)
	}
}

// TestOnlineBaseOfItsOwn evaluates values of two sources whose first part
// is read from an event of its own, named both ways a source's event is:
// a context element (ctx 1, the call before the list's) and the session's
// most recent event of a signature. Where that event is missing, the
// pattern gives nothing.
func TestOnlineBaseOfItsOwn(t *testing.T) {
	for _, from := range []string{`{"ctx":1}`, `{"ctx":0,"sig":{"tool":"mkdir"}}`} {
		t.Run(from, func(t *testing.T) {
			pool, err := pattern.Decode([]byte(`{"version":1,"mined":{"max_context":4,"min_support":2,"min_confidence":0.05,"horizon":8,"sessions":2,"calls":8},"discriminators":[],"patterns":[` +
				`{"context":[{"tool":"mkdir"},{"tool":"ls"}],"tool":"mv","exact":true,"list":{"from":{"ctx":0},"part":"output","path":"","lines":true},` +
				`"args":[{"arg":"to","part":"item","prefix":"/","base":{"from":` + from + `,"part":"args","path":"/dir"}}],"support":4,"hits":[4,0,0],"tool_hits":4,"p":1,"soon":[4,4,4]}]}`))
			if err != nil {
				t.Fatal(err)
			}
			o, err := pattern.NewOnline(pool, nil)
			if err != nil {
				t.Fatal(err)
			}
			o.Observe(ev("s", 0, "mkdir", `{"dir":"/srv/done"}`, "ok"))
			got := briefs(o.Observe(ev("s", 1, "ls", `{"dir":"/srv/todo"}`, "a.md\nb.go\n")))
			want := []brief{{"mv", `{"to":"/srv/done/a.md"}`}, {"mv", `{"to":"/srv/done/b.go"}`}}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("predictions after the listing (-want +got):\n%s", diff)
			}
			// Another session lists without the earlier call: nothing.
			if got := o.Observe(ev("t", 0, "ls", `{"dir":"/srv/todo"}`, "a.md\n")); len(got) != 0 {
				t.Errorf("without the base's event: %v, want nothing", briefs(got))
			}
		})
	}
}

// TestOnlineNth: a reference to the event before the most recent of a
// signature (Ref.Nth) reads it, however many other events came between;
// nothing while the session has only one.
func TestOnlineNth(t *testing.T) {
	pool, err := pattern.Decode([]byte(`{"version":1,"mined":{"max_context":2,"min_support":2,"min_confidence":0.05,"horizon":8,"sessions":2,"calls":8},"discriminators":[],"patterns":[` +
		`{"context":[{"tool":"edit"}],"tool":"run","exact":true,` +
		`"args":[{"arg":"cmd","from":{"ctx":0,"sig":{"tool":"run"},"nth":1},"part":"args","path":"/cmd"}],"support":4,"hits":[4],"tool_hits":4,"p":1}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := pool.Patterns[0].Describe(); got != "edit → run(cmd = args(run, 1 before)/cmd)" {
		t.Errorf("Describe = %q", got)
	}
	o, err := pattern.NewOnline(pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	o.Observe(ev("s", 0, "run", `{"cmd":"test a"}`, "fail"))
	if got := o.Observe(ev("s", 1, "edit", `{"file":"a.go"}`, "ok")); len(got) != 0 {
		t.Errorf("after one run: %v, want nothing", briefs(got))
	}
	seq := 2
	for _, cmd := range []string{"test b", "test c"} {
		o.Observe(ev("s", seq, "run", `{"cmd":"`+cmd+`"}`, "ok"))
		seq++
		for range 3 {
			o.Observe(ev("s", seq, "look", `{}`, "ok"))
			seq++
		}
	}
	got := briefs(o.Observe(ev("s", seq, "edit", `{"file":"a.go"}`, "ok")))
	if diff := cmp.Diff([]brief{{"run", `{"cmd":"test b"}`}}, got); diff != "" {
		t.Errorf("predictions after the edit (-want +got):\n%s", diff)
	}
}
