package fleet_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ahead-dev/ahead/backend"
	"github.com/ahead-dev/ahead/callkey"
	"github.com/ahead-dev/ahead/engine"
	"github.com/ahead-dev/ahead/fleet"
	"github.com/ahead-dev/ahead/policy"
)

// TestSharedResultsDifferential: get is a shared tool and only replica 0
// speculates, so the other replicas' reads are served from the results it
// shares, while sessions on all three write the same keys: every read an
// agent receives equals the store's value at that moment. Reusing a shared
// result without checking the writes applied since its mark makes stale
// reads appear.
func TestSharedResultsDifferential(t *testing.T) { sharedDifferential(t, false) }

// TestSharedMCPResultsDifferential: the same with results in an MCP
// upstream's form (mcpStore): each one reused on another replica reaches
// the agent whole (structured content, content, _meta), and holds the
// store's value at that moment; unchecked, stale ones appear.
func TestSharedMCPResultsDifferential(t *testing.T) { sharedDifferential(t, true) }

func sharedDifferential(t *testing.T, mcpShaped bool) {
	sessions := 1500 // a round
	if raceEnabled || testing.Short() {
		sessions = 300
	}
	start := func(mut mutant) *replicas {
		r := newReplicas(t, 3, mut, "")
		r.mcpShaped = mcpShaped
		r.startAll(t)
		return r
	}
	// Fewer writes than the other tests (one step in 8, on 8 keys), so
	// that enough results survive from their put to a read on another
	// replica under -race too.
	//
	// Two rounds of sessions on the same replicas, each of which must see
	// the results shared reused: a replica whose puts fall behind (issue
	// 25: one request per put and per purge, a queue that grew every
	// round and never drained) shares results only after writes that make
	// every reader refuse them, and from its second round on had none
	// reused at all. With the puts and purges coalesced, 300 sessions
	// under -race beside three CPU hogs (load 16 to 20 on 2 cores) reuse
	// 190 to 250 a round (before: 30 to 70 in the first round of 450
	// sessions, none after).
	r := start(mutant{sharedGet: true})
	r.writeOneIn = 8
	var hits, puts, refused, purges int64
	var calls, reused, stale int64
	for round := range 2 {
		out := r.run(t, sessions, 6, 8, 24, 5+2*uint64(round), nil)
		calls, reused, stale = calls+out.calls, reused+out.reused, stale+out.stale
		if out.stale != 0 {
			t.Errorf("round %d: %d stale reads, first: %s", round, out.stale, out.firstStale)
		}
		before := hits
		hits, puts, refused, purges = 0, 0, 0, 0
		for i := range r.slots {
			st := r.slots[i].Load().f.Stats()
			t.Logf("round %d, replica %d: %d hits, %d puts (%d superseded, %d dropped), %d refused %v, %d purges",
				round, i, st.SharedHits, st.SharedPuts, st.ShareSuperseded, st.ShareDropped, st.SharedRefused, st.SharedRefusedBy, st.SharedPurges)
			hits += st.SharedHits
			puts += st.SharedPuts
			refused += st.SharedRefused
			purges += st.SharedPurges
		}
		if n := hits - before; n < int64(sessions)/10 {
			t.Errorf("round %d: only %d shared results reused: the test does not exercise them", round, n)
		}
	}
	t.Logf("%d sessions, %d calls: %d reused, %d stale; shared: %d puts, %d hits, %d refused, %d purges",
		2*sessions, calls, reused, stale, puts, hits, refused, purges)

	t.Run("no result check", func(t *testing.T) {
		r := start(mutant{sharedGet: true, noResultCheck: true})
		r.writeOneIn = 8
		out := r.run(t, sessions, 6, 8, 24, 6, nil)
		t.Logf("%d calls: %d reused, %d stale", out.calls, out.reused, out.stale)
		if out.stale == 0 {
			t.Error("reusing shared results unchecked left every read fresh: the differential test cannot see that rule")
		}
	})
}

// TestSharedResultNotPutStale: a result whose mark precedes a write this
// replica has applied is not put in the bucket (every reader would refuse
// it), however long it waited to be sent.
func TestSharedResultNotPutStale(t *testing.T) {
	ctx := t.Context()
	f := benchFleetT(t)
	get := policy.Tool{Reads: policy.Refs("key"), Shared: true}
	key, err := callkey.Make("get", args("a"))
	if err != nil {
		t.Fatal(err)
	}
	fp := get.Footprint(args("a"))
	mark, ok := f.Mark(ctx)
	if !ok {
		t.Fatal("no mark with the fleet up")
	}
	if err := f.Announce(ctx, "store", testPolicy.Lookup("put").Effect(args("a"))); err != nil {
		t.Fatal(err)
	}
	if err := f.Fence(ctx, "store"); err != nil { // the write applied
		t.Fatal(err)
	}
	f.Share("store", key, engine.SharedResult{Output: "a@0", Took: time.Millisecond, Expires: time.Now().Add(time.Minute), Footprint: fp}, mark)
	waitFor(t, func() bool { return f.Stats().ShareSuperseded == 1 })
	if st := f.Stats(); st.SharedPuts != 0 {
		t.Errorf("%d results put, want none: its mark precedes a write applied", st.SharedPuts)
	}
}

