package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ahead-dev/ahead/fleet"
	"github.com/ahead-dev/ahead/httpapi"
)

// Learning across separate `ahead serve` processes (issue 25): each
// replica is its own process, built once (aheadBinary), joining a NATS
// server this test runs in-process on loopback. Every wait is on state the
// processes report (/v1/stats) or the fleet holds, never a sleep.

// replicaProc is `ahead serve` running as its own process, its log kept.
type replicaProc struct {
	url     string
	cmd     *exec.Cmd
	drained chan struct{} // closed when the process's stderr is read to its end
	mu      sync.Mutex    // protects log
	log     bytes.Buffer
}

func startReplicaProc(t *testing.T, config string) *replicaProc {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "ahead.yaml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(ahead(t), "serve", "--config", path)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &replicaProc{cmd: cmd, drained: make(chan struct{})}
	addr := make(chan string, 1)
	go func() { // owned: ends when the process exits; joined at cleanup
		defer close(p.drained)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			p.mu.Lock()
			p.log.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
		io.Copy(io.Discard, stderr)
		close(addr)
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt) // fails harmlessly once killed
		<-p.drained
		cmd.Wait()
	})
	u, ok := <-addr
	if !ok {
		<-p.drained
		t.Fatalf("ahead serve exited before listening:\n%s", p.logText())
	}
	p.url = u
	return p
}

// stop stops the process as a user would (SIGINT), and waits for it.
func (p *replicaProc) stop(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	<-p.drained
	if err := p.cmd.Wait(); err != nil {
		t.Errorf("ahead serve exited with %v:\n%s", err, p.logText())
	}
}

func (p *replicaProc) logText() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

// fleetStats reads the replica's /v1/stats fleet section.
func (p *replicaProc) fleetStats(t *testing.T) *httpapi.FleetStats {
	t.Helper()
	var st httpapi.Stats
	if err := json.Unmarshal([]byte(getText(t, p.url+"/v1/stats")), &st); err != nil {
		t.Fatal(err)
	}
	if st.Fleet == nil || st.Fleet.Learning == nil {
		t.Fatalf("/v1/stats of %s has no fleet learning", p.url)
	}
	return st.Fleet
}

// lookups is the tool backend of the learning tests: find answers an id
// derived from its query, get a record; it counts the calls it serves.
type lookups struct {
	mu    sync.Mutex
	calls map[string]int // "tool args" → calls served
}

func newLookups(t *testing.T) (*lookups, string) {
	l := &lookups{calls: make(map[string]int)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var args struct{ Q, ID string }
		json.Unmarshal(body, &args)
		tool := r.URL.Path[strings.LastIndexByte(r.URL.Path, '/')+1:]
		l.mu.Lock()
		l.calls[tool+" "+string(body)]++
		l.mu.Unlock()
		if tool == "find" {
			fmt.Fprintf(w, `{"id":"k-%s"}`, args.Q)
			return
		}
		fmt.Fprintf(w, "record %s", args.ID)
	}))
	t.Cleanup(srv.Close)
	return l, srv.URL
}

func (l *lookups) count(call string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.calls[call]
}

