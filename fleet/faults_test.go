package fleet_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/ahead-dev/ahead/fleet"
	"github.com/ahead-dev/ahead/policy"
)

// TestMain doubles as a NATS server: with AHEAD_TEST_NATS_DIR set, the
// test binary runs one (JetStream, its store there, on
// 127.0.0.1:AHEAD_TEST_NATS_PORT), prints its URL and serves until its
// standard input closes, so that a test can freeze it (SIGSTOP) as a
// process of its own, built from the Go module like the rest.
func TestMain(m *testing.M) {
	if dir := os.Getenv("AHEAD_TEST_NATS_DIR"); dir != "" {
		os.Exit(serveNATS(dir, os.Getenv("AHEAD_TEST_NATS_PORT")))
	}
	os.Exit(m.Run())
}

func serveNATS(dir, port string) int {
	p, _ := strconv.Atoi(port)
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: p, JetStream: true, StoreDir: dir,
		JetStreamMaxStore: 256 << 20, JetStreamMaxMemory: 64 << 20, NoSigs: true, NoLog: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		fmt.Fprintln(os.Stderr, "nats server did not start")
		return 1
	}
	fmt.Println(srv.ClientURL())
	io.Copy(io.Discard, os.Stdin)
	srv.Shutdown()
	srv.WaitForShutdown()
	return 0
}

// natsProcess is a NATS server in a process of its own.
type natsProcess struct {
	cmd   *exec.Cmd
	stdin io.Closer
	url   string
}

// startNATS starts a NATS server process on port (0: any) with its store
// in dir; the test's cleanup stops it.
func startNATS(t testing.TB, dir string, port int) *natsProcess {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "AHEAD_TEST_NATS_DIR="+dir, "AHEAD_TEST_NATS_PORT="+strconv.Itoa(port))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &natsProcess{cmd: cmd, stdin: stdin}
	t.Cleanup(p.stop)
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("nats server process: %v", err)
	}
	p.url = line[:len(line)-1]
	return p
}

func (p *natsProcess) signal(sig syscall.Signal) error { return p.cmd.Process.Signal(sig) }

// stop lets the server go (resumed if frozen) and waits for it.
func (p *natsProcess) stop() {
	_ = p.signal(syscall.SIGCONT)
	p.stdin.Close()
	done := make(chan struct{})
	go func() { p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		p.cmd.Process.Kill()
		<-done
	}
}

// TestFleetServerFrozen: while sessions run over three replicas, the NATS
// server (a process of its own) is frozen with SIGSTOP for longer than
// every bound (fence and announce timeouts, the two missed pings that mark
// it down) and resumed: every call is answered, none waits for the frozen
// server beyond the fleet's bounds, none is stale.
func TestFleetServerFrozen(t *testing.T) {
	sessions := 1200
	if raceEnabled || testing.Short() {
		sessions = 300
	}
	const (
		fence    = 100 * time.Millisecond
		announce = 200 * time.Millisecond
		frozen   = 2500 * time.Millisecond
	)
	nats := startNATS(t, t.TempDir(), 0)
	r := startReplicas(t, 3, mutant{}, nats.url)
	r.fence, r.announce = fence, announce
	for i := range r.slots {
		r.restart(t, i)
	}
	var done atomic.Int64
	var out outcome
	var wg sync.WaitGroup
	wg.Go(func() { out = r.run(t, sessions, 6, 3, 24, 7, &done) })
	for done.Load() < int64(sessions/4) {
		time.Sleep(time.Millisecond) // a point in the workload, not a synchronisation
	}
	if err := nats.signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := done.Load()
	time.Sleep(frozen) // the freeze itself
	during := done.Load() - stopped
	if err := nats.signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	wg.Wait()

	var st fleet.Stats
	for i := range r.slots {
		s := r.slots[i].Load().f.Stats()
		st.Late += s.Late
		st.FenceDown += s.FenceDown
		st.FenceMissed += s.FenceMissed
		st.FenceAbsent += s.FenceAbsent
		st.Resyncs += s.Resyncs
	}
	t.Logf("%d sessions, %d calls (%d sessions done while frozen): %d reused, %d stale, slowest call %v; late %d, fences refused down %d timeout %d absent %d, resyncs %d",
		sessions, out.calls, during, out.reused, out.stale, out.slowest, st.Late, st.FenceDown, st.FenceMissed, st.FenceAbsent, st.Resyncs)
	if want := int64(sessions * 6); out.calls != want {
		t.Errorf("%d calls answered, want %d", out.calls, want)
	}
	if out.stale != 0 {
		t.Errorf("%d stale reads, first: %s", out.stale, out.firstStale)
	}
	if during == 0 {
		t.Error("no session finished while the server was frozen: calls waited for it")
	}
	// A write waits for at most two announcements, a read for a fence;
	// the rest is the machine (a busy one, under -race). Calls that
	// waited for nats.go's lock while it dialled the frozen server took
	// over a second.
	if bound := 2*announce + fence + 400*time.Millisecond; out.slowest > bound {
		t.Errorf("slowest call took %v, beyond the fleet's bounds (%v)", out.slowest, bound)
	}
	if st.Late == 0 || st.FenceDown+st.FenceMissed == 0 {
		t.Error("the freeze was not noticed: no late announcement, no fence refused")
	}
}

// TestFleetStartsUnreachable: a replica started while its fleet's server
// is unreachable serves at once, fails closed (no fence succeeds, its
// writes wait to be announced), and joins when the server comes up.
func TestFleetStartsUnreachable(t *testing.T) {
	ctx := t.Context()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close() // nothing listens there now
	start := time.Now()
	f, err := fleet.Join(ctx, &fleet.Options{Name: "t", Replica: "a", URL: fmt.Sprintf("nats://127.0.0.1:%d", port),
		Backends: []string{"store"}, FenceTimeout: time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("joining an unreachable fleet: %v", err)
	}
	defer f.Close()
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("joining an unreachable fleet took %v", took)
	}
	f.Start(applierFunc(func(string, policy.Effect) {}))
	if err := f.Fence(ctx, "store"); !errors.Is(err, fleet.ErrDown) {
		t.Errorf("fence with the fleet unreachable: %v, want ErrDown", err)
	}
	if err := f.Announce(ctx, "store", testPolicy.Lookup("put").Effect(args("k"))); err == nil {
		t.Error("an announcement succeeded with the fleet unreachable")
	}
	nats := startNATS(t, t.TempDir(), port)
	_ = nats
	waitConnected(t, f)
	if err := f.Fence(ctx, "store"); err != nil {
		t.Errorf("fence once the server is up: %v", err)
	}
	waitFor(t, func() bool { return f.Stats().LateSent == 1 })
}
