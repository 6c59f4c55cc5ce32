package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ahead-dev/ahead/backend"
	"github.com/ahead-dev/ahead/engine"
	"github.com/ahead-dev/ahead/policy"
	"github.com/ahead-dev/ahead/predict"
	"github.com/ahead-dev/ahead/sched"
	"github.com/ahead-dev/ahead/trace"
)

// store is an in-memory stateful backend: per-session key-value files.
// read {"path"} returns the file, write {"path","data"} replaces it, touch
// {} is an undeclared tool, list {} lists nothing in particular, with a side effect (it bumps a counter every read
// returns), fail always fails. Every execution is logged.
type store struct {
	d time.Duration
	// shared keeps one set of files for all sessions (a shared-state
	// backend); by default each session has its own.
	shared    bool
	mu        sync.Mutex
	cancelled int               // executions whose context was cancelled
	files     map[string]string // session/path → data
	bumps     map[string]int    // session (or "" if shared) → touch count
	execs     []exec
}

type exec struct {
	session, tool, args string
	speculative         bool
}

func newStore(d time.Duration) *store {
	return &store{d: d, files: map[string]string{}, bumps: map[string]int{}}
}

func (s *store) Call(ctx context.Context, req backend.Request) (backend.Response, error) {
	s.mu.Lock()
	s.execs = append(s.execs, exec{req.Session, req.Tool, string(req.Args), req.Speculative})
	s.mu.Unlock()
	select {
	case <-time.After(s.d):
	case <-ctx.Done():
		s.mu.Lock()
		s.cancelled++
		s.mu.Unlock()
		return backend.Response{}, ctx.Err()
	}
	var a struct{ Path, Data string }
	json.Unmarshal(req.Args, &a)
	s.mu.Lock()
	defer s.mu.Unlock()
	k := req.Session + "/" + a.Path
	bk := req.Session
	if s.shared {
		k, bk = a.Path, ""
	}
	switch req.Tool {
	case "read":
		return backend.Response{Output: fmt.Sprintf("%s=%q bumps=%d", a.Path, s.files[k], s.bumps[bk])}, nil
	case "write":
		s.files[k] = a.Data
		return backend.Response{Output: "ok"}, nil
	case "touch":
		s.bumps[bk]++
		return backend.Response{Output: "touched"}, nil
	case "fail":
		return backend.Response{Output: "no such thing", IsError: true}, nil
	case "list":
		return backend.Response{Output: "a b"}, nil
	}
	return backend.Response{}, fmt.Errorf("%w %q", backend.ErrUnknownTool, req.Tool)
}

func (s *store) speculative() []exec {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []exec
	for _, e := range s.execs {
		if e.speculative {
			out = append(out, e)
		}
	}
	return out
}

// predictAfter predicts the given calls after every event of tool "after".
func predictAfter(after string, preds ...predict.Prediction) predict.Func {
	return func(ev trace.Event) []predict.Prediction {
		if ev.Tool == after {
			return preds
		}
		return nil
	}
}

func read(path string, p float64) predict.Prediction {
	return predict.Prediction{Tool: "read", Args: json.RawMessage(fmt.Sprintf(`{"path":%q}`, path)), P: p}
}

var storePolicy = &policy.Policy{Tools: map[string]policy.Tool{
	"read":  {Allow: true, Reads: policy.Refs("path")},
	"write": {Writes: policy.Refs("path")},
	"fail":  {Allow: true},
	"list":  {Allow: true},
}}

type harness struct {
	t   *testing.T
	eng *engine.Engine
	st  *store
}

func newHarness(t *testing.T, opts engine.Options) *harness {
	st := newStore(time.Second)
	if opts.Backends == nil {
		opts.Backends = map[string]engine.Backend{"store": {Backend: st}}
	}
	if opts.Policy == nil {
		opts.Policy = storePolicy
	}
	h := &harness{t: t, eng: engine.New(&opts), st: st}
	t.Cleanup(h.eng.Close)
	return h
}

func (h *harness) call(session, tool, args string) engine.Result {
	h.t.Helper()
	res, err := h.eng.Call(h.t.Context(), session, tool, json.RawMessage(args))
	if err != nil {
		h.t.Fatalf("%s %s: %v", tool, args, err)
	}
	return res
}

