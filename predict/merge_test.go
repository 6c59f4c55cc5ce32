package predict

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ahead-dev/ahead/trace"
)

func TestMerge(t *testing.T) {
	a := []Prediction{
		{Tool: "get", Args: json.RawMessage(`{"id":1,"x":"a"}`), P: 0.4, Origin: OriginPattern},
		{Tool: "list", P: 0.3, Origin: OriginPattern},
		{Tool: "bad", Args: json.RawMessage(`[1]`), P: 0.9},
	}
	b := []Prediction{
		{Tool: "get", Args: json.RawMessage(`{"x": "a", "id": 1}`), P: 0.7, Origin: OriginMessage},
		{Tool: "list", P: 0.1, Origin: OriginMessage},
		{Tool: "find", Args: json.RawMessage(`{"q":"w"}`), P: 0.35, Origin: OriginMessage},
		{Tool: "get", P: 0.9, Origin: OriginPattern},
	}
	got := Merge(a, b)
	want := []Prediction{
		{Tool: "get", Args: json.RawMessage(`{"id":1,"x":"a"}`), P: 0.7, Origin: OriginMessage},
		{Tool: "find", Args: json.RawMessage(`{"q":"w"}`), P: 0.35, Origin: OriginMessage},
		{Tool: "list", P: 0.3, Origin: OriginPattern},
	}
	// The tool-only guess of "get" goes: an origin names a concrete call of
	// it. That of "list" stays: none does.
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Merge (-want +got):\n%s", d)
	}
}

type hearing struct{ Func }

func (hearing) Hear(msg trace.Event) []Prediction {
	return []Prediction{{Tool: "said", P: 0.5, Origin: OriginMessage}}
}

func TestJoin(t *testing.T) {
	pat := Func(func(ev trace.Event) []Prediction { return []Prediction{{Tool: "next", P: 0.6}} })
	j := Join(pat, nil, hearing{})
	if got := j.Observe(trace.Event{Session: "s"}); len(got) != 1 || got[0].Tool != "next" {
		t.Errorf("Observe = %+v, want the pattern's one prediction", got)
	}
	if got := j.Hear(trace.Event{Kind: trace.KindMessage, Session: "s"}); len(got) != 1 || got[0].Tool != "said" {
		t.Errorf("Hear = %+v, want the hearer's one prediction", got)
	}
}
