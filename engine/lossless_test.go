package engine_test

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"math/rand/v2"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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

// kv is a key-value store whose state all sessions share. Every write
// commits at the end of the call with a new version from one clock, and
// every read reports the version of each value it read and the epoch, so a
// stale answer differs from every fresh one:
//
//	get {key}            "e<epoch> key=val@ver"; keys are paths (kvKey)
//	mget {keys}          the same for several keys
//	scan {}              every key (a read that names no resource)
//	peek {key}           get, shared across sessions
//	slow {key}           get that takes long and cannot be cancelled
//	feed {key}           a feed only written by others, behind ahead's back
//	put {key, val}       write of one key: "ok @ver"
//	move {src, dst}      write of two keys (src emptied): "ok @ver"
//	bump {}              write the policy does not describe: "e<epoch>"
//	drop {key}           write the policy does not allow to speculate
//
// Reads see the state as it is when they start and writes change it when
// they end, like a store with latency on both sides. Latency is drawn from
// the call, the same with and without speculation.
type kv struct {
	mu        sync.Mutex
	clock     int
	epoch     int
	cancelled int                  // executions of slow (cancellable: false) cancelled
	vals      map[string]versioned // key or feed → value
	specs     []backend.Request    // speculative executions
}

type versioned struct {
	val string
	ver int
}

func newKV() *kv { return &kv{vals: map[string]versioned{}} }

// kvRoot is where the store's relative keys lie, and kvLink a folder that
// links to d: "d/k1", "/root/d/k1", "l/k1" and "/root/l/k1" are one key
// (issue 23), as a file system would see them.
const kvRoot, kvLink = "/root", "l"

// kvKey returns the key a path names.
func kvKey(k string) string {
	k = path.Clean(k)
	if r, ok := strings.CutPrefix(k, kvRoot+"/"); ok {
		k = r
	}
	if k == kvLink || strings.HasPrefix(k, kvLink+"/") {
		k = "d" + k[len(kvLink):]
	}
	return k
}

func latency(req backend.Request, lo, spread int) time.Duration {
	h := fnv.New64a()
	fmt.Fprint(h, req.Session, req.Tool, string(req.Args))
	return time.Duration(lo+int(h.Sum64()%uint64(spread))) * time.Millisecond
}

type kvArgs struct {
	Key, Val, Src, Dst string
	Keys               []string
}