func TestSessionIsolation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, engine.Options{Predictor: predictAfter("touch", read("a", 0.9))})
		h.call("s1", "touch", `{}`)
		time.Sleep(5 * time.Second)
		if res := h.call("s2", "read", `{"path":"a"}`); res.Source != engine.Executed {
			t.Errorf("s2 read served from %s: s1's speculation crossed sessions", res.Source)
		}
		if res := h.call("s1", "read", `{"path":"a"}`); res.Source != engine.Reused {
			t.Errorf("s1 read served from %s, want reused", res.Source)
		}
	})
}

func TestSharedToolCrossesSessions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pol := &policy.Policy{Tools: map[string]policy.Tool{
			"read": {Allow: true, Shared: true, TTL: 10 * time.Second},
		}}
		h := newHarness(t, engine.Options{Policy: pol, Predictor: predictAfter("touch", read("a", 0.9))})
		h.call("s1", "touch", `{}`)
		time.Sleep(2 * time.Second)
		for _, s := range []string{"s2", "s3"} {
			if res := h.call(s, "read", `{"path":"a"}`); res.Source != engine.Reused {
				t.Errorf("%s read of a shared tool served from %s, want reused", s, res.Source)
			}
		}
		time.Sleep(10 * time.Second)
		if res := h.call("s4", "read", `{"path":"a"}`); res.Source != engine.Executed {
			t.Errorf("read after the shared TTL served from %s, want executed", res.Source)
		}
	})
}

func TestHazards(t *testing.T) {
	for _, tc := range []struct {
		name     string
		write    string // the authoritative call between prediction and use: tool and args
		writeArg string
		want     map[string]engine.Source
	}{
		{"write to one file invalidates only its reads", "write", `{"path":"a","data":"new"}`,
			map[string]engine.Source{"a": engine.Executed, "b": engine.Reused}},
		{"undeclared tool invalidates everything", "touch", `{}`,
			map[string]engine.Source{"a": engine.Executed, "b": engine.Executed}},
		{"read-only call invalidates nothing", "read", `{"path":"c"}`,
			map[string]engine.Source{"a": engine.Reused, "b": engine.Reused}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				pol := *storePolicy
				pol.Dedup = policy.Dedup{Strategy: policy.StrategyAll}
				h := newHarness(t, engine.Options{Policy: &pol, Predictor: predictAfter("list", read("a", 0.9), read("b", 0.8))})
				h.call("s", "write", `{"path":"a","data":"old"}`)
				h.call("s", "list", `{}`)
				time.Sleep(3 * time.Second)
				h.call("s", tc.write, tc.writeArg)
				for _, f := range []string{"a", "b"} {
					res := h.call("s", "read", fmt.Sprintf(`{"path":%q}`, f))
					if res.Source != tc.want[f] {
						t.Errorf("read %s: %s, want %s", f, res.Source, tc.want[f])
					}
					if f == "a" && tc.write == "write" && res.Output != `a="new" bumps=0` {
						t.Errorf("read a after write = %q: stale result", res.Output)
					}
				}
			})
		})
	}
}

func TestWriteCancelsRunningRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, engine.Options{Predictor: predictAfter("list", read("a", 0.9))})
		h.call("s", "list", `{}`)
		time.Sleep(100 * time.Millisecond) // the speculative read is running
		h.call("s", "write", `{"path":"a","data":"x"}`)
		if res := h.call("s", "read", `{"path":"a"}`); res.Source != engine.Executed || res.Output != `a="x" bumps=0` {
			t.Errorf("read after write = %s %q, want executed with the new data", res.Source, res.Output)
		}
		if got := h.eng.Stats().Outcomes[engine.OutcomeInvalidated]; got != 1 {
			t.Errorf("invalidated = %d, want 1", got)
		}
	})
}

// TestTTL: a result is never claimed older than its TTL. One that expires
// while the agent still thinks about the call it was predicted for is run
// again (at most maxRefreshes times), so a write ahead never saw (here
// made on the store directly) between the runs reaches the agent.
func TestTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, engine.Options{DefaultTTL: 5 * time.Second, Predictor: predictAfter("list", read("a", 0.9))})
		h.call("s", "list", `{}`)
		time.Sleep(2 * time.Second) // done at 1 s, expires at 6 s
		h.st.mu.Lock()
		h.st.files["s/a"] = "unseen"
		h.st.mu.Unlock()
		time.Sleep(6 * time.Second) // run again at 6 s, done at 7 s
		res := h.call("s", "read", `{"path":"a"}`)
		if res.Source != engine.Reused || res.Output != `a="unseen" bumps=0` {
			t.Errorf("read after TTL: %s %q, want reused, the write ahead did not see included", res.Source, res.Output)
		}
		if got := h.eng.Stats().Outcomes[engine.OutcomeExpired]; got != 1 {
			t.Errorf("expired = %d, want 1", got)
		}
	})
}