// TestSharedResultPurged: a write purges the results it may change from
// the bucket, and only those; with the purge removed, they stay.
func TestSharedResultPurged(t *testing.T) {
	for _, purge := range []bool{true, false} {
		t.Run(map[bool]string{true: "purge", false: "no purge"}[purge], func(t *testing.T) {
			ctx := t.Context()
			f := benchFleetT(t)
			if !purge {
				fleet.SetNoPurge(f)
			}
			get := policy.Tool{Reads: policy.Refs("key"), Shared: true}
			share := func(k string) (callkey.Key, policy.Footprint) {
				key, err := callkey.Make("get", args(k))
				if err != nil {
					t.Fatal(err)
				}
				fp := get.Footprint(args(k))
				mark, ok := f.Mark(ctx)
				if !ok {
					t.Fatal("no mark with the fleet up")
				}
				f.Share("store", key, engine.SharedResult{Output: k + "@0", Took: time.Millisecond, Expires: time.Now().Add(time.Minute), Footprint: fp}, mark)
				return key, fp
			}
			ka, fpa := share("a")
			kb, fpb := share("b")
			waitFor(t, func() bool { return f.Stats().SharedPuts == 2 })
			if _, ok := f.Lookup(ctx, "store", ka, fpa); !ok {
				t.Fatal("a shared result was not found")
			}
			if err := f.Announce(ctx, "store", testPolicy.Lookup("put").Effect(args("a"))); err != nil {
				t.Fatal(err)
			}
			// Whether purged or not, a's result is never reused again.
			if _, ok := f.Lookup(ctx, "store", ka, fpa); ok {
				t.Error("a's result reused after a write of a")
			}
			if _, ok := f.Lookup(ctx, "store", kb, fpb); !ok {
				t.Error("b's result not found after a write of a")
			}
			if purge {
				waitFor(t, func() bool { return f.Stats().SharedPurges == 1 })
			}
			n, err := f.ResultKeys(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if want := map[bool]int{true: 1, false: 2}[purge]; n != want {
				t.Errorf("%d results in the bucket after a write of a, want %d", n, want)
			}
		})
	}
}

func benchFleetT(t *testing.T) *fleet.Fleet {
	t.Helper()
	f, err := fleet.Join(t.Context(), &fleet.Options{
		Name: "t", Replica: "a", Backends: []string{"store"}, FenceTimeout: time.Second, ShareResults: true,
		Embedded: &fleet.Embedded{Listen: "127.0.0.1:0", Dir: t.TempDir()},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	f.Start(applierFunc(func(string, policy.Effect) {}))
	waitConnected(t, f)
	return f
}

// waitFor waits until cond holds, for at most 10 s: the background sends
// of a fleet have no other signal.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(time.Millisecond)
	}
}

// mcpStore is the store answering as an MCP upstream does: its result's
// front-specific form (backend.Response.Raw) is the whole CallToolResult,
// structured content and all, which a front hands the agent; like the MCP
// proxy's upstreams it is a backend.RawCodec, so that the form travels
// between replicas.
type mcpStore struct{ backend.Funcs }

var _ backend.RawCodec = mcpStore{}

func (m mcpStore) Call(ctx context.Context, req backend.Request) (backend.Response, error) {
	resp, err := m.Funcs.Call(ctx, req)
	if err != nil {
		return resp, err
	}
	resp.Raw = &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: "value: " + resp.Output}},
		StructuredContent: map[string]any{"value": resp.Output},
		Meta:              mcp.Meta{"store": "test"},
	}
	resp.Output = "rendered " + resp.Output // not what the agent is given
	return resp, nil
}

func (mcpStore) EncodeRaw(raw any) (json.RawMessage, error) { return json.Marshal(raw) }

func (mcpStore) DecodeRaw(data json.RawMessage) (any, error) {
	var r mcp.CallToolResult
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// valueOf is the value an MCP-shaped result holds, as the agent receives
// it; a result in another shape (rendered to text) holds none.
func valueOf(raw any) string {
	r, ok := raw.(*mcp.CallToolResult)
	if !ok || r == nil {
		return fmt.Sprintf("(not an MCP result: %T)", raw)
	}
	sc, _ := r.StructuredContent.(map[string]any)
	v, _ := sc["value"].(string)
	if len(r.Content) != 1 || r.Meta["store"] != "test" {
		return fmt.Sprintf("(an MCP result reshaped: %+v)", r)
	}
	if tc, ok := r.Content[0].(*mcp.TextContent); !ok || tc.Text != "value: "+v {
		return fmt.Sprintf("(an MCP result whose text is not its value: %+v)", r.Content[0])
	}
	return v
}