// fleetHub runs the fleet's NATS server in the test process (a replica of
// its own that serves nothing) and a handle on the fleet's learning, to
// read the trace stream.
func fleetHub(t *testing.T, name string, leaseTTL time.Duration) (*fleet.Fleet, *fleet.Learning) {
	t.Helper()
	hub, err := fleet.Join(t.Context(), &fleet.Options{Name: name, Replica: "hub", Logger: slog.New(slog.DiscardHandler),
		Embedded: &fleet.Embedded{Listen: "127.0.0.1:0", Dir: t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hub.Close)
	lrn, err := hub.Learning(t.Context(), &fleet.LearningOptions{LeaseTTL: leaseTTL})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lrn.Close)
	return hub, lrn
}

// learnerConfig is a replica that learns with the fleet at url, a
// checkpoint every 100 ms.
func learnerConfig(backend, url, name string) string {
	return fmt.Sprintf(`listen: 127.0.0.1:0
backends: {db: {http: {url: "%s/tools/{tool}"}}}
speculation_policy: {tools: {find: {allow: true}, get: {allow: true}}}
patterns: {pool: ./pool.json, checkpoint_every: 100ms}
fleet: {url: "%s", name: %s, fence_timeout: 2s, lease_ttl: 1s}
`, backend, url, name)
}

// teach runs one session of the pattern (find, then get of the id found)
// on p, and ends it.
func teach(t *testing.T, p *replicaProc, session, q string) answer {
	t.Helper()
	if a := call(t, p.url, session, `{"tool":"find","args":{"q":"`+q+`"}}`); a.Code != 200 {
		t.Fatalf("find on %s: %+v", p.url, a)
	}
	a := call(t, p.url, session, `{"tool":"get","args":{"id":"k-`+q+`"}}`)
	if a.Code != 200 {
		t.Fatalf("get on %s: %+v", p.url, a)
	}
	req, _ := http.NewRequest(http.MethodDelete, p.url+"/v1/sessions/"+session, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return a
}

// storedCalls waits until the fleet's trace stream holds want calls, and
// returns the stream position of the last line read.
func storedCalls(t *testing.T, lrn *fleet.Learning, want int) uint64 {
	t.Helper()
	var mark uint64
	waitFor(t, fmt.Sprintf("%d calls on the trace stream", want), func() bool {
		sessions, _, m, err := lrn.Recent(t.Context(), 0)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, s := range sessions {
			n += len(s.Events)
		}
		mark = m
		return n >= want
	})
	return mark
}

// TestServeFleetLearnsAcrossProcesses: two `ahead serve` processes, A and
// B, each see a pattern twice through the HTTP tool API; one of them mines
// the fleet's traffic under the lease and shares the pool; both stop; C, a
// third process started afterwards, loads it before it serves, and its
// first session's get is served from speculation.
func TestServeFleetLearnsAcrossProcesses(t *testing.T) {
	tools, backend := newLookups(t)
	hub, lrn := fleetHub(t, "pl", time.Second)
	a := startReplicaProc(t, learnerConfig(backend, hub.URL(), "pl"))
	b := startReplicaProc(t, learnerConfig(backend, hub.URL(), "pl"))
	for i, p := range []*replicaProc{a, b, a, b} {
		if got := teach(t, p, fmt.Sprint("s", i), fmt.Sprint("q", i)); got.Source != "executed" && got.Source != "reused" && got.Source != "promoted" {
			t.Fatalf("session %d: get %+v", i, got)
		}
	}
	// Every call stored, then a pool mined from all of them (its mark at
	// or past the last) by whichever replica holds the lease.
	mark := storedCalls(t, lrn, 8)
	var version uint64
	var miner string
	waitFor(t, "a pool mined from every call", func() bool {
		for _, p := range []*replicaProc{a, b} {
			if ls := p.fleetStats(t).Learning; ls.PoolVersion > 0 && ls.PoolMark >= mark {
				version, miner = ls.PoolVersion, ls.PoolMiner
				return true
			}
		}
		return false
	})
	sa, sb := a.fleetStats(t), b.fleetStats(t)
	if miner != sa.Replica && miner != sb.Replica {
		t.Fatalf("pool mined by %q, neither A (%s) nor B (%s)", miner, sa.Replica, sb.Replica)
	}
	if sa.Learning.Published < 4 || sb.Learning.Published < 4 {
		t.Errorf("A published %d lines, B %d: want each its 4 calls", sa.Learning.Published, sb.Learning.Published)
	}
	// A and B leave (cleanly: C's fences do not wait for them), and C
	// starts after.
	a.stop(t)
	b.stop(t)

	c := startReplicaProc(t, learnerConfig(backend, hub.URL(), "pl"))
	if !strings.Contains(c.logText(), `msg="fleet pool loaded"`) {
		t.Errorf("C's start-up does not say it loaded the fleet's pool:\n%s", c.logText())
	}
	waitFor(t, "C caught up with the fleet", func() bool { return c.fleetStats(t).Connected })
	if ls := c.fleetStats(t).Learning; ls.PoolVersion < version {
		t.Fatalf("C serves pool version %d, want at least %d", ls.PoolVersion, version)
	}
	// C's first session: after find, the predicted get runs ahead; the
	// agent's get is served from it, and the backend runs it once.
	if a := call(t, c.url, "c-first", `{"tool":"find","args":{"q":"q7"}}`); a.Code != 200 {
		t.Fatalf("find on C: %+v", a)
	}
	const get = `get {"id":"k-q7"}`
	waitFor(t, "C to run the predicted get", func() bool { return tools.count(get) == 1 })
	got := call(t, c.url, "c-first", `{"tool":"get","args":{"id":"k-q7"}}`)
	if got.Code != 200 || string(got.Output) != `"record k-q7"` || (got.Source != "reused" && got.Source != "promoted") {
		t.Errorf("C's first session: get %+v, want record k-q7 reused or promoted (predicted from the fleet's pool)", got)
	}
	if n := tools.count(get); n != 1 {
		t.Errorf("the backend ran C's get %d times, want once", n)
	}
}

// TestServeFleetMinerKilled: the replica that mines is killed (SIGKILL: it
// cannot give the lease up); once the lease's TTL has run out, the other
// replica takes it and mines the fleet's traffic since, the killed one's
// included.
func TestServeFleetMinerKilled(t *testing.T) {
	_, backend := newLookups(t)
	hub, lrn := fleetHub(t, "pk", time.Second)
	procs := []*replicaProc{
		startReplicaProc(t, learnerConfig(backend, hub.URL(), "pk")),
		startReplicaProc(t, learnerConfig(backend, hub.URL(), "pk")),
	}
	names := []string{procs[0].fleetStats(t).Replica, procs[1].fleetStats(t).Replica}
	for i := range 4 {
		teach(t, procs[i%2], fmt.Sprint("s", i), fmt.Sprint("q", i))
	}
	mark := storedCalls(t, lrn, 8)
	killed := -1
	var version uint64
	waitFor(t, "a pool mined from every call", func() bool {
		for _, p := range procs {
			if ls := p.fleetStats(t).Learning; ls.PoolVersion > 0 && ls.PoolMark >= mark {
				version = ls.PoolVersion
				switch ls.PoolMiner {
				case names[0]:
					killed = 0
				case names[1]:
					killed = 1
				default:
					t.Fatalf("pool mined by %q, neither replica (%q)", ls.PoolMiner, names)
				}
				return true
			}
		}
		return false
	})
	miner, survivor := procs[killed], procs[1-killed]
	// Two sessions more through the miner, stored, then it dies holding
	// the lease; traffic goes on through the survivor.
	for i := range 2 {
		teach(t, miner, fmt.Sprint("m", i), fmt.Sprint("r", i))
	}
	storedCalls(t, lrn, 12)
	if err := miner.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killedAt := time.Now()
	<-miner.drained
	teach(t, survivor, "after", "r9")
	mark = storedCalls(t, lrn, 14)
	waitFor(t, "the survivor to mine under the expired lease", func() bool {
		ls := survivor.fleetStats(t).Learning
		return ls.PoolMiner == names[1-killed] && ls.PoolVersion > version && ls.PoolMark >= mark
	})
	ls := survivor.fleetStats(t).Learning
	t.Logf("killed %s; %s mined pool version %d (mark %d) %s later", names[killed], names[1-killed], ls.PoolVersion, ls.PoolMark, time.Since(killedAt))
	if ls.Mined == 0 {
		t.Errorf("the survivor's stats count no pool mined: %+v", ls)
	}
}
