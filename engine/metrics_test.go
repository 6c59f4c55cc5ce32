package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ahead-dev/ahead/backend"
	"github.com/ahead-dev/ahead/engine"
)

// anyTool serves every tool name: a backend without a tools list.
type anyTool struct{}

func (anyTool) Call(ctx context.Context, req backend.Request) (backend.Response, error) {
	return backend.Response{Output: req.Tool}, nil
}

// TestMetricLabelsBounded checks that a client naming a new tool in every
// call cannot grow the metrics without bound.
func TestMetricLabelsBounded(t *testing.T) {
	reg := prometheus.NewRegistry()
	eng := engine.New(&engine.Options{
		Backends:   map[string]engine.Backend{"any": {Backend: anyTool{}}},
		Registerer: reg,
	})
	defer eng.Close()
	for i := range 1000 {
		if _, err := eng.Call(t.Context(), "s", fmt.Sprintf("tool-%d", i), json.RawMessage(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "ahead_calls_total" {
			continue
		}
		tools := map[string]float64{}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "tool" {
					tools[l.GetValue()] += m.GetCounter().GetValue()
				}
			}
		}
		if len(tools) > 257 || tools["other"] != 1000-256 {
			t.Errorf("%d tool labels, %v calls as other; want at most 257 labels and 744 as other", len(tools), tools["other"])
		}
		return
	}
	t.Fatal("no ahead_calls_total metric")
}

// TestToolStatsBounded: the per-tool statistics (and so /v1/stats) are
// bounded like the metric labels, long names included; a tool a backend
// lists keeps its own figures however many others came first (issue 23:
// 20,000 names took 178 MiB and made /v1/stats 85 MB).
func TestToolStatsBounded(t *testing.T) {
	eng := engine.New(&engine.Options{Backends: map[string]engine.Backend{
		"any":    {Backend: anyTool{}},
		"listed": {Backend: anyTool{}, Tools: []string{"read"}},
	}})
	defer eng.Close()
	call := func(tool string) {
		t.Helper()
		if _, err := eng.Call(t.Context(), "s", tool, json.RawMessage(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	long := strings.Repeat("x", 1<<20)
	call(long)
	for i := range 1000 {
		call(fmt.Sprintf("tool-%d", i))
	}
	call("read")
	st := eng.Stats().Tools
	if len(st) > 258 {
		t.Errorf("%d tools with statistics, want at most 258 (256, other and the listed one)", len(st))
	}
	if _, ok := st[long]; ok {
		t.Error("a 1 MiB tool name has statistics of its own")
	}
	var sum int64
	for _, ts := range st {
		sum += ts.Calls
	}
	if sum != 1002 || st["other"].Calls < 1000-256 {
		t.Errorf("%d calls counted, %d of them as other; want all 1002, at least 744 as other", sum, st["other"].Calls)
	}
	if st["read"].Calls != 1 {
		t.Errorf("the listed tool read: %+v, want its own call", st["read"])
	}
}
