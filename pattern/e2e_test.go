package pattern_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ahead-dev/ahead/backend"
	"github.com/ahead-dev/ahead/engine"
	"github.com/ahead-dev/ahead/mine"
	"github.com/ahead-dev/ahead/pattern"
	"github.com/ahead-dev/ahead/policy"
	"github.com/ahead-dev/ahead/trace"
)

// TestMinedPredictionReusedThroughEngine mines a trace, serves the pool
// through the engine, and sees the agent's next call answered from a
// speculative execution the pattern predicted.
func TestMinedPredictionReusedThroughEngine(t *testing.T) {
	ss, err := trace.Collect(trace.NewReader(nil).Events(filepath.Join("..", "mine", "testdata", "list.jsonl")))
	if err != nil {
		t.Fatal(err)
	}
	pool, err := mine.Mine(ss, &mine.Options{MinSupport: 2})
	if err != nil {
		t.Fatal(err)
	}
	synctest.Test(t, func(t *testing.T) {
		online, err := pattern.NewOnline(pool, nil)
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex // protects runs
		runs := make(map[string]int)
		slow := func(out string) backend.Func {
			return func(ctx context.Context, args json.RawMessage) (string, error) {
				mu.Lock()
				runs[string(args)]++
				mu.Unlock()
				select {
				case <-time.After(500 * time.Millisecond):
					return out, nil
				case <-ctx.Done():
					return "", ctx.Err()
				}
			}
		}
		tools := backend.Funcs{
			"list_items": slow(`{"items": [{"name": "x1"}, {"name": "x2"}]}`),
			"read_item":  slow("content"),
		}
		eng := engine.New(&engine.Options{
			Backends:  map[string]engine.Backend{"local": {Backend: tools}},
			Policy:    &policy.Policy{Tools: map[string]policy.Tool{"read_item": {Allow: true}}},
			Predictor: online,
		})
		defer eng.Close()
		ctx := t.Context()
		if _, err := eng.Call(ctx, "agent", "list_items", json.RawMessage(`{"folder":"new"}`)); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"x1", "x2"} {
			time.Sleep(2 * time.Second) // the model thinks
			args := json.RawMessage(`{"name":"` + name + `"}`)
			// Counted before the agent asks: once x2's call is answered,
			// the pool's positional pattern read_item → read_item(name =
			// out(list_items)/items/1/name) names x2 again (p ≈ 0.16; only
			// list patterns skip calls made), so x2 may run once more,
			// before or after this goroutine looks (1 in ~600 runs under
			// -race on a loaded machine).
			mu.Lock()
			n := runs[string(args)]
			mu.Unlock()
			if n != 1 {
				t.Errorf("read_item %s ran %d times before the agent asked, want once (speculatively)", name, n)
			}
			res, err := eng.Call(ctx, "agent", "read_item", args)
			if err != nil {
				t.Fatal(err)
			}
			// Reused: the agent's call ran nothing itself.
			if res.Source != engine.Reused || res.Output != "content" {
				t.Errorf("read_item %s: source %s, output %q; want reused", name, res.Source, res.Output)
			}
		}
	})
}
