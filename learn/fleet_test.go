package learn

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ahead-dev/ahead/fleet"
	"github.com/ahead-dev/ahead/pattern"
	"github.com/ahead-dev/ahead/predict"
	"github.com/ahead-dev/ahead/trace"
)

// replica is one replica of a fleet that learns: its predictor, and its
// part in the fleet's learning, which gets every event the engine would
// record.
type replica struct {
	f       *fleet.Fleet
	lrn     *fleet.Learning
	p       *Predictor
	adopted chan fleet.PoolInfo // every pool the watch made it serve
}

func (r *replica) Observe(ev trace.Event) []predict.Prediction {
	r.lrn.Record(ev)
	return r.p.Observe(ev)
}

func (r *replica) Forget(session string) { r.p.Forget(session) }

// join starts a replica: the first (url "") runs the fleet's server.
func join(t *testing.T, name, url string, share bool) *replica {
	t.Helper()
	ctx := t.Context()
	o := &fleet.Options{Name: "learn", Replica: name, URL: url}
	if url == "" {
		o.Embedded = &fleet.Embedded{Listen: "127.0.0.1:0", Dir: t.TempDir()}
	}
	f, err := fleet.Join(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	lrn, err := f.Learning(ctx, &fleet.LearningOptions{ShareConversation: share})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lrn.Close)
	p, err := New(EmptyPool(), &Options{Learn: true, Fleet: lrn})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	r := &replica{f: f, lrn: lrn, p: p, adopted: make(chan fleet.PoolInfo, 16)}
	// A replica that starts loads the fleet's pool before it serves.
	pool, pi, err := lrn.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if pool != nil {
		if err := p.Adopt(pool, pi.Mark); err != nil {
			t.Fatal(err)
		}
		lrn.Adopted(pi)
	}
	if err := lrn.Watch(func(pool *pattern.Pool, pi fleet.PoolInfo) error {
		err := p.Adopt(pool, pi.Mark)
		if err == nil {
			r.adopted <- pi
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *replica) flush(t *testing.T) {
	t.Helper()
	if err := r.lrn.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
}

func waitAdopted(t *testing.T, r *replica, version uint64) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case pi := <-r.adopted:
			if pi.Version >= version {
				return
			}
		case <-timeout:
			t.Fatalf("replica %s: pool version %d not loaded in 10s", r.f.Replica(), version)
		}
	}
}

// TestFleetLearning is issue 25's "a new replica that starts after others
// have learned a pattern predicts it on its first session": traffic on A
// and B, neither of which has seen the pattern often enough to mine it
// alone; A mines the fleet's traffic (holding the lease, so B does not);
// the pool appears in the fleet's store; B loads it at once; C, started
// after, predicts the pattern on its first session. Then more traffic on
// both: the next pool's counts are the sum of what both served, counted
// once.
func TestFleetLearning(t *testing.T) {
	a := join(t, "a", "", false)
	b := join(t, "b", a.f.URL(), false)
	want := brief{"read_text_file", `{"path":"/home/me/project9/README.md"}`}

	// Two sessions on each: 2 occurrences are below the miner's
	// MinSupport (3), 4 are not.
	for i := range 4 {
		r := a
		if i%2 == 1 {
			r = b
		}
		listThenRead(r, fmt.Sprint("s", i), i)
	}
	a.flush(t)
	b.flush(t)
	if added, err := a.p.learner.Relearn(); err != nil || added == 0 {
		t.Fatalf("A's relearn: added %d, %v; want the fleet's pattern", added, err)
	}
	if added, err := b.p.learner.Relearn(); err != nil || added != 0 {
		t.Fatalf("B's relearn while A holds the lease: added %d, %v; want nothing", added, err)
	}
	if st := b.lrn.Stats(); st.Mined != 0 {
		t.Errorf("B mined %d pools while A held the lease", st.Mined)
	}
	pool, pi, err := b.lrn.Load(t.Context())
	if err != nil || pool == nil {
		t.Fatalf("the fleet's pool: %v, %v", pool, err)
	}
	if pi.Version != 1 || pi.Miner != "a" {
		t.Errorf("pool info %+v, want version 1 mined by a", pi)
	}
	waitAdopted(t, b, 1)
	if got := briefs(listThenRead(b, "b-live", 9)); len(got) == 0 || got[0] != want {
		t.Errorf("B after loading the fleet's pool predicted %v, want first %v", got, want)
	}

	c := join(t, "c", a.f.URL(), false)
	if got := briefs(listThenRead(c, "c-first", 9)); len(got) == 0 || got[0] != want {
		t.Errorf("C's first session predicted %v, want first %v", got, want)
	}

	// Online counts merged: the pattern's support in version 2 is its
	// support in version 1 plus the occurrences served since, by any
	// replica (B's b-live and C's c-first above, and two more on A and B).
	support := func(p *pattern.Pool) int {
		for _, pt := range p.Patterns {
			if pt.Tool == "read_text_file" && pt.Exact && len(pt.Context) == 1 {
				return pt.Support
			}
		}
		t.Fatalf("no list_directory → read_text_file pattern in %d patterns", len(p.Patterns))
		return 0
	}
	before := support(pool)
	listThenRead(a, "s4", 4)
	listThenRead(b, "s5", 5)
	for _, r := range []*replica{a, b, c} {
		r.flush(t)
	}
	if _, err := a.p.learner.Relearn(); err != nil {
		t.Fatal(err)
	}
	pool2, pi2, err := c.lrn.Load(t.Context())
	if err != nil || pool2 == nil {
		t.Fatalf("the fleet's pool: %v, %v", pool2, err)
	}
	if pi2.Version != 2 {
		t.Errorf("pool version %d, want 2", pi2.Version)
	}
	if got, want := support(pool2), before+4; got != want {
		t.Errorf("support after 4 more occurrences on 3 replicas: %d, want %d (%d + 4)", got, want, before)
	}
	waitAdopted(t, c, 2)
}

