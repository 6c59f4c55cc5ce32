package fleet_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ahead-dev/ahead/fleet"
	"github.com/ahead-dev/ahead/learn"
	"github.com/ahead-dev/ahead/trace"
)

// learners joins n replicas of one fleet (the first runs the server), each
// with its part in the fleet's learning.
func learners(t *testing.T, n int, opts *fleet.LearningOptions) []*fleet.Learning {
	t.Helper()
	var out []*fleet.Learning
	url := ""
	for i := range n {
		o := &fleet.Options{Name: "lt", Replica: string(rune('a' + i)), URL: url}
		if i == 0 {
			o.Embedded = &fleet.Embedded{Listen: "127.0.0.1:0", Dir: t.TempDir()}
		}
		f, err := fleet.Join(t.Context(), o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(f.Close)
		url = f.URL()
		l, err := f.Learning(t.Context(), opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(l.Close)
		out = append(out, l)
	}
	return out
}

// TestLease: one replica at a time holds the mining lease; the holder
// renews it; a replica that does not hold it cannot share a pool.
func TestLease(t *testing.T) {
	ls := learners(t, 3, nil)
	a, b, c := ls[0], ls[1], ls[2]
	if !a.Lease(t.Context()) {
		t.Fatal("A could not take the free lease")
	}
	if b.Lease(t.Context()) || c.Lease(t.Context()) {
		t.Fatal("B or C took the lease A holds")
	}
	if !a.Lease(t.Context()) {
		t.Fatal("A could not renew its lease")
	}
	if err := b.Share(t.Context(), learn.EmptyPool(), 0); !errors.Is(err, fleet.ErrNotMiner) {
		t.Errorf("B shared a pool without the lease: %v, want ErrNotMiner", err)
	}
	if err := a.Share(t.Context(), learn.EmptyPool(), 0); err != nil {
		t.Fatal(err)
	}
	pool, pi, err := c.Load(t.Context())
	if err != nil || pool == nil || pi.Version != 1 || pi.Miner != "a" {
		t.Errorf("C loaded %v, %+v, %v; want version 1 mined by a", pool, pi, err)
	}
	// A replica that leaves gives the lease up: the next takes it at
	// once, not after LeaseTTL.
	a.Close()
	if !b.Lease(t.Context()) {
		t.Error("B could not take the lease A gave up")
	}
	if c.Lease(t.Context()) {
		t.Error("C took the lease B holds")
	}
}

// TestLeaseExpires: a miner that stops renewing the lease without giving
// it up (killed, frozen, cut off) keeps it until LeaseTTL after its last
// renewal, and no longer: another replica then takes it and mines. The
// old miner, back, is no longer the miner and cannot share what it
// mined. (The lease's clock is the NATS server's: synctest cannot bubble
// it, so the TTL is short and the test waits on the lease's state.)
func TestLeaseExpires(t *testing.T) {
	const ttl = time.Second
	ls := learners(t, 3, &fleet.LearningOptions{LeaseTTL: ttl})
	b, c := ls[1], ls[2]
	renewed := time.Now()
	if !b.Lease(t.Context()) {
		t.Fatal("B could not take the free lease")
	}
	if c.Lease(t.Context()) {
		t.Fatal("C took the lease B holds")
	}
	// B goes silent: no renewal, no Close.
	waitFor(t, func() bool { return c.Lease(t.Context()) })
	if took := time.Since(renewed); took < ttl {
		t.Errorf("C took the lease %s after B's last renewal, before its TTL %s", took, ttl)
	}
	if err := c.Share(t.Context(), learn.EmptyPool(), 0); err != nil {
		t.Fatalf("C, the miner now, could not share: %v", err)
	}
	// B comes back: its renewal fails, it shares nothing.
	if b.Lease(t.Context()) {
		t.Error("B renewed a lease that expired and C took")
	}
	if err := b.Share(t.Context(), learn.EmptyPool(), 0); !errors.Is(err, fleet.ErrNotMiner) {
		t.Errorf("B shared a pool after its lease expired: %v, want ErrNotMiner", err)
	}
	pi := c.Stats().Pool
	if pi.Version != 1 || pi.Miner != "c" {
		t.Errorf("pool in use %+v, want version 1 mined by c", pi)
	}
}

// TestLearningBounds: a line over MaxLine goes without its output, or not
// at all; speculative and failed calls, and messages without
// ShareConversation, are not published.
func TestLearningBounds(t *testing.T) {
	l := learners(t, 1, &fleet.LearningOptions{MaxLine: 1024})[0]
	big := strings.Repeat("x", 2048)
	for _, ev := range []trace.Event{
		{Session: "s", Seq: 0, Tool: "read", Args: []byte(`{}`), Status: trace.StatusOK, Output: "small"},
		{Session: "s", Seq: 1, Tool: "read", Args: []byte(`{}`), Status: trace.StatusOK, Output: big},         // trimmed
		{Session: "s", Seq: 2, Tool: "read", Args: []byte(`{"a":"` + big + `"}`), Status: trace.StatusOK},     // dropped
		{Kind: trace.KindSpeculative, Session: "s", Tool: "read", Args: []byte(`{}`), Status: trace.StatusOK}, // local
		{Kind: trace.KindMessage, Session: "s", Role: trace.RoleUser, Content: "hello"},                       // local
		{Kind: trace.KindEmitted, Session: "s", Seq: 3, Tool: "read", Args: []byte(`{}`)},                     // shared
	} {
		l.Record(ev)
	}
	sessions, fresh, mark, err := l.Recent(t.Context(), 0)
	if err != nil {
		t.Fatal(err)
	}
	st := l.Stats()
	if st.Published != 3 || st.Trimmed != 1 || st.Dropped != 1 {
		t.Errorf("published %d, trimmed %d, dropped %d; want 3, 1, 1", st.Published, st.Trimmed, st.Dropped)
	}
	if len(sessions) != 1 || len(sessions[0].Events) != 2 || len(sessions[0].Messages) != 0 {
		t.Fatalf("recent sessions %+v, want one with 2 calls and no message", sessions)
	}
	if got := sessions[0].Events[1].Output; got != "" {
		t.Errorf("the large output came through (%d bytes)", len(got))
	}
	if fresh[0] != 0 || mark == 0 {
		t.Errorf("fresh %v, mark %d: want every call fresh after 0", fresh, mark)
	}
	if _, fresh, _, err = l.Recent(t.Context(), mark); err != nil || fresh[0] != 2 {
		t.Errorf("after the mark: fresh %v, %v; want none fresh (2)", fresh, err)
	}
}

// TestLearningState: State reports the trace stream, the pool store and
// the pool shared, and fails once another replica has set other bounds.
func TestLearningState(t *testing.T) {
	ctx := t.Context()
	join := func(o *fleet.Options, lo *fleet.LearningOptions) (*fleet.Fleet, *fleet.Learning) {
		f, err := fleet.Join(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(f.Close)
		l, err := f.Learning(ctx, lo)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(l.Close)
		return f, l
	}
	fa, a := join(&fleet.Options{Name: "lt", Replica: "a", Embedded: &fleet.Embedded{Listen: "127.0.0.1:0", Dir: t.TempDir()}}, nil)
	st, err := a.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Traces.Name != "lt_traces" || st.Traces.MaxBytes != 256<<20 || st.Traces.MaxAge != 24*time.Hour ||
		st.PoolStore != "lt_pool" || st.PoolStoreMax != 2*64<<20+1<<20 || st.Pool.Version != 0 {
		t.Errorf("state %+v, want the default bounds and no pool", st)
	}
	if !a.Lease(ctx) {
		t.Fatal("could not take the free lease")
	}
	if err := a.Share(ctx, learn.EmptyPool(), 0); err != nil {
		t.Fatal(err)
	}
	if st, err = a.State(ctx); err != nil || st.Pool.Version != 1 || st.Pool.Miner != "a" || st.PoolStoreBytes == 0 {
		t.Errorf("after sharing a pool: state %+v, %v; want version 1 by a", st, err)
	}
	// A replica with other bounds updates the stream: the first one's
	// check fails, the other's succeeds.
	_, b := join(&fleet.Options{Name: "lt", Replica: "b", URL: fa.URL()}, &fleet.LearningOptions{MaxBytes: 128 << 20})
	if _, err := a.State(ctx); err == nil || !strings.Contains(err.Error(), "lt_traces is bounded by 134217728 bytes") {
		t.Errorf("state after another replica set other bounds: %v, want an error naming them", err)
	}
	if _, err := b.State(ctx); err != nil {
		t.Errorf("state of the replica that set the bounds: %v", err)
	}
}

// TestStoreBytes: an embedded server whose file store is bounded by
// StoreBytes holds the fleet's learning; one a MiB smaller refuses it.
func TestStoreBytes(t *testing.T) {
	need := fleet.StoreBytes(nil)
	for _, tc := range []struct {
		store int64
		ok    bool
	}{{need, true}, {need - 1<<20, false}} {
		f, err := fleet.Join(t.Context(), &fleet.Options{Name: "sb", Replica: "a",
			Embedded: &fleet.Embedded{Listen: "127.0.0.1:0", Dir: t.TempDir(), MaxStore: tc.store}})
		if err != nil {
			t.Fatal(err)
		}
		l, err := f.Learning(t.Context(), nil)
		if (err == nil) != tc.ok {
			t.Errorf("learning on a store of %d bytes (StoreBytes %d): %v, want success %v", tc.store, need, err, tc.ok)
		}
		if l != nil {
			l.Close()
		}
		f.Close()
	}
}
