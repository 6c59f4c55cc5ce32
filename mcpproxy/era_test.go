package mcpproxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ahead-dev/ahead/engine"
	"github.com/ahead-dev/ahead/trace"
)

// events records what the engine records, for the sessions of runs.
type events struct {
	mu  sync.Mutex
	evs []trace.Event
}

func (e *events) Record(ev trace.Event) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.evs = append(e.evs, ev)
	return nil
}

// sessionsOf returns the sessions whose calls to tool were recorded.
func (e *events) sessionsOf(tool string) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for _, ev := range e.evs {
		if ev.Tool == tool && !slices.Contains(out, ev.Session) {
			out = append(out, ev.Session)
		}
	}
	return out
}

// newEraClient connects a Go SDK client speaking version over HTTP, with
// headers on every request.
func newEraClient(t *testing.T, url, version string, h http.Header) *mcp.ClientSession {
	t.Helper()
	hdr := map[string]string{}
	for k := range h {
		hdr[k] = h.Get(k)
	}
	hc := &http.Client{Transport: headerTransport{base: http.DefaultTransport, headers: hdr}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "2"}, &mcp.ClientOptions{Logger: slog.New(slog.DiscardHandler)}).
		Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

const testTraceID = "4bf92f3577b34da6a3ce929d0e0e4736"

// callMeta calls a tool with _meta and returns its result and source.
func callMeta(t *testing.T, cs *mcp.ClientSession, meta mcp.Meta, tool string, args any) (*mcp.CallToolResult, string) {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Meta: meta, Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("calling %s: %v", tool, err)
	}
	return res, sourceOf(res)
}

// TestNewEraHTTP: a Go SDK client speaking 2026-07-28 over streamable HTTP
// gets the revision; tools, prompts and resources pass through; a run
// named by Ahead-Session and one named only by a traceparent each get their
// second call served ahead, in upstream state of their own; a request that
// names no run gets no prediction from another; an older client on the
// same endpoint works as before; each run is recorded as its own session.
func TestNewEraHTTP(t *testing.T) {
	rec := &events{}
	r := newRig(t, rigOptions{predictor: readAfterList, recorder: rec})
	front := httptest.NewServer(r.proxy.Handler())
	t.Cleanup(front.Close)

	a := newEraClient(t, front.URL, newEraVersion, http.Header{SessionHeader: {"run-a"}})
	b := newEraClient(t, front.URL, newEraVersion, nil)
	anon := newEraClient(t, front.URL, newEraVersion, nil)
	old := newEraClient(t, front.URL, agentProtocol, nil)
	for name, cs := range map[string]*mcp.ClientSession{"a": a, "b": b, "old": old} {
		want := newEraVersion
		if cs == old {
			want = agentProtocol
		}
		if got := cs.InitializeResult().ProtocolVersion; got != want {
			t.Errorf("%s: protocol version %q, want %q", name, got, want)
		}
	}
	caps := a.InitializeResult().Capabilities
	if caps == nil || caps.Tools == nil || caps.Prompts == nil || caps.Resources == nil {
		t.Fatalf("server/discover capabilities = %+v, want the upstream's tools, prompts and resources", caps)
	}
	if !caps.Tools.ListChanged || caps.Logging != nil {
		t.Errorf("a stateless run is offered %+v: want list changes (on its listen), no logging", caps)
	}
	if info := a.InitializeResult().ServerInfo; info == nil || info.Name != "testfs" {
		t.Errorf("server info %+v, want the upstream's (testfs)", info)
	}

	tools, err := a.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(tools.Tools, func(x *mcp.Tool) bool { return x.Name == "read" }) || tools.CacheScope != "public" {
		t.Errorf("tools/list = %d tools, cache scope %q", len(tools.Tools), tools.CacheScope)
	}
	pr, err := a.GetPrompt(t.Context(), &mcp.GetPromptParams{Name: "greet", Arguments: map[string]string{"who": "ada"}})
	if err != nil || len(pr.Messages) != 1 || pr.Messages[0].Content.(*mcp.TextContent).Text != "hello ada" {
		t.Errorf("prompts/get = %+v, %v", pr, err)
	}
	rr, err := a.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: "test://motd"})
	if err != nil || len(rr.Contents) != 1 || rr.Contents[0].Text != "be kind" {
		t.Errorf("resources/read = %+v, %v", rr, err)
	}

	// Two runs at once: a's write stays in a's upstream state.
	call(t, a, "write", map[string]any{"name": "b.txt", "text": "only in a"})
	tp := mcp.Meta{"traceparent": "00-" + testTraceID + "-00f067aa0ba902b7-01"}
	if res, _ := callMeta(t, b, tp, "read", map[string]any{"name": "b.txt"}); text(res) != "beta" {
		t.Errorf("b sees a's write: %q", text(res))
	}
	for name, run := range map[string]struct {
		cs   *mcp.ClientSession
		meta mcp.Meta
	}{"Ahead-Session": {a, nil}, "traceparent": {b, tp}, "older client": {old, nil}} {
		callMeta(t, run.cs, run.meta, "list", map[string]any{})
		res, src := callMeta(t, run.cs, run.meta, "read", map[string]any{"name": "a.txt"})
		if text(res) != "alpha" || (src != "reused" && src != "promoted") {
			t.Errorf("%s: the predicted read = %q (%s), want alpha, reused or promoted", name, text(res), src)
		}
	}
	if res, _ := call(t, a, "read", map[string]any{"name": "b.txt"}); text(res) != "only in a" {
		t.Errorf("a lost its own write: %q", text(res))
	}

	// Requests that name no run share nothing: each is a run of its own.
	call(t, anon, "list", map[string]any{})
	if res, src := call(t, anon, "read", map[string]any{"name": "a.txt"}); text(res) != "alpha" || src != "executed" {
		t.Errorf("a read that names no run = %q (%s), want alpha, executed", text(res), src)
	}

	writes := rec.sessionsOf("write")
	if !slices.Equal(writes, []string{"run-a"}) {
		t.Errorf("write recorded in sessions %q, want [run-a]", writes)
	}
	lists := rec.sessionsOf("list")
	if len(lists) != 4 || !slices.Contains(lists, "run-a") || !slices.Contains(lists, "trace-"+testTraceID) {
		t.Errorf("list recorded in sessions %q, want run-a, trace-%s, the older client's and the unnamed request's", lists, testTraceID)
	}
}