// TestTTLRefresh: how often a prediction runs while its agent thinks a
// minute (the TTL 5 s): at most 1+maxRefreshes times in one think
// window; as often when it was predicted again after a later call; once
// when the agent made another call than the predicted one. The call that
// comes after the last run expired is executed.
func TestTTLRefresh(t *testing.T) {
	for _, tc := range []struct {
		name      string
		predicted string // the path of the predicted read
		then      string // a call made 2 s after the first, if any
		want      int    // speculative runs
	}{
		{"bounded", "a", "", 3},
		{"predicted again", "a", "list", 3},
		{"other call made", "b", "read", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t, engine.Options{DefaultTTL: 5 * time.Second, Predictor: predictAfter("list", read(tc.predicted, 0.9))})
				h.call("s", "list", `{}`)
				time.Sleep(2 * time.Second)
				switch tc.then {
				case "list":
					h.call("s", "list", `{}`) // predicts the read again
				case "read":
					h.call("s", "read", `{"path":"a"}`)
				}
				time.Sleep(time.Minute)
				if got := len(h.st.speculative()); got != tc.want {
					t.Errorf("speculative runs = %d, want %d", got, tc.want)
				}
				if got := h.eng.Stats().Outcomes[engine.OutcomeExpired]; int(got) != tc.want {
					t.Errorf("expired = %d, want %d", got, tc.want)
				}
				if tc.then == "" {
					if res := h.call("s", "read", `{"path":"a"}`); res.Source != engine.Executed {
						t.Errorf("read a minute later: %s, want executed", res.Source)
					}
				}
			})
		})
	}
}

func TestErrorResultNeverReused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, engine.Options{Predictor: predictAfter("list", predict.Prediction{Tool: "fail", Args: json.RawMessage(`{}`), P: 1})})
		h.call("s", "list", `{}`)
		time.Sleep(3 * time.Second)
		res := h.call("s", "fail", `{}`)
		if res.Source != engine.Executed || res.Status != trace.StatusError {
			t.Errorf("fail: %s %s, want executed error", res.Source, res.Status)
		}
	})
}

func TestPolicyDeniesSpeculation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, engine.Options{Predictor: predictAfter("list",
			predict.Prediction{Tool: "write", Args: json.RawMessage(`{"path":"a","data":"x"}`), P: 1},
			predict.Prediction{Tool: "touch", Args: json.RawMessage(`{}`), P: 1},
			predict.Prediction{Tool: "nosuchtool", Args: json.RawMessage(`{}`), P: 1},
		)})
		h.call("s", "list", `{}`)
		time.Sleep(3 * time.Second)
		if got := h.st.speculative(); len(got) != 0 {
			t.Errorf("speculatively executed %v; the policy allows none of them", got)
		}
	})
}

func TestInvalidCalls(t *testing.T) {
	h := newHarness(t, engine.Options{})
	for _, tc := range []struct {
		tool, args string
		want       error
	}{
		{"nosuch", `{}`, engine.ErrUnknownTool},
		{"read", `[1]`, engine.ErrInvalidArgs},
		{"read", `{"a":1,"a":2}`, engine.ErrInvalidArgs},
		{"read", `{"a":`, engine.ErrInvalidArgs},
	} {
		_, err := h.eng.Call(t.Context(), "s", tc.tool, json.RawMessage(tc.args))
		if !errors.Is(err, tc.want) {
			t.Errorf("Call(%s, %s) = %v, want %v", tc.tool, tc.args, err, tc.want)
		}
	}
}

