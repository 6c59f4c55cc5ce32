package fleet_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ahead-dev/ahead/backend"
	"github.com/ahead-dev/ahead/engine"
	"github.com/ahead-dev/ahead/fleet"
	"github.com/ahead-dev/ahead/policy"
	"github.com/ahead-dev/ahead/predict"
	"github.com/ahead-dev/ahead/trace"
)

var _ fleet.Applier = (*engine.Engine)(nil)
var _ engine.Fleet = (*fleet.Fleet)(nil)

// store is a backend whose state every replica shares: get returns a key's
// version, put bumps it.
type store struct {
	mu   sync.Mutex
	vers map[string]int
}

func (st *store) value(key string) string {
	st.mu.Lock()
	defer st.mu.Unlock()
	return key + "@" + strconv.Itoa(st.vers[key])
}

func (st *store) backend() backend.Funcs {
	arg := func(args json.RawMessage) string {
		var a struct{ Key string }
		json.Unmarshal(args, &a)
		return a.Key
	}
	return backend.Funcs{
		"get": func(_ context.Context, args json.RawMessage) (string, error) {
			return st.value(arg(args)), nil
		},
		"put": func(_ context.Context, args json.RawMessage) (string, error) {
			st.mu.Lock()
			defer st.mu.Unlock()
			k := arg(args)
			st.vers[k]++
			return "ok", nil
		},
	}
}

var testPolicy = &policy.Policy{
	Tools: map[string]policy.Tool{
		"get": {Allow: true, Reads: policy.Refs("key")},
		"put": {Writes: policy.Refs("key")},
	},
	Dedup: policy.Dedup{Strategy: policy.StrategyAll},
}

// op is one step of a session's script.
type op struct {
	write bool
	key   string
}

// oracle predicts each session's next step exactly, when it is a read: the
// speculation a good pool would make.
type oracle struct {
	mu      sync.Mutex
	scripts map[string][]op
}

func (o *oracle) Observe(ev trace.Event) []predict.Prediction {
	o.mu.Lock()
	defer o.mu.Unlock()
	sc := o.scripts[ev.Session]
	if ev.Seq+1 >= len(sc) || sc[ev.Seq+1].write {
		return nil
	}
	return []predict.Prediction{{Tool: "get", Args: args(sc[ev.Seq+1].key), P: 1, Repeat: true}}
}

func (o *oracle) Forget(string) {}

func args(key string) json.RawMessage { return json.RawMessage(`{"key":"` + key + `"}`) }

// mutant removes one fleet rule, for the mutation check.
type mutant struct {
	*fleet.Fleet
	noAnnounce, noFence bool
}

func (m mutant) Announce(ctx context.Context, b string, ef policy.Effect) error {
	if m.noAnnounce {
		return nil
	}
	return m.Fleet.Announce(ctx, b, ef)
}

func (m mutant) Fence(ctx context.Context, b string) error {
	if m.noFence {
		return nil
	}
	return m.Fleet.Fence(ctx, b)
}

// replicas is a fleet of n engines on one embedded server, over one store.
type replicas struct {
	st      *store
	fleets  []*fleet.Fleet
	engines []*engine.Engine
	oracle  *oracle
}

