package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// versionedDB is an MCP server over streamable HTTP, in the test process,
// that two replicas share: find answers an id derived from its query, get
// a record's current version, put makes a new version; it counts the runs
// of each tool by id.
type versionedDB struct {
	url string

	mu       sync.Mutex // protects the fields below
	versions map[string]int
	runs     map[string]int // "tool id" → runs
}

func newVersionedDB(t *testing.T) *versionedDB {
	db := &versionedDB{versions: make(map[string]int), runs: make(map[string]int)}
	srv := mcp.NewServer(&mcp.Implementation{Name: "db", Version: "1"}, nil)
	for _, tool := range []string{"find", "get", "put"} {
		srv.AddTool(&mcp.Tool{Name: tool, InputSchema: map[string]any{"type": "object"}}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var a struct{ Q, ID string }
			json.Unmarshal(req.Params.Arguments, &a)
			db.mu.Lock()
			defer db.mu.Unlock()
			var out string
			switch tool {
			case "find":
				db.runs["find "+a.Q]++
				out = fmt.Sprintf(`{"id":"k-%s"}`, a.Q)
			case "get":
				db.runs["get "+a.ID]++
				out = fmt.Sprintf("record %s v%d", a.ID, db.versions[a.ID])
			case "put":
				db.runs["put "+a.ID]++
				db.versions[a.ID]++
				out = "ok"
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: out}}}, nil
		})
	}
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{Logger: slog.New(slog.DiscardHandler)}))
	t.Cleanup(hs.Close) // after the replicas stop (cleanups run last first): they hold streams open
	db.url = hs.URL
	return db
}

func (db *versionedDB) count(run string) int {
	db.mu.Lock()
	defer db.mu.Unlock()
	return db.runs[run]
}

// TestServeFleetSharesMCPResults: two `ahead serve` processes, A and B, in
// front of one MCP upstream whose get is marked shared: true, join a fleet
// on loopback and learn that find is followed by a get of the id found. A
// get that A ran ahead is then served to an agent of B from the fleet's
// results bucket, as the upstream answered it, without running it again; a
// put through B purges it, and the next get, on A, runs the tool and
// answers the new version.
func TestServeFleetSharesMCPResults(t *testing.T) {
	db := newVersionedDB(t)
	hub, lrn := fleetHub(t, "ps", time.Second)
	config := fmt.Sprintf(`listen: 127.0.0.1:0
mcpServers: {db: {url: %q}}
speculation_policy:
  tools:
    find: {allow: true}
    get: {allow: true, reads: id, shared: true}
    put: {writes: id}
patterns: {pool: ./pool.json, checkpoint_every: 100ms}
fleet: {url: %q, name: ps, fence_timeout: 2s, lease_ttl: 1s}
`, db.url, hub.URL())
	a := startReplicaProc(t, config)
	b := startReplicaProc(t, config)
	for i, p := range []*replicaProc{a, b, a, b} {
		if got := teach(t, p, fmt.Sprint("s", i), fmt.Sprint("q", i)); got.Code != 200 {
			t.Fatalf("session %d: get %+v", i, got)
		}
	}
	mark := storedCalls(t, lrn, 8)
	waitFor(t, "A and B serving a pool mined from every call", func() bool {
		return a.fleetStats(t).Learning.PoolMark >= mark && b.fleetStats(t).Learning.PoolMark >= mark
	})

	// A's agent finds q7: A runs the predicted get ahead and shares its
	// result.
	if got := call(t, a.url, "a1", `{"tool":"find","args":{"q":"q7"}}`); got.Code != 200 {
		t.Fatalf("find on A: %+v", got)
	}
	waitFor(t, "A to share the get it ran ahead", func() bool { return a.fleetStats(t).SharedResults["puts"] >= 1 })
	if n := db.count("get k-q7"); n != 1 {
		t.Fatalf("the upstream ran get k-q7 %d times, want once (A's speculation)", n)
	}
	// B's agent, which never found q7, gets k-q7: served from the bucket.
	got := call(t, b.url, "b1", `{"tool":"get","args":{"id":"k-q7"}}`)
	if got.Code != 200 || !strings.Contains(string(got.Output), "record k-q7 v0") || got.Source != "reused" {
		t.Errorf("B's get: %+v, want record k-q7 v0 reused from the fleet's bucket", got)
	}
	if n, hits := db.count("get k-q7"), b.fleetStats(t).SharedResults["hits"]; n != 1 || hits != 1 {
		t.Errorf("after B's get: the upstream ran get k-q7 %d times (want once), B's shared hits %d (want 1)", n, hits)
	}

	// A put through B purges the result from the bucket (and A, which
	// applies the write, drops its own). What A's agent then gets is the
	// new version: run by A, or by B ahead of its own agent's next get
	// (B's pool predicts a get after a put) and shared; never the old.
	if got := call(t, b.url, "b1", `{"tool":"put","args":{"id":"k-q7"}}`); got.Code != 200 {
		t.Fatalf("put on B: %+v", got)
	}
	waitFor(t, "B to purge the results the put may change", func() bool { return b.fleetStats(t).SharedResults["purges"] >= 1 })
	before := a.fleetStats(t)
	got = call(t, a.url, "a2", `{"tool":"get","args":{"id":"k-q7"}}`)
	if got.Code != 200 || !strings.Contains(string(got.Output), "record k-q7 v1") {
		t.Errorf("A's get after B's put: %+v, want record k-q7 v1", got)
	}
	if n := db.count("get k-q7"); n < 2 {
		t.Errorf("the upstream ran get k-q7 %d times, want the new version run", n)
	}
	// The old result purged: not found in the bucket (found, it would
	// have been refused for the write since).
	if after := a.fleetStats(t); after.SharedRefused["write"] != before.SharedRefused["write"] {
		t.Errorf("A refused %d results for a write since, was %d: the old result was still in the bucket",
			after.SharedRefused["write"], before.SharedRefused["write"])
	}
}