func TestMemoryBounds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var preds []predict.Prediction
		for i := range 10 {
			preds = append(preds, read(fmt.Sprintf("f%d", i), 0.1+float64(i)/20))
		}
		pol := *storePolicy
		pol.Dedup = policy.Dedup{Strategy: policy.StrategyAll}
		h := newHarness(t, engine.Options{
			Policy: &pol, Predictor: predictAfter("list", preds...),
			MaxSessionEntries: 3, SpecBudget: 16,
			DefaultTTL: time.Minute, // the reads below take 7 s before the survivors are read
		})
		h.call("s", "list", `{}`)
		time.Sleep(3 * time.Second)
		if st := h.eng.Stats(); st.Entries > 3 {
			t.Errorf("%d entries, want at most 3", st.Entries)
		}
		// The three most probable survive.
		for i := range 10 {
			res := h.call("s", "read", fmt.Sprintf(`{"path":"f%d"}`, i))
			if want := i >= 7; (res.Source == engine.Reused) != want {
				t.Errorf("f%d (p=%.2f): %s", i, 0.1+float64(i)/20, res.Source)
			}
		}
	})
}

func TestByteBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pol := *storePolicy
		pol.Dedup = policy.Dedup{Strategy: policy.StrategyAll}
		h := newHarness(t, engine.Options{
			Policy: &pol, Predictor: predictAfter("list", read("a", 0.9), read("b", 0.5)),
			// Room for the session's own state (about 1.1 KB: its
			// overhead and the list call it was served) and one result
			// with its overhead (512 bytes).
			MaxBytes: 1700,
		})
		h.call("s", "list", `{}`)
		time.Sleep(3 * time.Second)
		if st := h.eng.Stats(); st.Bytes+st.SessionBytes > 1700 || st.Entries != 1 || st.Sessions != 1 {
			t.Errorf("bytes %d+%d entries %d sessions %d, want ≤ 1700, 1 and 1", st.Bytes, st.SessionBytes, st.Entries, st.Sessions)
		}
		if res := h.call("s", "read", `{"path":"a"}`); res.Source != engine.Reused {
			t.Errorf("the higher-utility result was evicted: %s", res.Source)
		}
	})
}

func TestIdleSessionDropped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var forgot []string
		var mu sync.Mutex
		pred := &forgetting{Func: predictAfter("list", read("a", 0.9)), forgot: func(s string) {
			mu.Lock()
			forgot = append(forgot, s)
			mu.Unlock()
		}}
		h := newHarness(t, engine.Options{Predictor: pred, IdleTimeout: time.Minute, DefaultTTL: time.Hour})
		h.call("s", "list", `{}`)
		time.Sleep(2 * time.Minute)
		if st := h.eng.Stats(); st.Sessions != 0 || st.Entries != 0 {
			t.Errorf("after idling: %d sessions, %d entries; want none", st.Sessions, st.Entries)
		}
		mu.Lock()
		defer mu.Unlock()
		if !slices.Equal(forgot, []string{"s"}) {
			t.Errorf("predictor forgot %v, want [s]", forgot)
		}
	})
}

type forgetting struct {
	predict.Func
	forgot func(string)
}

func (f *forgetting) Forget(s string) { f.forgot(s) }

func TestEndSessionCancelsWork(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, engine.Options{Predictor: predictAfter("list", read("a", 0.9))})
		h.call("s", "list", `{}`)
		time.Sleep(100 * time.Millisecond)
		h.eng.EndSession("s")
		synctest.Wait()
		st := h.eng.Stats()
		if st.Entries != 0 || st.Outcomes[engine.OutcomeCancelled] != 1 {
			t.Errorf("entries %d, cancelled %d; want 0 and 1", st.Entries, st.Outcomes[engine.OutcomeCancelled])
		}
	})
}

func TestDryRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pol := &policy.Policy{Tools: map[string]policy.Tool{
			"write": {Allow: true, MaxSpeculation: policy.LevelDryRun, Writes: policy.Refs("path"),
				DryRun: policy.DryRun{Tool: "read"}},
			"read": {Allow: true, Reads: policy.Refs("path")}, // the variant must be allowed and read-only
		}}
		pred := predictAfter("list", predict.Prediction{Tool: "write", Args: json.RawMessage(`{"path":"a","data":"x"}`), P: 0.9})
		h := newHarness(t, engine.Options{Policy: pol, Predictor: pred, Backends: nil})
		h.call("s", "list", `{}`)
		time.Sleep(3 * time.Second)
		spec := h.st.speculative()
		if len(spec) != 1 || spec[0].tool != "read" {
			t.Fatalf("speculative executions %v, want one dry run as read", spec)
		}
		if res := h.call("s", "write", `{"path":"a","data":"x"}`); res.Source != engine.Executed || res.Output != "ok" {
			t.Errorf("write: %s %q, want executed for real", res.Source, res.Output)
		}
	})
}

