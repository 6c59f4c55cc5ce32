package fleet_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ahead-dev/ahead/backend"
	"github.com/ahead-dev/ahead/engine"
	"github.com/ahead-dev/ahead/fleet"
	"github.com/ahead-dev/ahead/policy"
	"github.com/ahead-dev/ahead/predict"
	"github.com/ahead-dev/ahead/sched"
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

// mutant removes one fleet rule, for the mutation check. sharedGet is
// not a mutation: it marks get shared (a pure function, results.go) and
// lets only replica 0 predict, so that the others' reads are served from
// the results it shares.
type mutant struct {
	*fleet.Fleet
	noAnnounce, noFence, noDone bool
	noPurge, noResultCheck      bool
	noPresence                  bool
	sharedGet                   bool
}

var sharedPolicy = &policy.Policy{
	Tools: map[string]policy.Tool{
		"get": {Allow: true, Reads: policy.Refs("key"), Shared: true},
		"put": {Writes: policy.Refs("key")},
	},
	Dedup: policy.Dedup{Strategy: policy.StrategyAll},
}

func (m mutant) Announce(ctx context.Context, b string, ef policy.Effect) error {
	if m.noAnnounce {
		return nil
	}
	return m.Fleet.Announce(ctx, b, ef)
}

func (m mutant) Completed(ctx context.Context, b string, ef policy.Effect) error {
	if m.noAnnounce || m.noDone {
		return nil
	}
	return m.Fleet.Completed(ctx, b, ef)
}

func (m mutant) Fence(ctx context.Context, b string) error {
	if m.noFence {
		return nil
	}
	return m.Fleet.Fence(ctx, b)
}

// replicas is a fleet of n engines over one store, each in a slot that a
// restart replaces.
type replicas struct {
	st     *store
	oracle *oracle
	url    string // the server the replicas join
	mut    mutant
	slots  []atomic.Pointer[replica]
	// announce is the replicas' AnnounceTimeout; 0 means 10 s. fence is
	// their FenceTimeout; 0 means 2 s.
	announce, fence time.Duration
	// writeOneIn: one step in writeOneIn is a write; 0 means 4.
	writeOneIn int
	// urls: replica i joins urls[i] when set (a proxy the test can cut),
	// not url.
	urls []string
	// heartbeat and presence are the replicas' HeartbeatInterval and
	// PresenceTTL; 0 means the defaults.
	heartbeat, presence time.Duration
	// mcpShaped: the store answers as an MCP upstream does (mcpStore),
	// and a read is fresh only if the result the agent receives in that
	// form holds the store's value.
	mcpShaped bool
}

type replica struct {
	f   *fleet.Fleet
	eng *engine.Engine
}

// startReplicas starts n replicas: on a server embedded in the first one,
// or on the server at url.
func startReplicas(t *testing.T, n int, mut mutant, url string) *replicas {
	t.Helper()
	r := newReplicas(t, n, mut, url)
	r.startAll(t)
	return r
}

// newReplicas makes n replicas' slots (the test's cleanup stops the
// replicas started in them), to be set up and started with startAll.
func newReplicas(t *testing.T, n int, mut mutant, url string) *replicas {
	t.Helper()
	r := &replicas{st: &store{vers: map[string]int{}}, oracle: &oracle{scripts: map[string][]op{}},
		url: url, mut: mut, slots: make([]atomic.Pointer[replica], n)}
	t.Cleanup(func() {
		for i := n - 1; i >= 0; i-- {
			if rp := r.slots[i].Load(); rp != nil {
				rp.eng.Close()
				rp.f.Close()
			}
		}
	})
	return r
}

// startAll starts every replica and waits until each is connected.
func (r *replicas) startAll(t *testing.T) {
	t.Helper()
	for i := range r.slots {
		r.start(t, i)
	}
	for i := range r.slots {
		waitConnected(t, r.slots[i].Load().f)
	}
}

