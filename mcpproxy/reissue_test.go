package mcpproxy

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ahead-dev/ahead/engine"
)

// Issue 26 item 4: a broken response stream re-issued by the client as a
// new request with the same call joins the call still running upstream
// (engine/orphan.go) instead of running it twice.

// charge is an upstream whose one tool, "charge", is a write that signals
// when it starts and waits for release: a slow write whose requester can
// be cut off while it runs.
type charge struct {
	runs    atomic.Int32
	started chan struct{} // one value per run that started
	release chan struct{} // closed (let) to let every run finish
	once    sync.Once
	cut     chan struct{} // one value per run cancelled before release
}

// let lets every run finish, now and from now on.
func (c *charge) let() { c.once.Do(func() { close(c.release) }) }

func newCharge() *charge {
	return &charge{started: make(chan struct{}, 8), release: make(chan struct{}), cut: make(chan struct{}, 8)}
}

func (c *charge) transport() (mcp.Transport, error) {
	s := mcp.NewServer(&mcp.Implementation{Name: "payments", Version: "1"}, &mcp.ServerOptions{Logger: slog.New(slog.DiscardHandler)})
	mcp.AddTool(s, &mcp.Tool{Name: "charge", Description: "charge a card",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: new(true), OpenWorldHint: new(true)}},
		func(ctx context.Context, req *mcp.CallToolRequest, a struct {
			Amount int `json:"amount"`
		}) (*mcp.CallToolResult, any, error) {
			n := c.runs.Add(1)
			c.started <- struct{}{}
			select {
			case <-c.release:
			case <-ctx.Done(): // ahead cut the call: its agent cancelled it
				c.cut <- struct{}{}
				return nil, nil, ctx.Err()
			}
			return nil, map[string]any{"charged": a.Amount, "run": n}, nil
		})
	ct, st := mcp.NewInMemoryTransports()
	if _, err := s.Connect(context.Background(), st, nil); err != nil {
		return nil, err
	}
	return ct, nil
}

// orphanSignal is a log handler that tells when the engine has orphaned
// a call (its debug line "orphaned").
type orphanSignal struct{ ch chan struct{} }

func (h orphanSignal) Enabled(context.Context, slog.Level) bool { return true }
func (h orphanSignal) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "orphaned" {
		h.ch <- struct{}{}
	}
	return nil
}
func (h orphanSignal) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h orphanSignal) WithGroup(string) slog.Handler      { return h }

// awaitOrphan waits for the engine to orphan a call; a guard, not a
// synchronisation: without it a front that never tells the engine its
// requester left would hang the test instead of failing it.
func awaitOrphan(t *testing.T, orphaned chan struct{}) {
	t.Helper()
	select {
	case <-orphaned:
	case <-time.After(30 * time.Second):
		t.Fatal("the engine never saw the requester leave: the cut call was not orphaned")
	}
}

// reissueRig is ahead's /mcp in front of a charge upstream, with an engine
// whose debug log says when a call is orphaned.
func reissueRig(t *testing.T) (*charge, *httptest.Server, *engine.Engine, chan struct{}) {
	t.Helper()
	up := newCharge()
	p, err := New(&Options{
		Upstreams: []Upstream{{Name: "pay", Transport: up.transport, TrustAnnotations: true}},
		Logger:    slog.New(slog.DiscardHandler),
		Stderr:    io.Discard,
	})
	if err != nil {
		t.Fatal(err)
	}
	tools, err := p.TrustedTools(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	orphaned := make(chan struct{}, 8)
	eng := engine.New(&engine.Options{
		Backends: p.Backends(),
		Route:    p.Route,
		Policy:   AnnotationPolicy(nil, tools),
		Logger:   slog.New(orphanSignal{orphaned}),
	})
	p.Attach(eng)
	front := httptest.NewServer(p.Handler())
	t.Cleanup(func() {
		up.let()
		front.Close()
		p.Close()
		eng.Close()
	})
	return up, front, eng, orphaned
}

const chargeCall = `{"jsonrpc":"2.0","id":%ID%,"method":"tools/call","params":{"name":"charge","arguments":{"amount":42},
	"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},
	"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"}}}}`

// postCharge sends the charge call as a 2026-07-28 client would, over a
// connection of its own, in the run named run.
func postCharge(ctx context.Context, url, id, run string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(strings.Replace(chargeCall, "%ID%", id, 1)))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", newEraVersion)
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", "charge")
	req.Header.Set(SessionHeader, run)
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	return hc.Do(req)
}