func TestDryRunWithoutVariantOnlyWarms(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// The PASTE paper's pip_install rule: dry_run with no declared
		// variant. Running the call would run its side effect; ahead only
		// warms the backend up.
		ws := &warmStore{store: newStore(time.Second)}
		pol := &policy.Policy{Tools: map[string]policy.Tool{
			"write": {Allow: true, MaxSpeculation: policy.LevelDryRun},
		}}
		pred := predictAfter("list", predict.Prediction{Tool: "write", Args: json.RawMessage(`{"path":"a"}`), P: 0.9})
		h := newHarness(t, engine.Options{Policy: pol, Predictor: pred,
			Backends: map[string]engine.Backend{"store": {Backend: ws}}})
		h.call("s", "list", `{}`)
		time.Sleep(3 * time.Second)
		if spec := ws.speculative(); len(spec) != 0 {
			t.Errorf("ran %v speculatively with no declared dry-run variant", spec)
		}
		ws.mu.Lock()
		defer ws.mu.Unlock()
		if !slices.Equal(ws.warmed, []string{"write"}) {
			t.Errorf("warmed %v, want [write]", ws.warmed)
		}
	})
}

type warmStore struct {
	*store
	mu     sync.Mutex
	warmed []string
}

func (w *warmStore) Warmup(ctx context.Context, req backend.Request) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.warmed = append(w.warmed, req.Tool)
	return nil
}

func TestWarmupForToolOnlyPredictions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ws := &warmStore{store: newStore(time.Second)}
		pol := &policy.Policy{Tools: map[string]policy.Tool{
			"read":  {Allow: true},
			"write": {Allow: true, MaxSpeculation: policy.LevelWarmup},
		}}
		pred := predictAfter("list",
			predict.Prediction{Tool: "read", P: 0.9},                                         // tool only
			predict.Prediction{Tool: "write", Args: json.RawMessage(`{"path":"a"}`), P: 0.9}, // warm-up level
		)
		h := newHarness(t, engine.Options{Policy: pol, Predictor: pred,
			Backends: map[string]engine.Backend{"store": {Backend: ws}}})
		h.call("s", "list", `{}`)
		h.call("s", "list", `{}`) // warm-ups are not repeated within the TTL
		synctest.Wait()
		ws.mu.Lock()
		got := sorted(ws.warmed)
		ws.mu.Unlock()
		if want := []string{"read", "write"}; !slices.Equal(got, want) {
			t.Errorf("warmed %v, want %v", got, want)
		}
		if spec := ws.speculative(); len(spec) != 0 {
			t.Errorf("warm-up ran tools: %v", spec)
		}
	})
}

func sorted(s []string) []string {
	slices.Sort(s)
	return s
}

func TestPreemptionKeepsAuthoritativeLatency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// One slot: a wrong speculative read occupies it when the real
		// call arrives.
		pol := *storePolicy
		h := newHarness(t, engine.Options{Policy: &pol, Predictor: predictAfter("list", read("wrong", 0.9))})
		h.eng.Close()
		st := newStore(time.Second)
		h.eng = engine.New(&engine.Options{
			Policy: &pol, Predictor: predictAfter("list", read("wrong", 0.9)),
			Backends: map[string]engine.Backend{"store": {Backend: st, Limits: sched.Limits{Slots: 1}}},
		})
		defer h.eng.Close()
		h.call("s", "list", `{}`)
		time.Sleep(200 * time.Millisecond)
		start := time.Now()
		h.call("s", "read", `{"path":"right"}`)
		if took := time.Since(start); took != time.Second {
			t.Errorf("authoritative read took %v, want 1s: speculation delayed it", took)
		}
		if got := h.eng.Stats().Outcomes[engine.OutcomePreempted]; got != 1 {
			t.Errorf("preempted = %d, want 1", got)
		}
	})
}

type memRecorder struct {
	mu  sync.Mutex
	evs []trace.Event
}

func (r *memRecorder) Record(ev trace.Event) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.evs = append(r.evs, ev)
	return nil
}

