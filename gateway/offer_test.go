package gateway

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ahead-dev/ahead/backend"
	"github.com/ahead-dev/ahead/engine"
	"github.com/ahead-dev/ahead/policy"
)

// TestLateStreamOfferRefused: a stream's calls are offered for the seqs the
// agent's calls will take, counted from what the session had done when its
// agent asked the model. A call the parse hands over only after the agent
// has begun a later step is refused as late, not speculated for that step;
// one that comes while the agent runs the response's calls at once is
// still taken.
func TestLateStreamOfferRefused(t *testing.T) {
	for _, tc := range []struct {
		name     string
		parallel bool // the agent runs the response's two calls in one step
		want     bool // the late offer is taken
		runs     int  // times lookup 2 runs
	}{
		{"after the agent's next step: refused", false, false, 1},
		{"within the response's step: taken", true, true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var mu sync.Mutex
				runs := map[string]int{}
				eng := engine.New(&engine.Options{
					Backends: map[string]engine.Backend{"b": {Backend: backend.Funcs{
						"lookup": func(ctx context.Context, args json.RawMessage) (string, error) {
							mu.Lock()
							runs[string(args)]++
							mu.Unlock()
							select {
							case <-time.After(time.Second):
								return "found", nil
							case <-ctx.Done():
								return "", ctx.Err()
							}
						},
					}}},
					Policy:        &policy.Policy{Tools: map[string]policy.Tool{"lookup": {Allow: true, Reads: policy.Refs("id")}}},
					Amplification: -1,
				})
				defer eng.Close()
				g, err := New(&Options{OpenAI: &Upstream{BaseURL: "http://127.0.0.1:1/v1"}, Engine: eng})
				if err != nil {
					t.Fatal(err)
				}
				defer g.Close()
				ctx := t.Context()
				call := func(id string) engine.Result {
					t.Helper()
					res, err := eng.Call(ctx, "s", "lookup", json.RawMessage(`{"id":"`+id+`"}`))
					if err != nil {
						t.Fatal(err)
					}
					return res
				}
				call("0")
				// The agent asks the model; the response holds lookup 1 and
				// lookup 2, the parse hands over the first at once.
				o := &offerer{g: g, session: "s", engine: "s", seq: eng.NextSeq("s"), sent: time.Now()}
				o.offer(toolCall{ID: "call_1", Name: "lookup", Args: json.RawMessage(`{"id":"1"}`)})
				time.Sleep(100 * time.Millisecond)

				var wg sync.WaitGroup
				if tc.parallel {
					wg.Go(func() {
						if res := call("1"); res.Source != engine.Promoted {
							t.Errorf("lookup 1 was %s, want promoted", res.Source)
						}
					})
					synctest.Wait() // lookup 1 in flight
				} else {
					if res := call("1"); res.Source != engine.Promoted {
						t.Errorf("lookup 1 was %s, want promoted", res.Source)
					}
					call("9") // the agent's next step
				}
				// The parse, far behind, hands over lookup 2 only now.
				if got := g.opts.Engine.Offer(o.engine, o.seq+o.calls, nil); got != tc.want {
					// nil predictions: only the verdict, nothing offered
					t.Errorf("Offer(seq %d) = %v, want %v", o.seq+o.calls, got, tc.want)
				}
				o.offer(toolCall{ID: "call_2", Name: "lookup", Args: json.RawMessage(`{"id":"2"}`)})
				synctest.Wait()
				res := call("2")
				wg.Wait()
				if want := map[bool]engine.Source{true: engine.Promoted, false: engine.Executed}[tc.want]; res.Source != want {
					t.Errorf("lookup 2 was %s, want %s", res.Source, want)
				}
				mu.Lock()
				defer mu.Unlock()
				if n := runs[`{"id":"2"}`]; n != tc.runs {
					t.Errorf("lookup 2 ran %d times, want %d", n, tc.runs)
				}
			})
		})
	}
}
