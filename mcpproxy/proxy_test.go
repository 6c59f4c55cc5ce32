package mcpproxy

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ahead-dev/ahead/backend"
	"github.com/ahead-dev/ahead/policy"
	"github.com/ahead-dev/ahead/predict"
	"github.com/ahead-dev/ahead/sched"
)

func TestThroughAheadEqualsDirect(t *testing.T) {
	r := newRig(t, rigOptions{})
	via, direct := r.connect(nil), r.direct(nil)

	if got, want := via.InitializeResult().ServerInfo.Name, "testfs"; got != want {
		t.Errorf("server name through ahead = %q, want the upstream's %q", got, want)
	}
	if got, want := via.InitializeResult().Instructions, "use list before read"; got != want {
		t.Errorf("instructions = %q, want %q", got, want)
	}

	lv, err := via.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ld, err := direct.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wire(t, ld.Tools), wire(t, lv.Tools)); diff != "" {
		t.Errorf("tools/list through ahead differs from direct (-direct +ahead):\n%s", diff)
	}

	calls := []struct {
		tool string
		args any
	}{
		{"list", map[string]any{}},
		{"read", map[string]any{"name": "a.txt"}},
		{"read", map[string]any{"name": "missing"}}, // a tool error
		{"write", map[string]any{"name": "c.txt", "text": "gamma"}},
		{"read", map[string]any{"name": "c.txt"}},
		{"list", nil},
	}
	for _, c := range calls {
		gv, src := call(t, via, c.tool, c.args)
		gd, _ := call(t, direct, c.tool, c.args)
		if src != "executed" {
			t.Errorf("%s: _meta.ahead.source = %q, want executed (no predictor)", c.tool, src)
		}
		// saved_ms is a number in every answer, as over HTTP (issue 14).
		if a, _ := gv.Meta["ahead"].(map[string]any); a["saved_ms"] != 0.0 {
			t.Errorf("%s: _meta.ahead.saved_ms = %#v, want 0.0", c.tool, a["saved_ms"])
		}
		if diff := cmp.Diff(wire(t, gd), wire(t, withoutAhead(gv))); diff != "" {
			t.Errorf("%s %v through ahead differs from direct (-direct +ahead):\n%s", c.tool, c.args, diff)
		}
	}

	// Prompts, resources, templates and completion pass through.
	pv, err := via.GetPrompt(t.Context(), &mcp.GetPromptParams{Name: "greet", Arguments: map[string]string{"who": "bob"}})
	if err != nil {
		t.Fatal(err)
	}
	pd, _ := direct.GetPrompt(t.Context(), &mcp.GetPromptParams{Name: "greet", Arguments: map[string]string{"who": "bob"}})
	if diff := cmp.Diff(wire(t, pd), wire(t, pv)); diff != "" {
		t.Errorf("prompts/get differs (-direct +ahead):\n%s", diff)
	}
	for _, uri := range []string{"test://motd", "test://files/b.txt"} {
		rv, err := via.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: uri})
		if err != nil {
			t.Fatalf("reading %s: %v", uri, err)
		}
		rd, _ := direct.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: uri})
		if diff := cmp.Diff(wire(t, rd), wire(t, rv)); diff != "" {
			t.Errorf("resources/read %s differs (-direct +ahead):\n%s", uri, diff)
		}
	}
	resv, err := via.ListResources(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	resd, _ := direct.ListResources(t.Context(), nil)
	if diff := cmp.Diff(wire(t, resd.Resources), wire(t, resv.Resources)); diff != "" {
		t.Errorf("resources/list differs (-direct +ahead):\n%s", diff)
	}
	tv, err := via.ListResourceTemplates(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(tv.ResourceTemplates) != 1 || tv.ResourceTemplates[0].URITemplate != "test://files/{name}" {
		t.Errorf("resources/templates/list = %+v", tv.ResourceTemplates)
	}
	cv, err := via.Complete(t.Context(), &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "greet"},
		Argument: mcp.CompleteParamsArgument{Name: "who", Value: "bo"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := cv.Completion.Values; !slices.Equal(got, []string{"bo-done"}) {
		t.Errorf("completion = %v, want [bo-done]", got)
	}
}

func TestErrorsPassThrough(t *testing.T) {
	r := newRig(t, rigOptions{})
	via, direct := r.connect(nil), r.direct(nil)
	_, errv := via.CallTool(t.Context(), &mcp.CallToolParams{Name: "nope"})
	_, errd := direct.CallTool(t.Context(), &mcp.CallToolParams{Name: "nope"})
	if errv == nil || errd == nil {
		t.Fatalf("unknown tool: got errors %v (ahead), %v (direct); want both", errv, errd)
	}
	wv, _ := errors.AsType[*jsonrpc.Error](errv)
	wd, _ := errors.AsType[*jsonrpc.Error](errd)
	if wv == nil || wd == nil || wv.Code != wd.Code {
		t.Errorf("unknown tool error through ahead = %v, direct = %v: want the same code", errv, errd)
	}
	// Arguments of the wrong type: the upstream's own validation answers.
	resv, errv := via.CallTool(t.Context(), &mcp.CallToolParams{Name: "read", Arguments: map[string]any{"name": 7}})
	resd, errd := direct.CallTool(t.Context(), &mcp.CallToolParams{Name: "read", Arguments: map[string]any{"name": 7}})
	if (errv == nil) != (errd == nil) {
		t.Fatalf("bad arguments: error through ahead %v, direct %v", errv, errd)
	}
	if errv == nil {
		if diff := cmp.Diff(wire(t, resd), wire(t, withoutAhead(resv))); diff != "" {
			t.Errorf("bad arguments result differs (-direct +ahead):\n%s", diff)
		}
	}
}

func TestPredictedReadIsReused(t *testing.T) {
	r := newRig(t, rigOptions{predictor: readAfterList})
	cs := r.connect(nil)
	if _, err := cs.ListTools(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	if _, src := call(t, cs, "list", map[string]any{}); src != "executed" {
		t.Errorf("list: source %q, want executed", src)
	}
	res, src := call(t, cs, "read", map[string]any{"name": "a.txt"})
	if src != "reused" && src != "promoted" {
		t.Errorf("predicted read: source %q, want reused or promoted", src)
	}
	if got := text(res); got != "alpha" {
		t.Errorf("predicted read = %q, want alpha", got)
	}
	st := r.up.files(r.up.connects - 1)
	st.mu.Lock()
	reads, writes := st.reads["a.txt"], st.write
	st.mu.Unlock()
	if reads != 1 {
		t.Errorf("upstream ran read(a.txt) %d times, want 1 (speculative, then handed over)", reads)
	}
	// After the read the predictor proposes a write: the policy (from
	// annotations) never lets it run speculatively.
	if _, src := call(t, cs, "list", nil); src != "executed" {
		t.Errorf("second list: source %q", src)
	}
	if writes != 0 {
		t.Errorf("upstream ran write %d times speculatively", writes)
	}
}

func TestWriteInvalidatesSpeculativeRead(t *testing.T) {
	r := newRig(t, rigOptions{predictor: readAfterList})
	cs := r.connect(nil)
	call(t, cs, "list", map[string]any{})
	// The speculative read(a.txt) may be done or running: the write must
	// throw it away either way.
	if _, src := call(t, cs, "write", map[string]any{"name": "a.txt", "text": "changed"}); src != "executed" {
		t.Errorf("write: source %q, want executed", src)
	}
	res, src := call(t, cs, "read", map[string]any{"name": "a.txt"})
	if src != "executed" {
		t.Errorf("read after write: source %q, want executed (the speculative read was invalidated)", src)
	}
	if got := text(res); got != "changed" {
		t.Errorf("read after write = %q, want changed", got)
	}
}

func TestSessionsHaveTheirOwnUpstream(t *testing.T) {
	r := newRig(t, rigOptions{predictor: readAfterList})
	a, b := r.connect(nil), r.connect(nil)
	call(t, a, "write", map[string]any{"name": "a.txt", "text": "only in a"})
	ra, _ := call(t, a, "read", map[string]any{"name": "a.txt"})
	rb, _ := call(t, b, "read", map[string]any{"name": "a.txt"})
	if text(ra) != "only in a" || text(rb) != "alpha" {
		t.Errorf("read in a = %q, in b = %q: want each session's own state", text(ra), text(rb))
	}
}

func TestForwardsProgressLoggingSamplingElicitationRoots(t *testing.T) {
	r := newRig(t, rigOptions{})
	a := &agent{}
	cs := r.connect(a)
	if err := cs.SetLoggingLevel(t.Context(), &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
		t.Fatal(err)
	}
	params := &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{}}
	params.SetProgressToken("tok-1")
	res, err := cs.CallTool(t.Context(), params)
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError {
		t.Fatalf("slow failed: %v", text(res))
	}
	// Notifications may be handled after the result they preceded.
	var progress, logs []string
	for deadline := time.Now().Add(10 * time.Second); ; {
		a.mu.Lock()
		progress, logs = slices.Clone(a.progress), slices.Clone(a.logs)
		a.mu.Unlock()
		if len(progress) > 0 && len(logs) > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if !slices.Equal(progress, []string{"tok-1:1/2 half"}) {
		t.Errorf("progress = %q, want the upstream's, with the agent's token", progress)
	}
	if !slices.Equal(logs, []string{"info slow started"}) {
		t.Errorf("logs = %q", logs)
	}

	res, _ = call(t, cs, "ask", map[string]any{})
	if res.IsError {
		t.Fatalf("ask failed: %s", text(res))
	}
	want := map[string]any{"sampled": "sampled!", "elicited": "ada", "roots": []any{"file:///work"}}
	if diff := cmp.Diff(wire(t, want), wire(t, res.StructuredContent)); diff != "" {
		t.Errorf("sampling/elicitation/roots through ahead (-want +got):\n%s", diff)
	}
}

func TestCancellationReachesUpstream(t *testing.T) {
	r := newRig(t, rigOptions{})
	r.up.release = make(chan struct{}) // never released: only cancellation ends slow
	cs := r.connect(nil)
	call(t, cs, "list", nil) // start the upstream
	ctx, cancel := contextWithCancel(t)
	done := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{}})
		done <- err
	}()
	cancel()
	select {
	case err := <-done:
		if err == nil {
			t.Errorf("cancelled call returned no error")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("cancelled call hangs")
	}
	// The upstream is still usable.
	if res, _ := call(t, cs, "read", map[string]any{"name": "b.txt"}); text(res) != "beta" {
		t.Errorf("after cancellation read = %q", text(res))
	}
}

func TestCrashedUpstreamRestartsWithBackoff(t *testing.T) {
	r := newRig(t, rigOptions{})
	cs := r.connect(nil)
	call(t, cs, "write", map[string]any{"name": "a.txt", "text": "lost"})
	r.up.kill()
	// The crash is noticed asynchronously; calls fail fast (never hang)
	// with an error naming the upstream until the backoff passes.
	r.waitCrashed(r.agentSessions()...)
	_, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "read", Arguments: map[string]any{"name": "a.txt"}})
	if err == nil || !strings.Contains(err.Error(), `upstream "fs"`) || !strings.Contains(err.Error(), "next start in") {
		t.Fatalf("call after a crash: err = %v, want an upstream-down error naming fs", err)
	}
	if we, ok := errors.AsType[*jsonrpc.Error](err); !ok || we.Code != jsonrpc.CodeInternalError {
		t.Errorf("error %v is not a JSON-RPC internal error", err)
	}
	r.clock.Add(time.Second) // past the first backoff (250 ms)
	res, src := call(t, cs, "read", map[string]any{"name": "a.txt"})
	if text(res) != "alpha" || src != "executed" {
		t.Errorf("after restart read = %q (%s), want a fresh upstream's alpha", text(res), src)
	}
	if got := r.up.connects; got < 3 { // probe, first start, restart
		t.Errorf("upstream connected %d times, want a restart", got)
	}

	// A start that fails backs off longer each time.
	r.up.mu.Lock()
	r.up.failConnect = true
	r.up.mu.Unlock()
	r.up.kill()
	r.waitCrashed(r.agentSessions()...)
	var delays []string
	for range 3 {
		r.clock.Add(time.Minute)
		// The start this call makes fails, and the next is due later.
		_, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "list", Arguments: map[string]any{}})
		if err == nil || !strings.Contains(err.Error(), "next start in") {
			t.Fatalf("call with a failing upstream: err = %v, want an upstream-down error", err)
		}
		_, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "list", Arguments: map[string]any{}})
		if err == nil {
			t.Fatal("call succeeded with a failing upstream")
		}
		delays = append(delays, err.Error()[strings.LastIndex(err.Error(), "next start in"):])
	}
	if delays[0] == delays[1] || delays[1] == delays[2] {
		t.Errorf("backoff does not grow: %q", delays)
	}
}

