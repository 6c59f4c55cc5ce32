package pattern

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ahead-dev/ahead/callkey"
	"github.com/ahead-dev/ahead/trace"
)

// minedPools holds the pools package mine mines from its small hand-made
// traces: its golden test keeps them what mining gives.
var minedPools = filepath.Join("..", "mine", "testdata")

// TestListFallback checks "the first element not used yet": the
// candidates skip what the session already called, in list order.
func TestListFallback(t *testing.T) {
	pool, err := Load(filepath.Join(minedPools, "list.pool.json"))
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
