package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
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

// kv is a stateful backend whose every answer depends on the session's
// state, so a stale or foreign result shows up as a difference:
//
//	get {key}        read; returns the value and the session's version
//	scan {}          read of everything
//	put {key, val}   write of one key
//	bump {}          undeclared side effect: bumps the version
//	drop {key}       write the policy does not allow to speculate
//
// Latency is drawn from the call (session, tool, args), the same with and
// without speculation.
type kv struct {
	mu    sync.Mutex
	state map[string]map[string]string // session → key → value
	ver   map[string]int
	specs []backend.Request // speculative executions
}

func newKV() *kv { return &kv{state: map[string]map[string]string{}, ver: map[string]int{}} }

func (k *kv) Call(ctx context.Context, req backend.Request) (backend.Response, error) {
	if req.Speculative {
		k.mu.Lock()
		k.specs = append(k.specs, req)
		k.mu.Unlock()
	}
	h := fnv.New64a()
	fmt.Fprint(h, req.Session, req.Tool, string(req.Args))
	d := time.Duration(50+h.Sum64()%1500) * time.Millisecond
	// Read the state at the start and apply writes at the end, like a
	// real store with latency on both sides: a read racing a write sees
	// the old value.
	var a struct{ Key, Val string }
	json.Unmarshal(req.Args, &a)
	k.mu.Lock()
	m := k.state[req.Session]
	if m == nil {
		m = map[string]string{}
		k.state[req.Session] = m
	}
	var out string
	switch req.Tool {
	case "get":
		out = fmt.Sprintf("%s: %s=%q v%d", req.Session, a.Key, m[a.Key], k.ver[req.Session])
	case "scan":
		keys := slices.Sorted(func(yield func(string) bool) {
			for key := range m {
				if !yield(key + "=" + m[key]) {
					return
				}
			}
		})
		out = fmt.Sprintf("%s: [%s] v%d", req.Session, strings.Join(keys, " "), k.ver[req.Session])
	}
	k.mu.Unlock()
	select {
	case <-time.After(d):
	case <-ctx.Done():
		return backend.Response{}, ctx.Err()
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	switch req.Tool {
	case "put":
		m[a.Key] = a.Val
		out = "ok"
	case "bump":
		k.ver[req.Session]++
		out = "bumped"
	case "drop":
		delete(m, a.Key)
		out = "dropped"
	case "get", "scan":
	default:
		return backend.Response{}, fmt.Errorf("%w %q", backend.ErrUnknownTool, req.Tool)
	}
	return backend.Response{Output: out}, nil
}

type step struct{ tool, args string }

// script draws a random session: mostly reads of a few keys, some writes.
func script(r *rand.Rand, n int) []step {
	var s []step
	for range n {
		key := fmt.Sprintf("k%d", r.IntN(4))
		switch x := r.IntN(20); {
		case x < 9:
			s = append(s, step{"get", fmt.Sprintf(`{"key":%q}`, key)})
		case x < 12:
			s = append(s, step{"scan", `{}`})
		case x < 16:
			s = append(s, step{"put", fmt.Sprintf(`{"key":%q,"val":"%d"}`, key, r.IntN(3))})
		case x < 18:
			s = append(s, step{"bump", `{}`})
		default:
			s = append(s, step{"drop", fmt.Sprintf(`{"key":%q}`, key)})
		}
	}
	return s
}

// randomPredictor knows each session's script and predicts its next call
// half of the time, mixed with random (mostly wrong) calls of any tool,
// including tools the policy forbids.
type randomPredictor struct {
	mu      sync.Mutex
	r       *rand.Rand
	scripts map[string][]step
}

func (p *randomPredictor) Observe(ev trace.Event) []predict.Prediction {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []predict.Prediction
	if s := p.scripts[ev.Session]; ev.Seq+1 < len(s) && p.r.IntN(2) == 0 {
		next := s[ev.Seq+1]
		out = append(out, predict.Prediction{Tool: next.tool, Args: json.RawMessage(next.args), P: p.r.Float64()})
	}
	for range p.r.IntN(4) {
		w := script(p.r, 1)[0]
		out = append(out, predict.Prediction{Tool: w.tool, Args: json.RawMessage(w.args), P: p.r.Float64()})
	}
	p.r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

func (p *randomPredictor) Forget(string) {}

var kvPolicy = &policy.Policy{
	Tools: map[string]policy.Tool{
		"get":  {Allow: true, Reads: policy.Refs("key")},
		"scan": {Allow: true},
		"put":  {Writes: policy.Refs("key")},
	},
	Dedup: policy.Dedup{Strategy: policy.StrategyAll},
}

// runSessions replays the scripts through an engine and returns each
// session's authoritative outputs in order.
func runSessions(t *testing.T, scripts map[string][]step, pred engine.Predictor, k *kv, seed uint64) (map[string][]string, engine.Stats) {
	eng := engine.New(engine.Options{
		Backends:   map[string]engine.Backend{"kv": {Backend: k, Limits: sched.Limits{Slots: 3}}},
		Policy:     kvPolicy,
		Predictor:  pred,
		SpecBudget: 4,
		DefaultTTL: 5 * time.Second,
	})
	defer eng.Close()
	var mu sync.Mutex
	out := make(map[string][]string)
	var wg sync.WaitGroup
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range scripts {
			if !yield(n) {
				return
			}
		}
	})
	// At most 5 sessions at once on 3 slots: sometimes slack, sometimes
	// saturated (preemption).
	live := make(chan struct{}, 5)
	for i, name := range names {
		live <- struct{}{}
		wg.Go(func() {
			defer func() { <-live }()
			r := rand.New(rand.NewPCG(seed, uint64(i)))
			time.Sleep(time.Duration(r.IntN(2000)) * time.Millisecond) // staggered arrivals
			var got []string
			for _, st := range scripts[name] {
				time.Sleep(time.Duration(r.IntN(3000)) * time.Millisecond) // think
				res, err := eng.Call(t.Context(), name, st.tool, json.RawMessage(st.args))
				if err != nil {
					t.Errorf("%s %s%s: %v", name, st.tool, st.args, err)
					return
				}
				got = append(got, string(res.Status)+" "+res.Output)
			}
			mu.Lock()
			out[name] = got
			mu.Unlock()
		})
	}
	wg.Wait()
	return out, eng.Stats()
}