func TestSourceOnEveryResult(t *testing.T) {
	r := newRig(t, rigOptions{})
	cs := r.connect(nil)
	for _, c := range []string{"list", "read", "write"} {
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: c, Arguments: map[string]any{"name": "zz", "text": "t"}})
		if err != nil {
			t.Fatal(err)
		}
		if s := sourceOf(res); s != "executed" {
			t.Errorf("%s: _meta.ahead.source = %q", c, s)
		}
	}
}

func TestPrefixedTools(t *testing.T) {
	r := newRig(t, rigOptions{prefix: "fs_", policy: &policy.Policy{}})
	cs := r.connect(nil)
	lt, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range lt.Tools {
		names = append(names, tl.Name)
	}
	if want := []string{"fs_ask", "fs_list", "fs_read", "fs_slow", "fs_write"}; !slices.Equal(sorted(names), want) {
		t.Errorf("tools = %v, want %v", names, want)
	}
	if res, _ := call(t, cs, "fs_read", map[string]any{"name": "a.txt"}); text(res) != "alpha" {
		t.Errorf("fs_read = %q", text(res))
	}
	if _, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "read", Arguments: map[string]any{}}); err == nil {
		t.Errorf("the unprefixed name is callable")
	}
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// TestWarmupRestartsItsSessionOnly checks that a warm-up brings up the
// crashed upstream connection of the session it names, and no other.
func TestWarmupRestartsItsSessionOnly(t *testing.T) {
	r := newRig(t, rigOptions{})
	cs1, cs2 := r.connect(nil), r.connect(nil)
	call(t, cs1, "list", nil)
	call(t, cs2, "list", nil)
	r.proxy.mu.Lock()
	var ids []string
	for id := range r.proxy.byID {
		ids = append(ids, id)
	}
	r.proxy.mu.Unlock()
	if len(ids) != 2 {
		t.Fatalf("%d sessions, want 2", len(ids))
	}
	r.up.kill()
	r.waitCrashed(ids...)    // both sessions' connections are down
	r.clock.Add(time.Second) // past the backoff: both may restart
	b := r.proxy.Backends()[BackendName("fs")].Backend.(backend.Warmer)
	r.up.mu.Lock()
	before := r.up.connects
	r.up.mu.Unlock()
	if err := b.Warmup(t.Context(), backend.Request{Session: ids[0], Tool: "read"}); err != nil {
		t.Fatalf("Warmup: %v", err)
	}
	r.up.mu.Lock()
	after := r.up.connects
	r.up.mu.Unlock()
	if after != before+1 {
		t.Errorf("warm-up made %d upstream connections, want 1 (its own session's)", after-before)
	}
	// A session no MCP client has (the HTTP API's) warms up its own
	// connection (issue 27), which ends with the session.
	if err := b.Warmup(t.Context(), backend.Request{Session: "api-session", Tool: "read"}); err != nil {
		t.Errorf("Warmup of an HTTP API session: %v", err)
	}
	r.up.mu.Lock()
	if n := r.up.connects - after; n != 1 {
		t.Errorf("warm-up of an HTTP API session made %d upstream connections, want 1", n)
	}
	r.up.mu.Unlock()
	r.proxy.EndSession("api-session")
	r.proxy.mu.Lock()
	_, kept := r.proxy.byID["api-session"]
	r.proxy.mu.Unlock()
	if kept {
		t.Error("EndSession kept the HTTP API session")
	}
}

