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

// TestMineNth mines sessions that run a test, run another, read and edit
// for a while (beyond the context's reach), then run the first test
// again: the run before the most recent one (pattern.Ref.Nth 1), which
// no context element and no most recent event of a signature names. The
// pool must predict it in a session with names never seen.
func TestMineNth(t *testing.T) {
	var ss []trace.Session
	for i := range 8 {
		s := trace.Session{ID: "s" + strconv.Itoa(i)}
		add := func(tool, args string) {
			s.Events = append(s.Events, trace.Event{Session: s.ID, Seq: len(s.Events), Tool: tool,
				Args: json.RawMessage(args), Status: trace.StatusOK, Output: "ok"})
		}
		first := `{"cmd":"test tests/t` + strconv.Itoa(i) + `_a.py"}`
		add("run", first)
		add("run", `{"cmd":"test tests/t`+strconv.Itoa(i)+`_b.py"}`)
		for j := range 2 {
			add("read", `{"file":"src/f`+strconv.Itoa(i*10+j)+`.py"}`)
		}
		add("edit", `{"file":"src/f`+strconv.Itoa(i*10)+`.py"}`)
		add("read", `{"file":"src/f`+strconv.Itoa(i*10)+`.py"}`)
		add("edit", `{"file":"src/f`+strconv.Itoa(i*10+1)+`.py"}`)
		add("run", first)
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
	pool, err := pattern.Decode([]byte(b.String()))
	if err != nil {
		t.Fatalf("the pool written is not read back: %v", err)
	}
	var descs []string
	nth := false
	for _, pt := range pool.Patterns {
		descs = append(descs, pt.Describe())
		for _, m := range pt.Args {
			nth = nth || (m.From != nil && m.From.Nth == 1)
		}
	}
	if !nth {
		t.Errorf("no mapping reads the run before the most recent (args(run, 1 before)/cmd); mined:\n%s", strings.Join(descs, "\n"))
	}
	o, err := pattern.NewOnline(pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for i, e := range [][2]string{
		{"run", `{"cmd":"test spec/x_one.rb"}`}, {"run", `{"cmd":"test spec/x_two.rb"}`},
		{"read", `{"file":"lib/p.rb"}`}, {"read", `{"file":"lib/q.rb"}`},
		{"edit", `{"file":"lib/p.rb"}`}, {"read", `{"file":"lib/p.rb"}`}, {"edit", `{"file":"lib/q.rb"}`},
	} {
		got = got[:0]
		for _, p := range o.Observe(trace.Event{Session: "new", Seq: i, Tool: e[0], Args: json.RawMessage(e[1]), Status: trace.StatusOK, Output: "ok"}) {
			got = append(got, p.Tool+string(p.Args))
		}
	}
	if want := `run{"cmd":"test spec/x_one.rb"}`; !slices.Contains(got, want) {
		t.Errorf("predictions after the last edit lack %s; got %v; mined:\n%s", want, got, strings.Join(descs, "\n"))
	}
}
