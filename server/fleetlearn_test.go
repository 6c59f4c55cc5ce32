package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ahead-dev/ahead/config"
	"github.com/ahead-dev/ahead/engine"
	"github.com/ahead-dev/ahead/fleet"
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
	// B first: its final checkpoint takes the lease, A's then fails to.
	// Either way one of them mines, once.
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
	if ls == nil || ls.PoolVersion != 1 || ls.PoolMiner == "" || ls.PoolMiner == c.fleet.Replica() {
		t.Errorf("C's fleet learning stats %+v, want pool version 1 mined by A or B", ls)
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
