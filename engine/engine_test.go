package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ahead-dev/ahead/backend"
	"github.com/ahead-dev/ahead/engine"
	"github.com/ahead-dev/ahead/policy"
	"github.com/ahead-dev/ahead/predict"
	"github.com/ahead-dev/ahead/trace"
)

// slowTools is an in-process backend whose tools take d and echo their
// arguments; it counts executions per call key.
func slowTools(d time.Duration, runs map[string]int) backend.Funcs {
	echo := func(name string) backend.Func {
		return func(ctx context.Context, args json.RawMessage) (string, error) {
			runs[name+string(args)]++
			select {
			case <-time.After(d):
				return fmt.Sprintf("%s%s", name, args), nil
			case <-ctx.Done():
				return "", ctx.Err()
			}
		}
	}
	return backend.Funcs{"list": echo("list"), "read": echo("read"), "write": echo("write")}
}

// next predicts read{"path":"a"} after list, with p = 0.9.
var next = predict.Func(func(ev trace.Event) []predict.Prediction {
	if ev.Tool == "list" {
		return []predict.Prediction{{Tool: "read", Args: json.RawMessage(`{"path": "a"}`), P: 0.9}}
	}
	return nil
})

func readsPolicy() *policy.Policy {
	return &policy.Policy{Tools: map[string]policy.Tool{
		"list": {Allow: true}, "read": {Allow: true, Reads: policy.Refs("path")},
	}}
}

func TestReuseAndPromotion(t *testing.T) {
	for _, tc := range []struct {
		name  string
		think time.Duration
		want  engine.Source
		saved time.Duration
	}{
		{"reused after think longer than tool", 2 * time.Second, engine.Reused, time.Second},
		{"promoted while running", 400 * time.Millisecond, engine.Promoted, 400 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				runs := map[string]int{}
				eng := engine.New(&engine.Options{
					Backends:  map[string]engine.Backend{"b": {Backend: slowTools(time.Second, runs)}},
					Policy:    readsPolicy(),
					Predictor: next,
				})
				defer eng.Close()
				ctx := t.Context()
				if _, err := eng.Call(ctx, "s1", "list", json.RawMessage(`{}`)); err != nil {
					t.Fatal(err)
				}
				time.Sleep(tc.think)
				start := time.Now()
				res, err := eng.Call(ctx, "s1", "read", json.RawMessage(`{"path":"a"}`))
				if err != nil {
					t.Fatal(err)
				}
				if res.Source != tc.want || res.Saved != tc.saved {
					t.Errorf("source, saved = %s, %v; want %s, %v", res.Source, res.Saved, tc.want, tc.saved)
				}
				if got, want := res.Output, `read{"path":"a"}`; got != want {
					t.Errorf("output = %q, want %q", got, want)
				}
				if waited, want := time.Since(start), time.Second-tc.saved; waited != want {
					t.Errorf("waited %v, want %v", waited, want)
				}
				if n := runs[`read{"path":"a"}`]; n != 1 {
					t.Errorf("read ran %d times, want 1", n)
				}
				// The origin is credited with what the call saved, not
				// with the whole run (a promoted call waited the rest).
				st := eng.Stats()
				if got := st.Origins[predict.OriginPattern].Saved; got != tc.saved || st.Saved != tc.saved {
					t.Errorf("saved %v, by the pattern origin %v; want %v", st.Saved, got, tc.saved)
				}
			})
		})
	}
}