func TestRecording(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &memRecorder{}
		h := newHarness(t, engine.Options{Recorder: rec, Predictor: predictAfter("list", read("a", 0.9), read("zz", 0.5))})
		h.call("s", "list", `{}`)
		time.Sleep(2500 * time.Millisecond)
		h.call("s", "read", `{"path":"a"}`)
		h.eng.Close()
		rec.mu.Lock()
		defer rec.mu.Unlock()
		type row struct {
			seq       int
			tool, src string
			spec      bool
			outcome   string
			llm, dur  float64
		}
		var got []row
		for _, ev := range rec.evs {
			r := row{seq: ev.Seq, tool: ev.Tool, src: ev.Source, spec: ev.Speculative, outcome: ev.Outcome}
			if ev.LLMMS != nil {
				r.llm = *ev.LLMMS
			}
			if ev.DurationMS != nil {
				r.dur = *ev.DurationMS
			}
			got = append(got, r)
		}
		want := []row{
			{seq: 0, tool: "list", src: "executed", dur: 1000},
			{seq: 1, tool: "read", spec: true, outcome: "reused", dur: 1000},
			{seq: 1, tool: "read", src: "reused", llm: 2500, dur: 1000},
			{seq: 1, tool: "read", spec: true, outcome: "cancelled", dur: 1000},
		}
		// The wrong prediction ran too (the default dedup keeps up to
		// eight per tool); its record comes at Close.
		if !slices.Equal(got, want) {
			t.Errorf("records:\n got %+v\nwant %+v", got, want)
		}
	})
}

func TestQuiesce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, engine.Options{Predictor: predictAfter("list", read("a", 0.9))})
		h.call("s", "list", `{}`)
		time.Sleep(100 * time.Millisecond) // the speculative read is running
		h.eng.Quiesce()
		synctest.Wait()
		if st := h.eng.Stats(); st.Entries != 0 || st.Outcomes[engine.OutcomeCancelled] != 1 {
			t.Errorf("after Quiesce: %d entries, %d cancelled; want 0 and 1", st.Entries, st.Outcomes[engine.OutcomeCancelled])
		}
		h.call("s", "list", `{}`) // still served, but starts nothing
		time.Sleep(3 * time.Second)
		if res := h.call("s", "read", `{"path":"a"}`); res.Source != engine.Executed {
			t.Errorf("read after Quiesce: %s, want executed", res.Source)
		}
		if n := len(h.st.speculative()); n != 1 {
			t.Errorf("%d speculative executions, want only the one before Quiesce", n)
		}
	})
}

func TestAmbiguousFallbackRoutesNothing(t *testing.T) {
	eng := engine.New(&engine.Options{Backends: map[string]engine.Backend{
		"x": {Backend: newStore(0)}, "y": {Backend: newStore(0)}, "z": {Backend: newStore(0), Tools: []string{"read"}},
	}})
	defer eng.Close()
	if _, err := eng.Call(t.Context(), "s", "list", nil); !errors.Is(err, engine.ErrUnknownTool) {
		t.Errorf("unlisted tool with two catch-all backends: %v, want ErrUnknownTool", err)
	}
	if _, err := eng.Call(t.Context(), "s", "read", json.RawMessage(`{"path":"a"}`)); err != nil {
		t.Errorf("listed tool: %v", err)
	}
}

func TestNoSpeculationOfACallInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Two calls of one step: list (0 to 1 s) and read a (0.5 to
		// 1.5 s). list's result predicts read a, which is in flight: it
		// must not run a second time.
		h := newHarness(t, engine.Options{Predictor: predictAfter("list", read("a", 0.9))})
		done := make(chan struct{})
		go func() {
			defer close(done)
			time.Sleep(500 * time.Millisecond)
			h.call("s", "read", `{"path":"a"}`)
		}()
		h.call("s", "list", `{}`)
		<-done
		synctest.Wait()
		if spec := h.st.speculative(); len(spec) != 0 {
			t.Errorf("speculated %v while the same call was in flight", spec)
		}
	})
}

type starter struct {
	predict.Func
	first []predict.Prediction
}

func (s starter) Start(string) []predict.Prediction { return s.first }

func TestBeginSpeculatesTheFirstCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, engine.Options{Predictor: starter{first: []predict.Prediction{read("a", 0.9)}}})
		h.eng.Begin("s")
		h.eng.Begin("s") // once only
		time.Sleep(2 * time.Second)
		if res := h.call("s", "read", `{"path":"a"}`); res.Source != engine.Reused {
			t.Errorf("first call after Begin: %s, want reused", res.Source)
		}
		h.eng.Begin("s") // after calls: nothing
		synctest.Wait()
		if n := len(h.st.speculative()); n != 1 {
			t.Errorf("%d speculative executions, want 1", n)
		}
	})
}