func startReplicas(t *testing.T, n int, mut mutant) *replicas {
	t.Helper()
	r := &replicas{st: &store{vers: map[string]int{}}, oracle: &oracle{scripts: map[string][]op{}}}
	ctx := t.Context()
	for i := range n {
		o := &fleet.Options{
			Name:     "test",
			Replica:  fmt.Sprint("r", i),
			Backends: []string{"store"},
			// Generous on a busy machine under -race: a fence that times
			// out (a miss) or a write announced late (stale elsewhere until
			// announced, as documented) is not what this test checks.
			FenceTimeout:    2 * time.Second,
			AnnounceTimeout: 10 * time.Second,
		}
		if i == 0 {
			o.Embedded = &fleet.Embedded{Listen: "127.0.0.1:0", Dir: t.TempDir()}
		} else {
			o.URL = r.fleets[0].URL()
		}
		f, err := fleet.Join(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		m := mut
		m.Fleet = f
		eng := engine.New(engine.Options{
			Backends:  map[string]engine.Backend{"store": {Backend: r.st.backend()}},
			Policy:    testPolicy,
			Predictor: r.oracle,
			Fleet:     m,
		})
		f.Start(eng)
		r.fleets = append(r.fleets, f)
		r.engines = append(r.engines, eng)
	}
	t.Cleanup(func() {
		for i := len(r.engines) - 1; i >= 0; i-- {
			r.engines[i].Close()
			r.fleets[i].Close()
		}
	})
	for _, f := range r.fleets {
		waitConnected(t, f)
	}
	return r
}

func waitConnected(t *testing.T, f *fleet.Fleet) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if err := f.Ready(ctx); err != nil {
		t.Fatalf("replica %s: %v", f.Replica(), err)
	}
}

// outcome is what a differential run saw.
type outcome struct {
	calls, reused, stale int64
	firstStale           string
}

// run plays sessions (spread round-robin over the replicas) that read and
// write a few keys, and checks every read against the store at the moment
// the agent has it. Each key has a lock held across a call that uses it
// (shared by reads, exclusive for writes), so a read's fresh answer is
// exactly the store's value when it returns.
func (r *replicas) run(t *testing.T, sessions, steps, keys, parallel int, seed uint64) outcome {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	ids := make([]string, sessions)
	r.oracle.mu.Lock()
	for i := range sessions {
		ids[i] = fmt.Sprintf("s%d-%d", seed, i)
		sc := make([]op, steps)
		for j := range sc {
			sc[j] = op{write: rng.IntN(4) == 0, key: fmt.Sprint("k", rng.IntN(keys))}
		}
		r.oracle.scripts[ids[i]] = sc
	}
	r.oracle.mu.Unlock()
	locks := make(map[string]*sync.RWMutex)
	for k := range keys {
		locks[fmt.Sprint("k", k)] = new(sync.RWMutex)
	}
	var out outcome
	var mu sync.Mutex
	var wg sync.WaitGroup
	work := make(chan int)
	for range parallel {
		wg.Go(func() {
			for i := range work {
				id := ids[i]
				eng := r.engines[i%len(r.engines)]
				r.oracle.mu.Lock()
				sc := r.oracle.scripts[id]
				r.oracle.mu.Unlock()
				for _, o := range sc {
					l := locks[o.key]
					tool := "get"
					if o.write {
						tool = "put"
						l.Lock()
					} else {
						l.RLock()
					}
					res, err := eng.Call(t.Context(), id, tool, args(o.key))
					want := "ok"
					if !o.write {
						want = r.st.value(o.key)
					}
					if o.write {
						l.Unlock()
					} else {
						l.RUnlock()
					}
					if err != nil {
						t.Errorf("session %s %s %s: %v", id, tool, o.key, err)
						return
					}
					atomic.AddInt64(&out.calls, 1)
					if res.Source == engine.Reused {
						atomic.AddInt64(&out.reused, 1)
					}
					if res.Output != want {
						atomic.AddInt64(&out.stale, 1)
						mu.Lock()
						if out.firstStale == "" {
							out.firstStale = fmt.Sprintf("session %s %s(%s) via %s: got %q, the store has %q", id, tool, o.key, res.Source, res.Output, want)
						}
						mu.Unlock()
					}
				}
				for _, e := range r.engines {
					e.EndSession(id)
				}
			}
		})
	}
	for i := range sessions {
		work <- i
	}
	close(work)
	wg.Wait()
	return out
}