func (k *kv) Call(ctx context.Context, req backend.Request) (backend.Response, error) {
	var a kvArgs
	json.Unmarshal(req.Args, &a)
	d := latency(req, 50, 1500)
	k.mu.Lock()
	if req.Speculative {
		k.specs = append(k.specs, req)
	}
	var out string
	show := func(keys ...string) string {
		s := fmt.Sprintf("e%d", k.epoch)
		for _, key := range keys {
			key = kvKey(key)
			s += fmt.Sprintf(" %s=%s@%d", key, k.vals[key].val, k.vals[key].ver)
		}
		return s
	}
	switch req.Tool {
	case "get", "peek", "feed":
		out = show(a.Key)
	case "slow":
		out = show(a.Key)
		d = latency(req, 1500, 2500)
	case "mget":
		out = show(a.Keys...)
	case "scan":
		out = show(slices.Sorted(func(yield func(string) bool) {
			for key := range k.vals {
				if strings.HasPrefix(key, "d/") && !yield(key) {
					return
				}
			}
		})...)
	}
	k.mu.Unlock()
	select {
	case <-time.After(d):
	case <-ctx.Done():
		if req.Tool == "slow" {
			k.mu.Lock()
			k.cancelled++
			k.mu.Unlock()
		}
		return backend.Response{}, ctx.Err()
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	switch req.Tool {
	case "put", "move", "drop":
		k.clock++
		switch req.Tool {
		case "put":
			k.vals[kvKey(a.Key)] = versioned{a.Val, k.clock}
		case "move":
			src, dst := kvKey(a.Src), kvKey(a.Dst)
			v := k.vals[src].val
			k.vals[src] = versioned{"", k.clock}
			k.vals[dst] = versioned{v, k.clock}
		case "drop":
			k.vals[kvKey(a.Key)] = versioned{"", k.clock}
		}
		out = fmt.Sprintf("ok @%d", k.clock)
	case "bump":
		k.epoch++
		out = fmt.Sprintf("e%d", k.epoch)
	case "get", "peek", "feed", "slow", "mget", "scan":
	default:
		return backend.Response{}, fmt.Errorf("%w %q", backend.ErrUnknownTool, req.Tool)
	}
	return backend.Response{Output: out}, nil
}

// external writes a feed behind ahead's back, at once, and returns its
// version.
func (k *kv) external(key string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.clock++
	k.vals[key] = versioned{strconv.Itoa(k.clock), k.clock}
}

// feeds returns the versions of the feeds now.
func (k *kv) feeds() map[string]int {
	k.mu.Lock()
	defer k.mu.Unlock()
	m := make(map[string]int)
	for key, v := range k.vals {
		if strings.HasPrefix(key, "f") {
			m[key] = v.ver
		}
	}
	return m
}

// notes is a store whose state is per session (engine.Backend.PerSession):
// nget {key} answers "<session> key=val@ver", nput {key, val} writes.
type notes struct {
	mu    sync.Mutex
	clock map[string]int
	vals  map[string]versioned // session/key → value
}

func (n *notes) Call(ctx context.Context, req backend.Request) (backend.Response, error) {
	var a kvArgs
	json.Unmarshal(req.Args, &a)
	k := req.Session + "/" + a.Key
	n.mu.Lock()
	out := fmt.Sprintf("%s: %s=%s@%d", req.Session, a.Key, n.vals[k].val, n.vals[k].ver)
	n.mu.Unlock()
	select {
	case <-time.After(latency(req, 50, 1000)):
	case <-ctx.Done():
		return backend.Response{}, ctx.Err()
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	switch req.Tool {
	case "nput":
		n.clock[req.Session]++
		n.vals[k] = versioned{a.Val, n.clock[req.Session]}
		out = fmt.Sprintf("ok @%d", n.clock[req.Session])
	case "nget":
	default:
		return backend.Response{}, fmt.Errorf("%w %q", backend.ErrUnknownTool, req.Tool)
	}
	return backend.Response{Output: out}, nil
}

type call struct{ tool, args string }

// spellings of the shared keys: one resource each, spelled several ways:
// cleaned or not, absolute under the store's root, through the link.
var spellings = []string{"d/k%d", "./d/k%d", "d//k%d", "d/k%d/", kvRoot + "/d/k%d", kvLink + "/k%d", kvRoot + "/" + kvLink + "//k%d"}

// randomCall draws one call: mostly reads, many writes.
func randomCall(r *rand.Rand) call {
	key := func() string { return fmt.Sprintf(spellings[r.IntN(len(spellings))], r.IntN(4)) }
	switch x := r.IntN(26); {
	case x < 6:
		return call{"get", fmt.Sprintf(`{"key":%q}`, key())}
	case x < 8:
		return call{"mget", fmt.Sprintf(`{"keys":[%q,%q]}`, key(), key())}
	case x < 10:
		return call{"scan", `{}`}
	case x < 12:
		return call{"peek", fmt.Sprintf(`{"key":%q}`, key())}
	case x < 13:
		return call{"slow", fmt.Sprintf(`{"key":%q}`, key())}
	case x < 15:
		return call{"feed", fmt.Sprintf(`{"key":"f%d"}`, r.IntN(2))}
	case x < 18:
		return call{"put", fmt.Sprintf(`{"key":%q,"val":"%d"}`, key(), r.IntN(3))}
	case x < 19:
		return call{"move", fmt.Sprintf(`{"src":%q,"dst":%q}`, key(), key())}
	case x < 20:
		return call{"bump", `{}`}
	case x < 21:
		return call{"drop", fmt.Sprintf(`{"key":%q}`, key())}
	case x < 24:
		return call{"nget", fmt.Sprintf(`{"key":"n%d"}`, r.IntN(2))}
	default:
		return call{"nput", fmt.Sprintf(`{"key":"n%d","val":"%d"}`, r.IntN(2), r.IntN(3))}
	}
}

// script draws a random session: steps of one to three parallel calls.
func script(r *rand.Rand, steps int) [][]call {
	s := make([][]call, steps)
	for i := range s {
		for range 1 + r.IntN(3) {
			s[i] = append(s[i], randomCall(r))
		}
	}
	return s
}

// randomPredictor knows each session's script and predicts each of its
// next three calls half of the time, mixed with random (mostly wrong)
// calls of any tool, including tools the policy forbids.
// Its guesses are all marked Repeat: the engine's rule against re-running a
// call the agent already has saves work, and must not be what keeps a stale
// result from being served here.
type randomPredictor struct {
	mu      sync.Mutex
	r       *rand.Rand
	scripts map[string][]call // flattened
}

func (p *randomPredictor) Observe(ev trace.Event) []predict.Prediction {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []predict.Prediction
	s := p.scripts[ev.Session]
	for i := ev.Seq + 1; i < min(ev.Seq+4, len(s)); i++ {
		if p.r.IntN(2) == 0 {
			out = append(out, predict.Prediction{Tool: s[i].tool, Args: json.RawMessage(s[i].args), P: p.r.Float64(), Repeat: true})
		}
	}
	for range p.r.IntN(4) {
		w := randomCall(p.r)
		out = append(out, predict.Prediction{Tool: w.tool, Args: json.RawMessage(w.args), P: p.r.Float64(), Repeat: true})
	}
	p.r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

func (p *randomPredictor) Forget(string) {}

// kvPolicy describes the tools above; with asPath false, keys are compared
// as written (the mutation check's "path-normalisation").
func kvPolicy(asPath bool) *policy.Policy {
	kind := policy.KindID
	if asPath {
		kind = policy.KindPath
	}
	key := []policy.Ref{{Arg: "key", As: kind}}
	return &policy.Policy{
		Tools: map[string]policy.Tool{
			"get":  {Allow: true, Reads: key},
			"mget": {Allow: true, Reads: []policy.Ref{{Arg: "keys", As: kind}}},
			"scan": {Allow: true},
			"peek": {Allow: true, Reads: key, Shared: true, TTL: 5 * time.Second},
			"slow": {Allow: true, Reads: key, Cancellable: new(false)},
			"feed": {Allow: true, Reads: key, Volatile: true},
			"put":  {Writes: key},
			"move": {Writes: []policy.Ref{{Arg: "src", As: kind}, {Arg: "dst", As: kind}}},
			"drop": {Writes: key},
			"nget": {Allow: true, Reads: policy.Refs("key")},
			"nput": {Writes: policy.Refs("key")},
		},
		Dedup: policy.Dedup{Strategy: policy.StrategyAll},
	}
}

// world is what the agents know has happened: the writes whose calls have
// returned, by key, with the version they committed.
type world struct {
	mu    sync.Mutex
	keys  map[string]int // shared key → version of the last returned write
	epoch int            // of the last returned bump
	notes map[string]int // session/key → version
}

// snapshot is what an agent knows when it issues a step.
type snapshot struct {
	keys  map[string]int
	epoch int
	notes map[string]int
	feeds map[string]int
}

func (w *world) snapshot(k *kv) snapshot {
	w.mu.Lock()
	defer w.mu.Unlock()
	return snapshot{keys: maps.Clone(w.keys), epoch: w.epoch, notes: maps.Clone(w.notes), feeds: k.feeds()}
}

// learn records what a returned write committed.
func (w *world) learn(session string, c call, out string) {
	var a kvArgs
	json.Unmarshal([]byte(c.args), &a)
	var ver int
	fmt.Sscanf(out, "ok @%d", &ver)
	w.mu.Lock()
	defer w.mu.Unlock()
	set := func(m map[string]int, k string) { m[k] = max(m[k], ver) }
	switch c.tool {
	case "put", "drop":
		set(w.keys, kvKey(a.Key))
	case "move":
		set(w.keys, kvKey(a.Src))
		set(w.keys, kvKey(a.Dst))
	case "bump":
		fmt.Sscanf(out, "e%d", &ver)
		w.epoch = max(w.epoch, ver)
	case "nput":
		set(w.notes, session+"/"+a.Key)
	}
}

// stale returns why a read's output is older than what its agent knew
// when it issued the read (now for ahead's writes and its own notes, prev
// for feeds, which others write behind ahead's back), or "".
func stale(session, out string, now, prev snapshot) string {
	fields := strings.Fields(out)
	if len(fields) == 0 || fields[0] == "ok" {
		return "" // a write
	}
	if rest, ok := strings.CutPrefix(fields[0], "e"); ok {
		if e, err := strconv.Atoi(rest); err == nil && e < now.epoch {
			return fmt.Sprintf("epoch %d, but bump %d had returned", e, now.epoch)
		}
	} else if fields[0] != session+":" {
		return "another session's notes"
	}
	for _, f := range fields[1:] {
		key, rest, _ := strings.Cut(f, "=")
		_, v, _ := strings.Cut(rest, "@")
		ver, _ := strconv.Atoi(v)
		want := now.keys[key]
		switch {
		case strings.HasPrefix(key, "f"):
			want = prev.feeds[key]
		case strings.HasPrefix(key, "n"):
			want = now.notes[session+"/"+key]
		}
		if ver < want {
			return fmt.Sprintf("%s at version %d, but version %d was known", key, ver, want)
		}
	}
	return ""
}

type run struct {
	sessions, steps int
	seed            uint64
	speculate       bool
	pol             *policy.Policy
	disable         string // a freshness rule to turn off (mutation check)
	stopAtFirst     bool
	// predictor, if set, replaces the random predictor; onEngine is given
	// the engine before any session starts (an origin that offers).
	predictor predict.Predictor
	onEngine  func(*engine.Engine)
	// live is how many sessions run at once; 0: eight.
	live int
	// slots, if set, is every backend's slots (else 4 and 2).
	slots int
	// messages: each session opens with a user message naming it, and
	// user and assistant messages come between its steps.
	messages bool
}

type runResult struct {
	calls, stale int
	first        []string
	st           engine.Stats
	forbidden    []string
	cancelled    int // executions of a non-cancellable tool cancelled before Close
	// outputs holds what each agent saw: session → step → call → output.
	outputs map[string][][]string
}

// runSessions replays random sessions through an engine, eight at a time,
// each step's calls in parallel, with writes from every session to the
// shared keys and external writes to the feeds between steps, and checks
// every authoritative read against what its agent knew.
func runSessions(t *testing.T, o run) runResult {
	k, n := newKV(), &notes{clock: map[string]int{}, vals: map[string]versioned{}}
	r := rand.New(rand.NewPCG(o.seed, 0))
	names := make([]string, o.sessions)
	scripts := make(map[string][][]call)
	flat := make(map[string][]call)
	for i := range names {
		names[i] = fmt.Sprintf("s%05d", i)
		scripts[names[i]] = script(r, o.steps)
		flat[names[i]] = slices.Concat(scripts[names[i]]...)
	}
	opts := engine.Options{
		Backends: map[string]engine.Backend{
			"kv": {Backend: k, Limits: sched.Limits{Slots: cmp.Or(o.slots, 4)}, Tools: []string{"get", "mget", "scan", "peek", "slow", "feed", "put", "move", "bump", "drop"},
				Paths: policy.PathSpace{Root: kvRoot}}, // links unseen: a remote store
			"notes": {Backend: n, Limits: sched.Limits{Slots: cmp.Or(o.slots, 2)}, Tools: []string{"nget", "nput"}, PerSession: true},
		},
		Policy:     o.pol,
		SpecBudget: 6,
	}
	if o.speculate {
		opts.Predictor = &randomPredictor{r: rand.New(rand.NewPCG(o.seed, 1)), scripts: flat}
	}
	if o.predictor != nil {
		opts.Predictor = o.predictor
	}
	eng := engine.New(&opts)
	if o.disable != "" {
		engine.DisableRule(eng, o.disable)
	}
	if o.onEngine != nil {
		o.onEngine(eng)
	}
	w := &world{keys: map[string]int{}, notes: map[string]int{}}
	var (
		mu      sync.Mutex
		res     runResult
		failed  atomic.Bool
		wg      sync.WaitGroup
		errOnce sync.Once
	)
	res.outputs = make(map[string][][]string, len(names))
	for _, name := range names {
		res.outputs[name] = make([][]string, len(scripts[name]))
		for j, step := range scripts[name] {
			res.outputs[name][j] = make([]string, len(step))
		}
	}
	say := func(name, role, content string) {
		if err := eng.Message(t.Context(), name, role, content); err != nil {
			errOnce.Do(func() { t.Errorf("%s: message: %v", name, err) })
		}
	}
	live := make(chan struct{}, cmp.Or(o.live, 8))
	for i, name := range names {
		if o.stopAtFirst && failed.Load() {
			break
		}
		live <- struct{}{}
		wg.Go(func() {
			defer func() { <-live }()
			r := rand.New(rand.NewPCG(o.seed, uint64(i)+2))
			time.Sleep(time.Duration(r.IntN(1000)) * time.Millisecond)
			prev := w.snapshot(k)
			if o.messages {
				say(name, trace.RoleUser, "This is session "+name+". Please tidy up the store.")
			}
			for j, step := range scripts[name] {
				if o.messages && j > 0 {
					switch r.IntN(3) {
					case 0: // the model's turn ended; the user answers
						say(name, trace.RoleAssistant, fmt.Sprintf("Step %d is done.", j))
						time.Sleep(time.Duration(r.IntN(1000)) * time.Millisecond)
						say(name, trace.RoleUser, "Go on with "+name+".")
					case 1:
						say(name, trace.RoleUser, "And keep the notes of "+name+" current.")
					}
				}
				time.Sleep(time.Duration(r.IntN(3000)) * time.Millisecond) // think
				if r.IntN(3) == 0 {
					k.external(fmt.Sprintf("f%d", r.IntN(2)))
				}
				now := w.snapshot(k)
				var sw sync.WaitGroup
				for ci, c := range step {
					sw.Go(func() {
						out, err := eng.Call(t.Context(), name, c.tool, json.RawMessage(c.args))
						if err != nil {
							errOnce.Do(func() { t.Errorf("%s %s%s: %v", name, c.tool, c.args, err) })
							return
						}
						w.learn(name, c, out.Output)
						why := stale(name, out.Output, now, prev)
						mu.Lock()
						defer mu.Unlock()
						res.outputs[name][j][ci] = out.Output
						res.calls++
						if why != "" {
							failed.Store(true)
							if res.stale++; len(res.first) < 3 {
								res.first = append(res.first, fmt.Sprintf("%s %s%s = %s %q: %s", name, c.tool, c.args, out.Source, out.Output, why))
							}
						}
					})
				}
				sw.Wait()
				prev = now
			}
			eng.EndSession(name)
		})
	}
	wg.Wait()
	k.mu.Lock()
	res.cancelled = k.cancelled
	k.mu.Unlock()
	eng.Close()
	res.st = eng.Stats()
	for _, req := range k.specs {
		if o.pol.Lookup(req.Tool).Level() == policy.LevelNone {
			res.forbidden = append(res.forbidden, req.Tool)
		}
	}
	return res
}

// TestLosslessDifferential checks the lossless promise on ten thousand
// random sessions (2,500 under the race detector), eight at a time on a store all sessions share, with a
// random, often wrong predictor: every authoritative read reflects every
// write whose call had returned when it was issued (from its own session or
// any other: what executing it then would show), and the feeds as they
// were when the agent issued its previous step (others write them behind
// ahead's back, so only the volatile rule bounds them). The same check
// holds for the sessions replayed without speculation; forbidden tools
// never run speculatively, and no result crosses sessions on the
// per-session backend.
func TestLosslessDifferential(t *testing.T) {
	for _, speculate := range []bool{false, true} {
		// Without speculation the check holds trivially; a thousand
		// sessions show that the check itself is sound.
		sessions := int64(1000)
		if speculate {
			sessions = 10000
			if raceEnabled {
				// 10,000 sessions take three minutes under the race
				// detector, whose job here is data races, not coverage.
				sessions = 2500
			}
		}
		synctest.Test(t, func(t *testing.T) {
			res := runSessions(t, run{sessions: int(sessions), steps: 4, seed: 1, speculate: speculate, pol: kvPolicy(true)})
			if res.stale > 0 {
				t.Errorf("speculation %v: %d of %d calls stale, first: %s", speculate, res.stale, res.calls, strings.Join(res.first, "\n\t"))
			}
			if res.cancelled > 0 {
				t.Errorf("%d executions of a tool with cancellable: false were cancelled", res.cancelled)
			}
			if len(res.forbidden) > 0 {
				t.Errorf("tools %v ran speculatively; the policy forbids them", res.forbidden)
			}
			st := res.st
			if speculate && (st.Reused+st.Promoted < sessions/2 || st.Outcomes[engine.OutcomeInvalidated] < sessions/10 || st.Outcomes[engine.OutcomePreempted] == 0) {
				t.Errorf("too little speculation to prove anything: %+v", st.Totals)
			}
			t.Logf("speculation %v: %d calls, %d reused, %d promoted, %d speculative runs, outcomes %v",
				speculate, st.Calls, st.Reused, st.Promoted, st.SpecStarted, st.Outcomes)
		})
	}
}

// TestMutationsFailDifferential is the mutation check: with any one
// freshness rule turned off, the differential test finds stale results.
func TestMutationsFailDifferential(t *testing.T) {
	muts := slices.Sorted(maps.Keys(engine.Rules))
	muts = append(muts, "path-normalisation")
	for _, m := range muts {
		t.Run(m, func(t *testing.T) {
			// Whether a stale result shows depends on how the sessions'
			// goroutines interleave, which synctest leaves to the
			// scheduler: a rare rule (volatile needs a feed guessed two
			// windows early, written between, then claimed) can slip
			// through one seed's 3,000 sessions under load. Up to three
			// seeds; the first stale result ends the check.
			calls := 0
			for seed := uint64(2); seed < 5; seed++ {
				var res runResult
				synctest.Test(t, func(t *testing.T) {
					o := run{sessions: 3000, steps: 4, seed: seed, speculate: true, pol: kvPolicy(true), disable: m, stopAtFirst: true}
					if m == "path-normalisation" {
						o.pol, o.disable = kvPolicy(false), ""
					}
					res = runSessions(t, o)
				})
				calls += res.calls
				if res.stale > 0 {
					t.Logf("with %s off (seed %d): %s", m, seed, res.first[0])
					return
				}
			}
			t.Errorf("with %s off, %d calls and no stale result: the differential test does not guard it", m, calls)
		})
	}
}