func TestSetPolicy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, engine.Options{Predictor: predictAfter("list", read("a", 0.9))})
		h.call("s", "list", `{}`)
		time.Sleep(100 * time.Millisecond) // the speculative read is running
		// read is no longer allowed: its running speculation is
		// cancelled and none starts.
		h.eng.SetPolicy(&policy.Policy{Tools: map[string]policy.Tool{"list": {Allow: true}}})
		synctest.Wait()
		if st := h.eng.Stats(); st.Entries != 0 || st.Outcomes[engine.OutcomeCancelled] != 1 {
			t.Errorf("after SetPolicy: %d entries, %d cancelled; want 0 and 1", st.Entries, st.Outcomes[engine.OutcomeCancelled])
		}
		h.call("s", "list", `{}`)
		time.Sleep(3 * time.Second)
		if n := len(h.st.speculative()); n != 1 {
			t.Errorf("%d speculative executions, want only the one before SetPolicy", n)
		}
		// Allowed again: speculation resumes.
		h.eng.SetPolicy(storePolicy)
		h.call("s", "list", `{}`)
		time.Sleep(3 * time.Second)
		if res := h.call("s", "read", `{"path":"a"}`); res.Source != engine.Reused {
			t.Errorf("read after the policy allowed it again: %s, want reused", res.Source)
		}
	})
}

// TestAmplificationBudget checks that speculation never outruns its budget
// (executions per authoritative call, plus what can be saved up), and that
// what a scarce budget declines is the least likely work, wherever it comes
// from: calls alternately predict unlikely and likely guesses, and the
// unlikely ones must not starve the likely ones.
func TestAmplificationBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		runs := map[string]int{}
		echo := func(name string) backend.Func {
			return func(ctx context.Context, args json.RawMessage) (string, error) {
				mu.Lock()
				runs[name+string(args)]++
				mu.Unlock()
				time.Sleep(100 * time.Millisecond)
				return name, nil
			}
		}
		// Guesses that are never made: after an even call four unlikely
		// ones, after an odd call two likely ones.
		wrong := predict.Func(func(ev trace.Event) []predict.Prediction {
			n, p, kind := 4, 0.03, "unlikely"
			if ev.Seq%2 == 1 {
				n, p, kind = 2, 0.9, "likely"
			}
			var ps []predict.Prediction
			for i := range n {
				ps = append(ps, predict.Prediction{Tool: "read", Args: json.RawMessage(fmt.Sprintf(`{"path":"%s-%d-%d"}`, kind, ev.Seq, i)), P: p})
			}
			return ps
		})
		pol := readsPolicy()
		pol.Dedup.Strategy, pol.Dedup.MaxPerTool = policy.StrategyAll, 0
		eng := engine.New(&engine.Options{
			Backends:           map[string]engine.Backend{"b": {Backend: backend.Funcs{"list": echo("list"), "read": echo("read")}}},
			Policy:             pol,
			Predictor:          wrong,
			Amplification:      1,
			AmplificationBurst: 4,
		})
		defer eng.Close()
		const calls = 40
		for i := range calls {
			if _, err := eng.Call(t.Context(), "s", "list", json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Second) // think: every guess runs and ends unclaimed
		}
		st := eng.Stats()
		if max := int64(calls + 4); st.SpecStarted > max {
			t.Errorf("%d speculative executions for %d calls, want at most %d", st.SpecStarted, calls, max)
		}
		if st.Declined == 0 {
			t.Error("nothing declined")
		}
		mu.Lock()
		defer mu.Unlock()
		likely := 0
		for k, n := range runs {
			if strings.Contains(k, "likely") && !strings.Contains(k, "unlikely") {
				likely += n
			}
		}
		// 20 odd calls predict 40 likely guesses; the budget affords about
		// 40 executions in all.
		if likely < 36 {
			t.Errorf("%d likely guesses ran of %d executions (want at least 36 of the 40)", likely, st.SpecStarted)
		}
	})
}

// direct returns what the store answers now, bypassing the engine: the
// result an agent without ahead would get.
func (h *harness) direct(session, tool, args string) string {
	h.t.Helper()
	d := h.st.d
	h.st.d = 0
	defer func() { h.st.d = d }()
	res, err := h.st.Call(h.t.Context(), backend.Request{Session: session, Tool: tool, Args: json.RawMessage(args)})
	if err != nil {
		h.t.Fatal(err)
	}
	return res.Output
}