// start starts replica i (again), and returns the one it replaced.
func (r *replicas) start(t *testing.T, i int) *replica {
	t.Helper()
	o := &fleet.Options{
		Name:     "test",
		Replica:  fmt.Sprint("r", i),
		Backends: []string{"store"},
		URL:      r.url,
		// Generous on a busy machine under -race: a fence that times
		// out (a miss) or a write announced late (stale elsewhere until
		// announced, as documented) is not what this test checks.
		FenceTimeout:      cmp.Or(r.fence, 2*time.Second),
		ShareResults:      r.mut.sharedGet,
		AnnounceTimeout:   cmp.Or(r.announce, 10*time.Second),
		Logger:            slog.New(slog.DiscardHandler),
		HeartbeatInterval: r.heartbeat,
		PresenceTTL:       r.presence,
	}
	if i < len(r.urls) && r.urls[i] != "" {
		o.URL = r.urls[i]
	}
	if o.URL == "" {
		o.Embedded = &fleet.Embedded{Listen: "127.0.0.1:0", Dir: t.TempDir()}
	}
	f, err := fleet.Join(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	if r.url == "" && o.Embedded != nil {
		r.url = f.URL()
	}
	m := r.mut
	m.Fleet = f
	if m.noPurge {
		fleet.SetNoPurge(f)
	}
	if m.noResultCheck {
		fleet.SetNoResultCheck(f)
	}
	if m.noPresence {
		fleet.SetNoPresence(f)
	}
	var be backend.Backend = r.st.backend()
	if r.mcpShaped {
		be = mcpStore{r.st.backend()}
	}
	eo := &engine.Options{
		Backends:  map[string]engine.Backend{"store": {Backend: be}},
		Policy:    testPolicy,
		Predictor: r.oracle,
		Fleet:     m,
	}
	if m.sharedGet {
		eo.Policy = sharedPolicy
		if i != 0 {
			eo.Predictor = nil
		}
	}
	eng := engine.New(eo)
	f.Start(eng)
	return r.slots[i].Swap(&replica{f: f, eng: eng})
}

// restart stops replica i (its calls in flight finish, new ones go to the
// new replica) and starts it again.
func (r *replicas) restart(t *testing.T, i int) {
	t.Helper()
	old := r.start(t, i)
	old.eng.Close()
	old.f.Close()
	waitConnected(t, r.slots[i].Load().f)
}

// call is an agent's call through replica i: one that reaches a replica
// as it stops, or still waits in its queue then (never run), is made again
// on its successor, as an agent reconnects.
func (r *replicas) call(ctx context.Context, i int, session, tool string, a json.RawMessage) (engine.Result, error) {
	for {
		res, err := r.slots[i].Load().eng.Call(ctx, session, tool, a)
		if !errors.Is(err, engine.ErrClosed) && !errors.Is(err, sched.ErrClosed) {
			return res, err
		}
	}
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
	slowest              time.Duration // the longest call
}

// run plays sessions (spread round-robin over the replicas) that read and
// write a few keys, and checks every read against the store at the moment
// the agent has it. Each key has a lock held across a call that uses it
// (shared by reads, exclusive for writes), so a read's fresh answer is
// exactly the store's value when it returns.
func (r *replicas) run(t *testing.T, sessions, steps, keys, parallel int, seed uint64, done *atomic.Int64) outcome {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	ids := make([]string, sessions)
	r.oracle.mu.Lock()
	for i := range sessions {
		ids[i] = fmt.Sprintf("s%d-%d", seed, i)
		sc := make([]op, steps)
		for j := range sc {
			sc[j] = op{write: rng.IntN(cmp.Or(r.writeOneIn, 4)) == 0, key: fmt.Sprint("k", rng.IntN(keys))}
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
				slot := i % len(r.slots)
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
					t0 := time.Now()
					res, err := r.call(t.Context(), slot, id, tool, args(o.key))
					took := time.Since(t0)
					want := "ok"
					if !o.write {
						want = r.st.value(o.key)
					}
					if r.mcpShaped && err == nil {
						// What the agent receives is the upstream's
						// result: its value, there.
						res.Output = valueOf(res.Raw)
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
					mu.Lock()
					out.slowest = max(out.slowest, took)
					mu.Unlock()
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
				r.slots[slot].Load().eng.EndSession(id)
				if done != nil {
					done.Add(1)
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

// differentialSessions overrides TestFleetDifferential's session count, for
// the 10,000-session run under the race detector that ./test.sh leaves out
// (4 to 5 min): go test -race ./fleet -run TestFleetDifferential$
// -fleet.sessions 10000.
var differentialSessions = flag.Int("fleet.sessions", 0, "sessions of TestFleetDifferential (0: 10,000, or 600 under -race or -short)")

// TestFleetDifferential: sessions over three replicas read and write the
// same keys; every read an agent receives equals the store's value at that
// moment, while many are reused; and removing either fleet rule makes stale
// reads appear.
func TestFleetDifferential(t *testing.T) {
	// 10,000 sessions (60,000 calls) took 85 s on 2 cores at a load of
	// 20; under the race detector 600 take 16 s there (10,000 would take
	// 4 to 5 min), so under it (./test.sh) the test checks 600.
	sessions, mutantSessions := 10000, 1000
	if raceEnabled || testing.Short() {
		sessions, mutantSessions = 600, 300
	}
	if *differentialSessions > 0 {
		sessions = *differentialSessions
	}
	r := startReplicas(t, 3, mutant{}, "")
	out := r.run(t, sessions, 6, 3, 24, 1, nil)
	t.Logf("%d sessions, %d calls: %d reused, %d stale; fleet stats %+v", sessions, out.calls, out.reused, out.stale, r.slots[1].Load().f.Stats())
	if out.stale != 0 {
		t.Errorf("%d stale reads, first: %s", out.stale, out.firstStale)
	}
	if out.reused < out.calls/10 {
		t.Errorf("only %d of %d calls reused: the test does not exercise fences", out.reused, out.calls)
	}
	var applied int64
	for i := range r.slots {
		applied += r.slots[i].Load().f.Stats().Applied
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
		{"no completion announcement", mutant{noDone: true}},
	} {
		t.Run(m.name, func(t *testing.T) {
			r := startReplicas(t, 3, m.mut, "")
			out := r.run(t, mutantSessions, 6, 3, 24, 2, nil)
			t.Logf("%d calls: %d reused, %d stale", out.calls, out.reused, out.stale)
			if out.stale == 0 {
				t.Errorf("removing %q left every read fresh: the differential test cannot see that rule", m.name)
			}
		})
	}
}

// TestFleetFaults: while sessions run over three replicas, the NATS server
// is stopped, stays down a second and comes back on its store, and later a
// replica is stopped and started again: every call is answered, none
// stale.
func TestFleetFaults(t *testing.T) {
	sessions := 1500
	if raceEnabled || testing.Short() {
		sessions = 400
	}
	ctx := t.Context()
	hostOpts := &fleet.Options{Name: "test", Replica: "host", Logger: slog.New(slog.DiscardHandler),
		Embedded: &fleet.Embedded{Listen: "127.0.0.1:0", Dir: t.TempDir()}}
	host, err := fleet.Join(ctx, hostOpts)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { host.Close() }()
	url := host.URL()
	hostOpts.Embedded.Listen = strings.TrimPrefix(url, "nats://")
	r := startReplicas(t, 3, mutant{}, url)
	// An announcement in flight when the server stops is never
	// acknowledged: it is announced late after this bound (the tests's
	// other replicas use a longer one).
	r.announce = time.Second
	for i := range r.slots {
		r.restart(t, i)
	}

	var done atomic.Int64
	var out outcome
	var wg sync.WaitGroup
	wg.Go(func() { out = r.run(t, sessions, 6, 3, 24, 3, &done) })
	waitDone := func(n int64) {
		for done.Load() < n {
			time.Sleep(time.Millisecond) // a point in the workload, not a synchronisation
		}
	}
	waitDone(int64(sessions / 4))
	host.Close()
	time.Sleep(time.Second) // the outage
	if host, err = fleet.Join(ctx, hostOpts); err != nil {
		t.Fatalf("restarting the server on its store: %v", err)
	}
	waitDone(int64(sessions / 2))
	r.restart(t, 1)
	wg.Wait()

	var st fleet.Stats
	for i := range r.slots {
		s := r.slots[i].Load().f.Stats()
		st.Late += s.Late
		st.FenceDown += s.FenceDown
		st.FenceAbsent += s.FenceAbsent
		st.Resyncs += s.Resyncs
	}
	t.Logf("%d sessions, %d calls: %d reused, %d stale; late %d, fences refused down %d absent %d, resyncs %d",
		sessions, out.calls, out.reused, out.stale, st.Late, st.FenceDown, st.FenceAbsent, st.Resyncs)
	if want := int64(sessions * 6); out.calls != want {
		t.Errorf("%d calls answered, want %d", out.calls, want)
	}
	if out.stale != 0 {
		t.Errorf("%d stale reads, first: %s", out.stale, out.firstStale)
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
