package fleet_test

import (
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ahead-dev/ahead/fleet"
)

// TestPresenceDifferential: a replica is cut off from the NATS server (its
// connection through a proxy the test cuts) while it keeps serving its
// sessions, whose writes go to the shared store unannounced; the other two
// replicas keep serving theirs, reads that the cut-off replica's writes
// may make stale. Once they take it for missing, every read an agent
// receives equals the store's value at that moment; when the cut heals its
// writes are announced late and the others reuse again. Without the
// presence rule (fences that ignore a missing replica) stale reads appear.
func TestPresenceDifferential(t *testing.T) {
	sessions := 600
	if raceEnabled || testing.Short() {
		sessions = 240
	}
	out, st := runPartitioned(t, mutant{}, sessions, 8)
	t.Logf("%d sessions, %d calls while cut off: %d reused, %d stale; fences refused absent %d; cut-off replica: late %d",
		sessions, out.calls, out.reused, out.stale, st.FenceAbsent, st.Late)
	if out.stale != 0 {
		t.Errorf("%d stale reads, first: %s", out.stale, out.firstStale)
	}
	if st.FenceAbsent == 0 {
		t.Error("no fence refused for a missing replica: the test does not exercise the presence rule")
	}

	t.Run("no presence", func(t *testing.T) {
		out, st := runPartitioned(t, mutant{noPresence: true}, sessions, 9)
		t.Logf("%d calls while cut off: %d reused, %d stale; cut-off replica: late %d", out.calls, out.reused, out.stale, st.Late)
		if out.stale == 0 {
			t.Error("fences that ignore a missing replica left every read fresh: the differential test cannot see the presence rule")
		}
	})
}

// runPartitioned starts three replicas on a server of their own, the last
// through a proxy, cuts it off, waits until the others take it for
// missing, and runs sessions over all three. It returns what the sessions
// saw, the other replicas' fence refusals for a missing replica
// (FenceAbsent) and the cut-off replica's late writes (Late), after it has
// joined again and the others have heard it.
func runPartitioned(t *testing.T, mut mutant, sessions int, seed uint64) (outcome, fleet.Stats) {
	t.Helper()
	host, err := fleet.Join(t.Context(), &fleet.Options{Name: "test", Replica: "host", Logger: slog.New(slog.DiscardHandler),
		Embedded: &fleet.Embedded{Listen: "127.0.0.1:0", Dir: t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(host.Close)
	px := newCutProxy(t, strings.TrimPrefix(host.URL(), "nats://"))
	r := newReplicas(t, 3, mut, host.URL())
	r.urls = []string{2: "nats://" + px.addr()}
	// Missing after 3 × 100 ms; taken for gone only long after the run,
	// however slow the machine (the run checks it was not).
	r.heartbeat, r.presence = 100*time.Millisecond, 5*time.Minute
	r.startAll(t)
	cut := r.slots[2].Load().f
	others := []*fleet.Fleet{r.slots[0].Load().f, r.slots[1].Load().f}
	for _, f := range others {
		waitFor(t, func() bool { heard, _ := fleet.Presence(f, cut.Replica()); return heard })
	}

	px.cut()
	waitFor(t, func() bool { return !cut.Connected() })
	for _, f := range others {
		waitFor(t, func() bool { _, missing := fleet.Presence(f, cut.Replica()); return missing })
	}
	out := r.run(t, sessions, 6, 3, 24, seed, nil)
	for _, f := range others {
		if _, missing := fleet.Presence(f, cut.Replica()); !missing {
			t.Fatalf("replica %s no longer takes the cut-off one for missing: the run did not test what it says", f.Replica())
		}
	}

	px.heal()
	waitConnected(t, cut)
	waitFor(t, func() bool { s := cut.Stats(); return s.LateSent == s.Late })
	for _, f := range others {
		waitFor(t, func() bool { heard, missing := fleet.Presence(f, cut.Replica()); return heard && !missing })
		if err := f.Fence(t.Context(), "store"); err != nil {
			t.Errorf("replica %s: fence once the cut-off replica is back: %v", f.Replica(), err)
		}
	}
	var st fleet.Stats
	for _, f := range others {
		st.FenceAbsent += f.Stats().FenceAbsent
	}
	st.Late = cut.Stats().Late
	if st.Late == 0 {
		t.Error("the cut-off replica announced every write: it was not cut off")
	}
	return out, st
}

// cutProxy forwards TCP connections to a server until cut: then it closes
// the connections it forwards, and each new one at once, until healed.
type cutProxy struct {
	l  net.Listener
	to string
	wg sync.WaitGroup // the accept loop and each connection's

	mu     sync.Mutex
	down   bool
	closed bool
	conns  map[net.Conn]bool
}

// newCutProxy starts a proxy to the server at to (HOST:PORT); the test's
// cleanup stops it and waits for its goroutines.
func newCutProxy(t *testing.T, to string) *cutProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{l: l, to: to, conns: make(map[net.Conn]bool)}
	p.wg.Go(p.accept)
	t.Cleanup(p.close)
	return p
}

func (p *cutProxy) addr() string { return p.l.Addr().String() }

func (p *cutProxy) accept() {
	for {
		c, err := p.l.Accept()
		if err != nil {
			return // closed
		}
		if !p.track(c) {
			c.Close()
			continue
		}
		p.wg.Go(func() { p.forward(c) })
	}
}

// track registers c, unless the proxy is cut or closed.
func (p *cutProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down || p.closed {
		return false
	}
	p.conns[c] = true
	return true
}

func (p *cutProxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		delete(p.conns, c)
		c.Close()
	}
}

// forward copies between c and a connection to the server until either
// side ends or the proxy is cut.
func (p *cutProxy) forward(c net.Conn) {
	up, err := net.Dial("tcp", p.to)
	if err != nil {
		p.untrack(c)
		return
	}
	if !p.track(up) {
		up.Close()
		p.untrack(c)
		return
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		io.Copy(up, c)
		p.untrack(c, up)
	})
	io.Copy(c, up)
	p.untrack(c, up)
	wg.Wait()
}

// cut closes every connection and refuses new ones until heal.
func (p *cutProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for c := range p.conns {
		c.Close()
		delete(p.conns, c)
	}
}

func (p *cutProxy) heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = false
}

func (p *cutProxy) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.cut()
	p.l.Close()
	p.wg.Wait()
}