// firstList predicts a session's first call (a list) at its start.
type firstList struct{ predict.Func }

func (firstList) Start(string) []predict.Prediction {
	return []predict.Prediction{{Tool: "list", Args: json.RawMessage(`{}`), P: 0.9}}
}

// TestFirstCallSpeculatedAtInitialize checks that the engine hears of a
// session at initialize, so its first call can be ready when it comes.
func TestFirstCallSpeculatedAtInitialize(t *testing.T) {
	r := newRig(t, rigOptions{predictor: firstList{}})
	cs := r.connect(nil)
	// The speculative list runs in the background after initialize; the
	// first call finds it running or done.
	if _, src := call(t, cs, "list", map[string]any{}); src != "reused" && src != "promoted" {
		t.Errorf("first call: source %q, want reused or promoted", src)
	}
}

// TestPolicyFollowsListedAnnotations checks that tools a trusted upstream
// lists after startup get their annotation rules: without the startup
// probe, the engine denies everything until a session lists the tools.
func TestPolicyFollowsListedAnnotations(t *testing.T) {
	r := newRig(t, rigOptions{predictor: readAfterList, follow: true})
	cs := r.connect(nil)
	if _, err := cs.ListTools(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	call(t, cs, "list", map[string]any{})
	if _, src := call(t, cs, "read", map[string]any{"name": "a.txt"}); src != "reused" && src != "promoted" {
		t.Errorf("read after the listing's annotations allowed it: source %q, want reused or promoted", src)
	}
	st := r.up.files(r.up.connects - 1)
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.write != 0 {
		t.Errorf("write ran speculatively %d times: annotations must not allow it", st.write)
	}
}

// An upstream with slots holds a bounded queue; a call beyond it gets a
// clear error saying the upstream is busy and when to retry, and did not
// run.
func TestQueueFullIsAClearError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, rigOptions{limits: sched.Limits{Slots: 1, Queue: 1}})
		release := make(chan struct{})
		r.up.release = release
		cs := r.connect(nil)
		call(t, cs, "list", nil) // start the upstream
		errs := make(chan error, 2)
		for range 2 {
			go func() {
				_, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{}})
				errs <- err
			}()
			synctest.Wait() // the first runs, the second waits
		}
		_, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{}})
		we, ok := errors.AsType[*jsonrpc.Error](err)
		if !ok || !strings.Contains(we.Message, "busy") || !strings.Contains(string(we.Data), `"retry_after_ms":1000`) {
			t.Errorf("call beyond the queue: %v, want an error saying the upstream is busy, retry after 1000 ms", err)
		}
		close(release)
		for range 2 {
			if err := <-errs; err != nil {
				t.Errorf("queued call: %v", err)
			}
		}
	})
}

// TestOwnSessionReaped: a session without an MCP client (the HTTP API's)
// that has had no call for SessionTimeout is ended by the reaper, its
// upstream connection closed; one with a recent call is kept (issue 27).
func TestOwnSessionReaped(t *testing.T) {
	r := newRig(t, rigOptions{})
	b := r.proxy.Backends()[BackendName("fs")].Backend
	for _, id := range []string{"old", "recent"} {
		if _, err := b.Call(t.Context(), backend.Request{Session: id, Tool: "list", Args: []byte(`{}`)}); err != nil {
			t.Fatalf("call of session %s: %v", id, err)
		}
	}
	r.clock.Add(31 * time.Minute)
	_, release, err := r.proxy.holdSession("recent")
	if err != nil {
		t.Fatal(err)
	}
	release()
	r.proxy.reapIdle()
	r.proxy.mu.Lock()
	_, old := r.proxy.byID["old"]
	_, recent := r.proxy.byID["recent"]
	r.proxy.mu.Unlock()
	if old || !recent {
		t.Errorf("after 31 idle minutes: old kept %v, recent kept %v; want false, true", old, recent)
	}
}