// TestLosslessDifferential checks the lossless promise on thousands of
// random sessions against a stateful backend with a random, often wrong
// predictor: the authoritative results with speculation equal those
// without, forbidden tools never run speculatively, and no result crosses
// sessions.
func TestLosslessDifferential(t *testing.T) {
	const sessions, calls = 1500, 12
	for _, seed := range []uint64{1, 2} {
		synctest.Test(t, func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 0))
			scripts := make(map[string][]step)
			for i := range sessions {
				scripts[fmt.Sprintf("s%04d", i)] = script(r, calls)
			}
			off, _ := runSessions(t, scripts, nil, newKV(), seed)
			k := newKV()
			pred := &randomPredictor{r: rand.New(rand.NewPCG(seed, 1)), scripts: scripts}
			on, st := runSessions(t, scripts, pred, k, seed)

			mismatches := 0
			for name, want := range off {
				if got := on[name]; !slices.Equal(got, want) {
					if mismatches++; mismatches <= 3 {
						t.Errorf("session %s differs with speculation:\n got %q\nwant %q", name, got, want)
					}
				}
				for _, res := range on[name] {
					if strings.Contains(res, ": ") && !strings.Contains(res, name+": ") {
						t.Errorf("session %s got another session's result %q", name, res)
					}
				}
			}
			if mismatches > 0 {
				t.Errorf("%d of %d sessions differ", mismatches, len(off))
			}
			for _, req := range k.specs {
				if rule := kvPolicy.Lookup(req.Tool); rule.Level() == policy.LevelNone {
					t.Errorf("tool %s ran speculatively; the policy forbids it", req.Tool)
				}
			}
			// The test must exercise what it guards.
			if st.Reused+st.Promoted < sessions || st.Outcomes[engine.OutcomeInvalidated] == 0 || st.Outcomes[engine.OutcomePreempted] == 0 {
				t.Errorf("too little speculation to prove anything: %+v", st.Totals)
			}
			t.Logf("seed %d: %d calls, %d reused, %d promoted, %d speculative runs, outcomes %v",
				seed, st.Calls, st.Reused, st.Promoted, st.SpecStarted, st.Outcomes)
		})
	}
}