// TestNewEraWire: what a 2026-07-28 client reads on the wire: a tools/call
// result forwarded from an older upstream says resultType complete and
// carries _meta.ahead; an older client's result has no resultType.
func TestNewEraWire(t *testing.T) {
	r := newRig(t, rigOptions{})
	front := httptest.NewServer(r.proxy.Handler())
	t.Cleanup(front.Close)

	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read","arguments":{"name":"a.txt"},
		"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},
		"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"}}}}`
	req, _ := http.NewRequestWithContext(t.Context(), "POST", front.URL, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", newEraVersion)
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", "read")
	req.Header.Set(SessionHeader, "wire")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw := responseOf(t, resp)
	var msg struct {
		Result map[string]any `json:"result"`
		Error  any            `json:"error"`
	}
	if err := json.Unmarshal(raw, &msg); err != nil {
		t.Fatalf("%v: %s", err, raw)
	}
	if msg.Result["resultType"] != "complete" {
		t.Errorf("resultType = %v, want complete: %s", msg.Result["resultType"], raw)
	}
	meta, _ := msg.Result["_meta"].(map[string]any)
	if ahead, _ := meta["ahead"].(map[string]any); ahead["source"] != "executed" {
		t.Errorf("_meta.ahead = %v, want source executed: %s", meta["ahead"], raw)
	}

	// A request whose Mcp-Name disagrees with its body is refused.
	req, _ = http.NewRequestWithContext(t.Context(), "POST", front.URL, strings.NewReader(body))
	req.Header = resp.Request.Header.Clone()
	req.Header.Set("Mcp-Name", "write")
	resp2, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp2.Body.Close()
	if resp2.StatusCode != http.StatusBadRequest {
		t.Errorf("Mcp-Name mismatch: status %d, want 400", resp2.StatusCode)
	}

	old := newEraClient(t, front.URL, agentProtocol, nil)
	res, _ := call(t, old, "read", map[string]any{"name": "a.txt"})
	b, _ := json.Marshal(res)
	if bytes.Contains(b, []byte("resultType")) {
		t.Errorf("an older client's result has a resultType: %s", b)
	}
}

// responseOf returns the JSON-RPC message of a streamable HTTP response
// (JSON, or the first data event of a stream).
func responseOf(t *testing.T, resp *http.Response) []byte {
	t.Helper()
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		return b
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok && strings.Contains(d, `"id"`) {
			return []byte(d)
		}
	}
	t.Fatalf("no response in the stream (status %d)", resp.StatusCode)
	return nil
}

// TestCompleted: a forwarded result is marked complete with every exported
// field kept and the original unchanged; input_required passes as is.
func TestCompleted(t *testing.T) {
	in := &mcp.CallToolResult{Meta: mcp.Meta{"k": "v"}, Content: []mcp.Content{&mcp.TextContent{Text: "x"}},
		StructuredContent: map[string]any{"a": 1}, IsError: true, RequestState: "s",
		InputRequests: mcp.InputRequestMap{"q": &mcp.ElicitParams{Message: "name?"}}}
	// Every exported field set: a field the SDK adds later must be copied too.
	v := reflect.ValueOf(in).Elem()
	for i := range v.NumField() {
		if f := v.Type().Field(i); f.IsExported() && v.Field(i).IsZero() {
			t.Fatalf("set %s in the test input", f.Name)
		}
	}
	out := completeResult(in).(*mcp.CallToolResult)
	got, _ := json.Marshal(out)
	want, _ := json.Marshal(in)
	var g, w map[string]any
	json.Unmarshal(got, &g)
	json.Unmarshal(want, &w)
	if g["resultType"] != "complete" {
		t.Errorf("resultType = %v, want complete", g["resultType"])
	}
	delete(g, "resultType")
	if !reflect.DeepEqual(g, w) {
		t.Errorf("completed result = %s, want %s plus resultType", got, want)
	}
	if bytes.Contains(want, []byte("resultType")) {
		t.Errorf("the original changed: %s", want)
	}
	for _, res := range []mcp.Result{&mcp.GetPromptResult{}, &mcp.ReadResourceResult{}} {
		b, _ := json.Marshal(completeResult(res))
		if !bytes.Contains(b, []byte(`"resultType":"complete"`)) {
			t.Errorf("%T completed = %s", res, b)
		}
	}
	var ir mcp.CallToolResult
	if err := json.Unmarshal([]byte(`{"content":[],"resultType":"input_required","inputRequests":{}}`), &ir); err != nil {
		t.Fatal(err)
	}
	if out := completeResult(&ir); out != mcp.Result(&ir) {
		t.Errorf("an input_required result was replaced")
	}
}

// TestTraceID: only a valid W3C traceparent names a run.
func TestTraceID(t *testing.T) {
	for tp, want := range map[string]string{
		"00-" + testTraceID + "-00f067aa0ba902b7-01":                  testTraceID,
		"01-" + testTraceID + "-00f067aa0ba902b7-01-xyz":              testTraceID, // a later version may add fields
		"00-" + testTraceID + "-00f067aa0ba902b7-01-xyz":              "",
		"ff-" + testTraceID + "-00f067aa0ba902b7-01":                  "",
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01":     "",
		"00-" + testTraceID + "-0000000000000000-01":                  "",
		"00-" + strings.ToUpper(testTraceID) + "-00f067aa0ba902b7-01": "",
		"00-" + testTraceID[:31] + "-00f067aa0ba902b7-01":             "",
		"": "",
	} {
		if got, _ := traceID(tp); got != want {
			t.Errorf("traceID(%q) = %q, want %q", tp, got, want)
		}
	}
}

// TestNewEraStdio: over stdio (here in memory) the process is the run: a Go
// SDK client speaking 2026-07-28 discovers, its calls pass through with
// resultType complete, and its second call is served ahead.
func TestNewEraStdio(t *testing.T) {
	r := newRig(t, rigOptions{predictor: readAfterList})
	ct, st := mcp.NewInMemoryTransports()
	done := make(chan error, 1)
	ctx, cancel := contextWithCancel(t)
	go func() { done <- r.proxy.Serve(ctx, st) }()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "2"}, &mcp.ClientOptions{Logger: slog.New(slog.DiscardHandler)}).
		Connect(t.Context(), ct, &mcp.ClientSessionOptions{ProtocolVersion: newEraVersion})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.Close()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	if got := cs.InitializeResult().ProtocolVersion; got != newEraVersion {
		t.Errorf("protocol version %q, want %s", got, newEraVersion)
	}
	if caps := cs.InitializeResult().Capabilities; caps == nil || caps.Tools == nil || caps.Prompts == nil {
		t.Errorf("capabilities %+v, want the upstream's", caps)
	}
	call(t, cs, "list", map[string]any{})
	res, src := call(t, cs, "read", map[string]any{"name": "a.txt"})
	if text(res) != "alpha" || (src != "reused" && src != "promoted") {
		t.Errorf("the predicted read = %q (%s), want alpha, reused or promoted", text(res), src)
	}
	if res.NeedsInput() {
		t.Errorf("a complete result reads as input_required")
	}
	if rr, err := cs.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: "test://motd"}); err != nil || rr.Contents[0].Text != "be kind" {
		t.Errorf("resources/read = %+v, %v", rr, err)
	}
}

// TestNewEraOlderHTTPUpstream: a 2026-07-28 agent through ahead to an HTTP
// upstream that keeps sessions: the agent's _meta about its own hop
// (protocol version, identity, capabilities) is not forwarded, so the
// upstream, reached with the handshake, serves its calls.
func TestNewEraOlderHTTPUpstream(t *testing.T) {
	ts := &testServer{}
	upstream := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server {
		ts.mu.Lock()
		defer ts.mu.Unlock()
		return ts.newServer(&files{data: map[string]string{"a.txt": "alpha"}, reads: map[string]int{}})
	}, &mcp.StreamableHTTPOptions{Logger: slog.New(slog.DiscardHandler)}))
	t.Cleanup(upstream.Close)
	p, err := New(&Options{Upstreams: []Upstream{{Name: "fs", URL: upstream.URL}}, Logger: slog.New(slog.DiscardHandler), Stderr: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	eng := engine.New(&engine.Options{Backends: p.Backends(), Route: p.Route, Logger: slog.New(slog.DiscardHandler)})
	p.Attach(eng)
	front := httptest.NewServer(p.Handler())
	t.Cleanup(func() {
		front.Close()
		p.Close()
		eng.Close()
	})
	cs := newEraClient(t, front.URL, newEraVersion, http.Header{SessionHeader: {"run"}})
	if res, _ := call(t, cs, "read", map[string]any{"name": "a.txt"}); text(res) != "alpha" {
		t.Errorf("read = %q, want alpha", text(res))
	}
	pr, err := cs.GetPrompt(t.Context(), &mcp.GetPromptParams{Name: "greet", Arguments: map[string]string{"who": "ada"}})
	if err != nil || len(pr.Messages) != 1 {
		t.Errorf("prompts/get = %+v, %v", pr, err)
	}
}

// TestNewEraTypeScript: the official TypeScript SDK v2 client, pinned to
// 2026-07-28, over streamable HTTP: it gets the revision, tools, prompts and
// resources pass through, and a run named by Ahead-Session and one named
// only by a traceparent each get their second call served ahead, in
// upstream state of their own (two runs at once).
func TestNewEraTypeScript(t *testing.T) {
	node, _ := testdeps(t)
	script, err := filepath.Abs(filepath.Join("testdata", "tsclient.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	client, err := filepath.Abs(filepath.Join("..", "testdeps", "node_modules", "@modelcontextprotocol", "client", "dist", "index.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	r := newRig(t, rigOptions{predictor: readAfterList})
	front := httptest.NewServer(r.proxy.Handler())
	t.Cleanup(front.Close)
	// a writes b.txt in its own state first: b must never see it.
	a := newEraClient(t, front.URL, newEraVersion, http.Header{SessionHeader: {"ts-a"}})
	call(t, a, "write", map[string]any{"name": "b.txt", "text": "only in a"})

	type seen struct {
		Version  string   `json:"version"`
		Tools    []string `json:"tools"`
		Prompt   string   `json:"prompt"`
		Resource string   `json:"resource"`
		List     struct{ Text, Source string }
		Read     struct{ Text, Source string }
		Mine     struct{ Text, Source string }
	}
	runs := map[string][]string{
		"Ahead-Session": {"ts-a", ""},
		"traceparent":   {"", "00-" + testTraceID + "-00f067aa0ba902b7-01"},
	}
	var wg sync.WaitGroup
	results := make(map[string]seen)
	var mu sync.Mutex
	for name, args := range runs {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, node, script, front.URL, args[0], args[1])
			cmd.Env = append(os.Environ(), "MCP_CLIENT=file://"+client)
			out, err := cmd.Output()
			if err != nil {
				var stderr []byte
				if ee, ok := err.(*exec.ExitError); ok {
					stderr = ee.Stderr
				}
				t.Errorf("%s: the TypeScript client: %v\n%s", name, err, stderr)
				return
			}
			var s seen
			if err := json.Unmarshal(out, &s); err != nil {
				t.Errorf("%s: %v: %s", name, err, out)
				return
			}
			mu.Lock()
			results[name] = s
			mu.Unlock()
		})
	}
	wg.Wait()
	for name, s := range results {
		if s.Version != newEraVersion {
			t.Errorf("%s: negotiated %q, want %s", name, s.Version, newEraVersion)
		}
		if !slices.Contains(s.Tools, "read") || s.Prompt != "hello ada" || s.Resource != "be kind" {
			t.Errorf("%s: tools %v, prompt %q, resource %q", name, s.Tools, s.Prompt, s.Resource)
		}
		if s.Read.Text != "alpha" || (s.Read.Source != "reused" && s.Read.Source != "promoted") {
			t.Errorf("%s: the read after list = %+v, want alpha, reused or promoted", name, s.Read)
		}
	}
	if got := results["Ahead-Session"].Mine.Text; got != "only in a" {
		t.Errorf("the run named ts-a reads b.txt = %q, want its own write", got)
	}
	if got := results["traceparent"].Mine.Text; got != "beta" {
		t.Errorf("the traceparent run reads b.txt = %q, want beta (not ts-a's write)", got)
	}
}