// TestFleetDifferential: sessions over three replicas read and write the
// same keys; every read an agent receives equals the store's value at that
// moment, while many are reused; and removing either fleet rule makes stale
// reads appear.
func TestFleetDifferential(t *testing.T) {
	// 3,000 sessions (18,000 calls) take about 6 s on 2 idle cores; the
	// race detector makes that a minute, so it checks fewer.
	sessions, mutantSessions := 3000, 1000
	if raceEnabled || testing.Short() {
		sessions, mutantSessions = 600, 300
	}
	r := startReplicas(t, 3, mutant{})
	out := r.run(t, sessions, 6, 3, 24, 1)
	t.Logf("%d sessions, %d calls: %d reused, %d stale; fleet stats %+v", sessions, out.calls, out.reused, out.stale, r.fleets[1].Stats())
	if out.stale != 0 {
		t.Errorf("%d stale reads, first: %s", out.stale, out.firstStale)
	}
	if out.reused < out.calls/10 {
		t.Errorf("only %d of %d calls reused: the test does not exercise fences", out.reused, out.calls)
	}
	var applied int64
	for _, f := range r.fleets {
		applied += f.Stats().Applied
	}
	if applied == 0 {
		t.Error("no announcement applied")
	}

	for _, m := range []struct {
		name string
		mut  mutant
	}{
		{"no announce", mutant{noAnnounce: true}},
		{"no fence", mutant{noFence: true}},
	} {
		t.Run(m.name, func(t *testing.T) {
			r := startReplicas(t, 3, m.mut)
			out := r.run(t, mutantSessions, 6, 3, 24, 2)
			t.Logf("%d calls: %d reused, %d stale", out.calls, out.reused, out.stale)
			if out.stale == 0 {
				t.Errorf("removing %q left every read fresh: the differential test cannot see that rule", m.name)
			}
		})
	}
}

// TestFenceFailsClosed: with the server gone, a fence fails at once (or
// within its bound) and the engine serves calls without reuse; when the
// server is back on its store, replicas catch up and fences succeed again.
func TestFenceFailsClosed(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	srvOpts := &fleet.Options{Name: "t", Replica: "host", Embedded: &fleet.Embedded{Listen: "127.0.0.1:0", Dir: dir}}
	host, err := fleet.Join(ctx, srvOpts)
	if err != nil {
		t.Fatal(err)
	}
	url := host.URL()
	f, err := fleet.Join(ctx, &fleet.Options{Name: "t", Replica: "a", URL: url, Backends: []string{"store"}, FenceTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var applied []policy.Effect
	var mu sync.Mutex
	f.Start(applierFunc(func(b string, ef policy.Effect) {
		mu.Lock()
		applied = append(applied, ef)
		mu.Unlock()
	}))
	waitConnected(t, f)
	if err := f.Fence(ctx, "store"); err != nil {
		t.Fatalf("fence with the fleet up: %v", err)
	}
	host.Close() // the server stops
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := f.Fence(ctx, "store")
		if errors.Is(err, fleet.ErrDown) || errors.Is(err, fleet.ErrFenceTimeout) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("fences still succeed with the server gone: %v", err)
		}
		time.Sleep(time.Millisecond)
	}
	if err := f.Announce(ctx, "store", policy.Effect{Resources: []string{"k"}}); err == nil {
		t.Error("an announcement succeeded with the server gone")
	}
	if got := f.Stats().Late; got != 1 {
		t.Errorf("late announcements = %d, want 1", got)
	}
	// The server comes back on its store, at the same address.
	srvOpts.Embedded.Listen = url[len("nats://"):]
	host, err = fleet.Join(ctx, srvOpts)
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	waitConnected(t, f)
	if err := f.Fence(ctx, "store"); err != nil {
		t.Fatalf("fence after the server came back: %v", err)
	}
	for f.Stats().LateSent != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the late announcement was not sent")
		}
		time.Sleep(time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	// Resynced twice (start, reconnect), each dropping everything.
	if len(applied) < 2 || !applied[len(applied)-1].All {
		t.Errorf("applied %+v, want a drop of everything at each resync", applied)
	}
}

type applierFunc func(string, policy.Effect)

func (f applierFunc) Invalidate(b string, ef policy.Effect) { f(b, ef) }
