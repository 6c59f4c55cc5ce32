package server

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ahead-dev/ahead/config"
	"github.com/ahead-dev/ahead/engine"
	"github.com/ahead-dev/ahead/fleet"
	"github.com/ahead-dev/ahead/mcpproxy"
)

// TestFleetLearnsForNewReplica is issue 25's "a new replica that starts
// after others have learned a pattern predicts it on its first session",
// through the whole stack: replicas A and B, each serving two sessions
// where find is followed by get of the id find returned (too few for
// either to mine alone), publish what they record; A's final checkpoint
// mines the fleet's traffic and shares the pool; C, started after both
// have stopped, loads it before it serves, and its first session's get is
// reused from speculation.
func TestFleetLearnsForNewReplica(t *testing.T) {
	hub, err := fleet.Join(t.Context(), &fleet.Options{Name: "fl", Replica: "hub", Embedded: &fleet.Embedded{Listen: "127.0.0.1:0", Dir: t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	defer hub.Close()
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var args struct{ Q, ID string }
		json.NewDecoder(r.Body).Decode(&args)
		if strings.HasSuffix(r.URL.Path, "/find") {
			fmt.Fprintf(w, `{"id":"k-%s"}`, args.Q)
			return
		}
		fmt.Fprintf(w, "record %s", args.ID)
	}))
	defer backend.Close()
	open := func(name string) *Stack {
		dir := t.TempDir()
		cfg, err := (&config.Loader{Dir: dir}).Parse(name+".yaml", []byte(`
patterns: ./pool.json
backends: {db: {http: {url: "`+backend.URL+`/tools/{tool}"}}}
speculation_policy: {tools: {find: {allow: true}, get: {allow: true}}}
fleet: {url: "`+hub.URL()+`", name: fl, fence_timeout: 2s}
`))
		if err != nil {
			t.Fatal(err)
		}
		st, err := Open(t.Context(), cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	call := func(st *Stack, session, tool, args string) engine.Result {
		t.Helper()
		res, err := st.Engine().Call(t.Context(), session, tool, json.RawMessage(args))
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Engine().Predicted(t.Context()); err != nil {
			t.Fatal(err)
		}
		return res
	}
	session := func(st *Stack, id string, i int) engine.Result {
		call(st, id, "find", fmt.Sprintf(`{"q":"q%c"}`, 'a'+i))
		res := call(st, id, "get", fmt.Sprintf(`{"id":"k-q%c"}`, 'a'+i))
		st.Engine().EndSession(id)
		return res
	}
	a, b := open("a"), open("b")
	for i := range 4 {
		st := a
		if i%2 == 1 {
			st = b
		}
		session(st, fmt.Sprint("s", i), i)
	}
	// B first: its final checkpoint takes the lease, mines and gives it
	// up as it leaves; A's then mines again, from the pool B shared.
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}

	c := open("c")
	defer c.Close()
	if c.Patterns() == 0 {
		t.Fatal("C started with no patterns: the fleet's pool was not loaded")
	}
	ls := fleetStats(c.fleet, c.learning)().Learning
	if ls == nil || ls.PoolVersion != 2 || ls.PoolMiner != a.fleet.Replica() {
		t.Errorf("C's fleet learning stats %+v, want pool version 2 mined by A (%s)", ls, a.fleet.Replica())
	}
	if err := c.fleet.Ready(t.Context()); err != nil {
		t.Fatal(err) // fences fail until the replica has caught up
	}
	// fence_timeout is 2 s above: the default 5 ms fence can time out
	// on a busy machine under -race, and the call then runs (a miss).
	if res := session(c, "c-first", 7); res.Source != engine.Reused && res.Source != engine.Promoted {
		t.Errorf("C's first session: get was %s, want reused or promoted (predicted from the fleet's pool)", res.Source)
	}
}

// TestFleetLearnsAcrossMCPProcesses: ahead mcp serves one session per
// process, so a pool learns across processes only from what they share.
// Three ahead mcp runs in one fleet, each one session of one call, each
// mining the fleet's traffic at exit (the lease given up by the last):
// after the third the fleet's pool predicts the session's first call, and
// a fourth run loads it before it serves.
func TestFleetLearnsAcrossMCPProcesses(t *testing.T) {
	hub, err := fleet.Join(t.Context(), &fleet.Options{Name: "mcpfl", Replica: "hub", Embedded: &fleet.Embedded{Listen: "127.0.0.1:0", Dir: t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	defer hub.Close()
	lrn, err := hub.Learning(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer lrn.Close()
	run := func(i int) {
		t.Helper()
		pool := filepath.Join(t.TempDir(), "pool.json")
		cfg := &config.Config{
			Upstreams:        []mcpproxy.Upstream{fsUpstream(t)},
			TrustAnnotations: true,
			Patterns:         &config.Patterns{Pool: pool, Learn: true, Checkpoint: pool, CheckpointEvery: time.Hour},
			Fleet:            &config.Fleet{URL: hub.URL(), Name: "mcpfl", ShareConversation: true},
		}
		agentIn, serverOut := io.Pipe()
		serverIn, agentOut := io.Pipe()
		done := make(chan error, 1)
		go func() { // owned: joined below
			err := ServeMCP(t.Context(), cfg, serverIn, serverOut, nil)
			serverOut.Close()
			done <- err
		}()
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, &mcp.ClientOptions{Logger: slog.New(slog.DiscardHandler)}).
			Connect(t.Context(), &mcp.IOTransport{Reader: agentIn, Writer: agentOut}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "list_directory", Arguments: map[string]any{"path": fmt.Sprintf("/src%d", i)}}); err != nil {
			t.Fatal(err)
		}
		cs.Close()
		if err := <-done; err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
	}
	for i := range 3 {
		run(i)
	}
	pool, pi, err := lrn.Load(t.Context())
	if err != nil || pool == nil {
		t.Fatalf("the fleet's pool after 3 runs: %v, %v", pool, err)
	}
	found := false
	for _, pt := range pool.Patterns {
		found = found || (pt.Tool == "list_directory" && len(pt.Context) == 1 && pt.Context[0].Start)
	}
	if !found || pi.Version < 1 {
		t.Errorf("pool version %d with %d patterns, want the session start predicting list_directory", pi.Version, len(pool.Patterns))
	}
	run(3) // loads it first: an error there fails the run
}