// TestReissueNewEra: a 2026-07-28 client's tools/call whose connection is
// cut while the upstream runs a slow write, re-issued as a new request
// with the same arguments in the same run: the upstream runs it once, and
// the re-issued request gets its result, marked joined.
func TestReissueNewEra(t *testing.T) {
	up, front, eng, orphaned := reissueRig(t)

	ctx, cut := context.WithCancel(t.Context())
	first := make(chan error, 1)
	go func() {
		resp, err := postCharge(ctx, front.URL, "1", "run-r")
		if err == nil {
			resp.Body.Close()
		}
		first <- err
	}()
	<-up.started
	cut() // the response stream breaks: the client closes the connection
	if err := <-first; err == nil {
		t.Fatal("the cut request got a response")
	}
	awaitOrphan(t, orphaned) // ahead saw its requester leave; the write runs on

	type answer struct {
		raw []byte
		err error
	}
	second := make(chan answer, 1)
	go func() {
		resp, err := postCharge(t.Context(), front.URL, "2", "run-r")
		if err != nil {
			second <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		second <- answer{raw: responseOf(t, resp)}
	}()
	// Whether the re-issue arrives while the write runs or just after it
	// finished, it joins it: the write must not run again.
	up.let()
	a := <-second
	if a.err != nil {
		t.Fatal(a.err)
	}
	var msg struct {
		Result struct {
			Structured map[string]any `json:"structuredContent"`
			Meta       map[string]any `json:"_meta"`
			ResultType string         `json:"resultType"`
		} `json:"result"`
	}
	if err := json.Unmarshal(a.raw, &msg); err != nil {
		t.Fatalf("%v: %s", err, a.raw)
	}
	if ahead, _ := msg.Result.Meta["ahead"].(map[string]any); ahead["source"] != string(engine.Joined) {
		t.Errorf("_meta.ahead = %v, want source joined: %s", msg.Result.Meta["ahead"], a.raw)
	}
	if msg.Result.Structured["charged"] != float64(42) || msg.Result.Structured["run"] != float64(1) || msg.Result.ResultType != "complete" {
		t.Errorf("result %s, want the first run's charge of 42, complete", a.raw)
	}
	if n := up.runs.Load(); n != 1 {
		t.Errorf("the upstream charged %d times, want once", n)
	}
	if st := eng.Stats(); st.Orphaned != 1 || st.Joined != 1 || st.Executed != 1 {
		t.Errorf("orphaned %d, joined %d, executed %d; want 1 each", st.Orphaned, st.Joined, st.Executed)
	}
}

// TestReissueOldEra: over a 2025-11-25 session (Mcp-Session-Id), a call
// ends early only when the agent cancels it (notifications/cancelled; the
// SDK keeps a call whose stream broke running, answered to no one): the
// cancellation reaches the upstream, which stops, as without ahead, and
// the same call made again is a call of its own.
func TestReissueOldEra(t *testing.T) {
	up, front, eng, _ := reissueRig(t)
	cs := newEraClient(t, front.URL, agentProtocol, nil)

	ctx, cancel := context.WithCancel(t.Context())
	first := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "charge", Arguments: map[string]any{"amount": 42}})
		first <- err
	}()
	<-up.started
	cancel()
	if err := <-first; err == nil {
		t.Fatal("the cancelled call got a result")
	}
	select {
	case <-up.cut:
	case <-time.After(30 * time.Second):
		t.Fatal("the agent's cancellation never reached the upstream")
	}

	again := make(chan error, 1)
	var res *mcp.CallToolResult
	go func() {
		var err error
		res, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "charge", Arguments: map[string]any{"amount": 42}})
		again <- err
	}()
	<-up.started // it runs again: the agent asked for it twice
	up.let()
	if err := <-again; err != nil {
		t.Fatal(err)
	}
	if src := sourceOf(res); src != string(engine.Executed) {
		t.Errorf("the call made again: source %s, want executed", src)
	}
	if n := up.runs.Load(); n != 2 {
		t.Errorf("the upstream ran charge %d times, want twice", n)
	}
	if st := eng.Stats(); st.Orphaned != 0 || st.Joined != 0 {
		t.Errorf("orphaned %d, joined %d; want none", st.Orphaned, st.Joined)
	}
}