// TestFleetLearningPrivate: with share_conversation off, no message text
// goes on the fleet's trace stream (read it raw and check), while calls do.
func TestFleetLearningPrivate(t *testing.T) {
	for _, share := range []bool{false, true} {
		t.Run(fmt.Sprint("share=", share), func(t *testing.T) {
			a := join(t, "a", "", share)
			const secret = "my card number is on file"
			a.lrn.Record(trace.Event{Kind: trace.KindMessage, Session: "s", Role: trace.RoleUser, Content: secret})
			listThenRead(a, "s", 1)
			a.flush(t)
			got := readStream(t, a.f.URL(), "learn_traces")
			if !strings.Contains(got, "list_directory") {
				t.Fatalf("no call on the stream: %q", got)
			}
			if has := strings.Contains(got, secret); has != share {
				t.Errorf("share_conversation %v: message text on the stream %v:\n%s", share, has, got)
			}
		})
	}
}

// readStream returns every message of a stream, one a line.
func readStream(t *testing.T, url, stream string) string {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	n := s.CachedInfo().State.Msgs
	cons, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var all strings.Builder
	for range n {
		m, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			t.Fatal(err)
		}
		all.Write(m.Data())
		all.WriteByte('\n')
	}
	return all.String()
}

// TestFleetLearningStraddle: a session whose first call is mined before
// the fleet's mark and whose second after it (a session in progress across
// two minings) counts its list → read once: the pattern's support and hits
// grow by exactly one, not zero (the pair lost at the break) and not two.
func TestFleetLearningStraddle(t *testing.T) {
	a := join(t, "a", "", false)
	for i := range 4 {
		listThenRead(a, fmt.Sprint("s", i), i)
	}
	relearn := func() *pattern.Pool {
		t.Helper()
		a.flush(t)
		if _, err := a.p.learner.Relearn(); err != nil {
			t.Fatal(err)
		}
		pool, _, err := a.lrn.Load(t.Context())
		if err != nil || pool == nil {
			t.Fatalf("the fleet's pool: %v, %v", pool, err)
		}
		return pool
	}
	counts := func(p *pattern.Pool) (support, toolHits int) {
		for _, pt := range p.Patterns {
			if pt.Tool == "read_text_file" && pt.Exact && len(pt.Context) == 1 {
				return pt.Support, pt.ToolHits
			}
		}
		t.Fatalf("no list_directory → read_text_file pattern in %d patterns", len(p.Patterns))
		return 0, 0
	}
	s1, h1 := counts(relearn())
	// The straddling session: its list before the next mining, its read
	// after.
	dir := "/home/me/project7"
	a.Observe(ev("x", 0, "list_directory", fmt.Sprintf(`{"path":%q}`, dir), "[FILE] README.md\n[DIR] src"))
	relearn()
	a.Observe(ev("x", 1, "read_text_file", fmt.Sprintf(`{"path":%q}`, dir+"/README.md"), "# notes"))
	a.Forget("x")
	s3, h3 := counts(relearn())
	if s3 != s1+1 || h3 != h1+1 {
		t.Errorf("support %d → %d, tool hits %d → %d across the straddling session; want each +1", s1, s3, h1, h3)
	}
}

