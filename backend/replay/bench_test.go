package replay

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/ahead-dev/ahead/backend"
	"github.com/ahead-dev/ahead/trace"
)

// BenchmarkCall measures the backend's own cost per call (no modelled
// latency) in a session of 200 calls, matching near the end: the overhead
// the replay adds to every modelled latency.
func BenchmarkCall(b *testing.B) {
	var evs []trace.Event
	for i := range 200 {
		evs = append(evs, trace.Event{Session: "s", Seq: i, Tool: "get", Args: json.RawMessage(fmt.Sprintf(`{"id":%d}`, i)), Status: trace.StatusOK, Output: "out"})
	}
	rb := New([]trace.Session{{ID: "s", Events: evs}}, &Options{Latency: Const(0)})
	req := backend.Request{Session: "s", Tool: "get", Args: json.RawMessage(`{"id":190}`), Speculative: true}
	rb.SetPosition("s", 100)
	ctx := b.Context()
	for b.Loop() {
		if _, err := rb.Call(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}
