package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
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
	eng := engine.New(engine.Options{
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
