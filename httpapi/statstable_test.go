package httpapi

import (
	"bytes"
	"encoding/json"
	"iter"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ahead-dev/ahead/trace"
)

func events(evs ...trace.Event) iter.Seq2[trace.Event, error] {
	return func(yield func(trace.Event, error) bool) {
		for _, ev := range evs {
			if !yield(ev, nil) {
				return
			}
		}
	}
}

func msp(v float64) *float64 { return &v }

func TestStatsFromTraces(t *testing.T) {
	args := json.RawMessage(`{}`)
	st, err := StatsFromTraces(events(
		trace.Event{Session: "a", Tool: "read", Args: args, Source: "executed", DurationMS: msp(100), LLMMS: msp(1000)},
		trace.Event{Kind: trace.KindSpeculative, Session: "a", Tool: "read", Args: args, Speculative: true, Outcome: "reused", DurationMS: msp(80.5)},
		trace.Event{Session: "a", Seq: 1, Tool: "read", Args: args, Source: "reused", DurationMS: msp(0), LLMMS: msp(3000)},
		trace.Event{Kind: trace.KindSpeculative, Session: "a", Tool: "list", Args: args, Speculative: true, Outcome: "expired", DurationMS: msp(40)},
		trace.Event{Session: "a", Seq: 2, Tool: "list", Args: args, DurationMS: msp(30)}, // another recorder: no source
		trace.Event{Kind: trace.KindMessage, Session: "a", Role: "user", Content: "hi"},
	))
	if err != nil {
		t.Fatal(err)
	}
	want := Stats{
		Calls: 3, Executed: 2, Reused: 1, SpeculativeStarted: 2,
		Outcomes: map[string]int64{"reused": 1, "expired": 1}, SavedMS: 80.5, WastedMS: 40,
		Tools: map[string]ToolStats{
			"read": {Calls: 2, Executed: 1, Reused: 1, SpeculativeStarted: 1, SavedMS: 80.5, MeanDurationMS: 50, MeanThinkMS: 2000},
			"list": {Calls: 1, Executed: 1, SpeculativeStarted: 1, Wasted: 1, WastedMS: 40, MeanDurationMS: 30},
		},
	}
	if diff := cmp.Diff(want, st); diff != "" {
		t.Errorf("stats (-want +got):\n%s", diff)
	}
	var b bytes.Buffer
	if err := st.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	wantTable := `   tool  calls  executed  reused  promoted  served ahead  spec. runs  wasted runs  saved  wasted  mean duration
   read      2         1       1         0           50%           1            0   0.1s    0.0s           50ms
   list      1         1       0         0            0%           1            1   0.0s    0.0s           30ms
  total      3         2       1         0           33%           2            1   0.1s    0.0s               

speculative outcomes: expired 1 reused 1
0.67 speculative executions per call
`
	if diff := cmp.Diff(wantTable, b.String()); diff != "" {
		t.Errorf("table (-want +got):\n%s", diff)
	}
}

// TestStatsFromTracesPromotedSaved: a promoted run saved only what it ran
// before the agent's call came, as the engine (and the exit summary)
// counts it (issue 27); a promoted run whose call line is missing counts
// whole.
func TestStatsFromTracesPromotedSaved(t *testing.T) {
	args := json.RawMessage(`{"id":1}`)
	st, err := StatsFromTraces(events(
		trace.Event{Kind: trace.KindSpeculative, Session: "a", Tool: "get", Args: args, Speculative: true, Outcome: "promoted",
			TS: "2026-01-01T00:00:00Z", DurationMS: msp(500)},
		trace.Event{Session: "a", Tool: "get", Args: args, Source: "promoted", TS: "2026-01-01T00:00:00.2Z", DurationMS: msp(500)},
		trace.Event{Kind: trace.KindSpeculative, Session: "b", Tool: "get", Args: args, Speculative: true, Outcome: "promoted",
			TS: "2026-01-01T00:00:00Z", DurationMS: msp(300)},
	))
	if err != nil {
		t.Fatal(err)
	}
	if st.SavedMS != 200+300 || st.Tools["get"].SavedMS != 500 {
		t.Errorf("saved %vms (get %vms), want 500: 200 before the call came, and 300 of a run without its call line", st.SavedMS, st.Tools["get"].SavedMS)
	}
}

// TestWriteTableUpstreams: the table says which MCP revision each upstream
// is reached with, and how.
func TestWriteTableUpstreams(t *testing.T) {
	st := Stats{Upstreams: []UpstreamStats{
		{Name: "docs", Revision: "2026-07-28", Shared: true, Connections: 1},
		{Name: "fs", Revision: "2025-11-25", Connections: 3},
		{Name: "web"},
	}}
	var b bytes.Buffer
	if err := st.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	want := `MCP upstream docs: 2026-07-28, stateless: one connection for every session
MCP upstream fs: 2025-11-25, 3 connections, one per session
MCP upstream web: -, not reached yet
`
	got := b.String()
	if i := bytes.Index(b.Bytes(), []byte("MCP upstream")); i >= 0 {
		got = got[i:]
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("table's upstream lines (-want +got):\n%s", diff)
	}
}