// TestFleetLearningStraddleSoon: a session whose list and another call
// are mined before the fleet's mark and whose read comes after it, the
// second call after the list: the list → read pattern's Soon count grows
// by exactly one (the read was called soon after the list), as if the
// session had been mined whole; its hits do not (the read was not next).
// Before, only the last call before the mark was resumed and the credit
// was lost.
func TestFleetLearningStraddleSoon(t *testing.T) {
	a := join(t, "a", "", false)
	for i := range 4 {
		listThenRead(a, fmt.Sprint("s", i), i)
	}
	relearn := func() *pattern.Pool {
		t.Helper()
		a.flush(t)
		if _, err := a.p.learner.Relearn(); err != nil {
			t.Fatal(err)
		}
		pool, _, err := a.lrn.Load(t.Context())
		if err != nil || pool == nil {
			t.Fatalf("the fleet's pool: %v, %v", pool, err)
		}
		return pool
	}
	counts := func(p *pattern.Pool) (support, hits, soon int) {
		for _, pt := range p.Patterns {
			if pt.Tool == "read_text_file" && pt.Exact && len(pt.Context) == 1 && len(pt.Soon) > 0 {
				return pt.Support, pt.Hits[0], pt.Soon[0]
			}
		}
		t.Fatalf("no exact list_directory → read_text_file pattern with soon counts in %d patterns", len(p.Patterns))
		return 0, 0, 0
	}
	s1, h1, soon1 := counts(relearn())
	dir := "/home/me/project7"
	a.Observe(ev("x", 0, "list_directory", fmt.Sprintf(`{"path":%q}`, dir), "[FILE] README.md\n[DIR] src"))
	a.Observe(ev("x", 1, "get_time", `{}`, "noon"))
	relearn()
	a.Observe(ev("x", 2, "read_text_file", fmt.Sprintf(`{"path":%q}`, dir+"/README.md"), "# notes"))
	a.Forget("x")
	s3, h3, soon3 := counts(relearn())
	if s3 != s1+1 || h3 != h1 || soon3 != soon1+1 {
		t.Errorf("support %d → %d, hits %d → %d, soon %d → %d across the straddling session; want +1, +0, +1", s1, s3, h1, h3, soon1, soon3)
	}
}

// TestFleetLearningIdle: a checkpoint with nothing recorded since the last
// pool shares no new one (every replica would load it again for nothing).
func TestFleetLearningIdle(t *testing.T) {
	a := join(t, "a", "", false)
	for i := range 4 {
		listThenRead(a, fmt.Sprint("s", i), i)
	}
	a.flush(t)
	for range 3 {
		if _, err := a.p.learner.Relearn(); err != nil {
			t.Fatal(err)
		}
	}
	if st := a.lrn.Stats(); st.Mined != 1 || st.Pool.Version != 1 {
		t.Errorf("after three checkpoints, the first with new calls: %d pools mined, version %d; want 1", st.Mined, st.Pool.Version)
	}
}

// TestFleetLearningIdleLag: checkpoints on an idle fleet leave the lag at
// zero (a flush with nothing to flush publishes no marker).
func TestFleetLearningIdleLag(t *testing.T) {
	a := join(t, "a", "", false)
	listThenRead(a, "s0", 0)
	for range 3 {
		a.flush(t)
		if _, err := a.p.learner.Relearn(); err != nil {
			t.Fatal(err)
		}
	}
	if !a.lrn.Lease(t.Context()) {
		t.Fatal("A lost the lease")
	}
	if st := a.lrn.Stats(); st.Lag != 0 || st.Pool.Version != 1 {
		t.Errorf("idle after one pool: lag %d, version %d; want 0 and 1", st.Lag, st.Pool.Version)
	}
}
