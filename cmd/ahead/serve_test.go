package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ahead-dev/ahead/mine"
	"github.com/ahead-dev/ahead/pattern"
	"github.com/ahead-dev/ahead/trace"
)

// toolServer is a real HTTP tool server on loopback. search returns JSON
// results, fetch a page; slow announces itself on arrived and answers when
// release is closed.
type toolServer struct {
	*httptest.Server
	arrived chan struct{}
	release chan struct{}
	mu      sync.Mutex // protects runs
	runs    map[string]int
}

func newToolServer(t *testing.T) *toolServer {
	ts := &toolServer{arrived: make(chan struct{}, 1), release: make(chan struct{}), runs: make(map[string]int)}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /tools/{tool}", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		tool := r.PathValue("tool")
		ts.mu.Lock()
		ts.runs[tool+string(body)]++
		ts.mu.Unlock()
		var args map[string]string
		json.Unmarshal(body, &args)
		switch tool {
		case "search":
			fmt.Fprintf(w, `{"results": [{"url": "https://%s.example/1"}, {"url": "https://%s.example/2"}]}`, args["q"], args["q"])
		case "fetch":
			fmt.Fprintf(w, "page at %s", args["url"])
		case "slow":
			ts.arrived <- struct{}{}
			<-ts.release
			fmt.Fprint(w, "done slowly")
		default:
			http.Error(w, "no such tool", http.StatusNotFound)
		}
	})
	ts.Server = httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	return ts
}

func (ts *toolServer) count(call string) int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.runs[call]
}

// minePool writes a pattern pool mined from sessions in which every
// search is followed by a fetch of its first result.
func minePool(t *testing.T, path string) {
	var sessions []trace.Session
	for i := range 8 {
		q := fmt.Sprintf("topic%d", i)
		sessions = append(sessions, trace.Session{ID: q, Events: []trace.Event{
			{Session: q, Seq: 0, Tool: "search", Args: json.RawMessage(`{"q":"` + q + `"}`), Status: trace.StatusOK,
				Output: `{"results": [{"url": "https://` + q + `.example/1"}, {"url": "https://` + q + `.example/2"}]}`},
			{Session: q, Seq: 1, Tool: "fetch", Args: json.RawMessage(`{"url":"https://` + q + `.example/1"}`), Status: trace.StatusOK,
				Output: "page"},
		}})
	}
	pool, err := mine.Mine(sessions, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := pool.Save(path); err != nil {
		t.Fatal(err)
	}
}

// served is `ahead serve` running through run, as main runs it.
type served struct {
	url    string
	cancel context.CancelFunc // SIGTERM
	code   chan int           // run's exit code
	mu     sync.Mutex         // protects log
	log    bytes.Buffer
}

var listening = regexp.MustCompile(`msg="ahead serve: listening" addr=(http://[0-9.:]+)`)

func startAheadServe(t *testing.T, args ...string) *served {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	pr, pw := io.Pipe()
	s := &served{cancel: cancel, code: make(chan int, 1)}
	logRead := make(chan struct{})
	go func() { // owned: ends when run returns and the pipe closes
		code := run(ctx, &env{stdin: strings.NewReader(""), stdout: io.Discard, stderr: pw}, append([]string{"serve"}, args...))
		pw.Close()
		<-logRead // the exit code comes after the whole log is read
		s.code <- code
	}()
	addr := make(chan string, 1)
	go func() { // owned: reads the log until the pipe closes
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			s.mu.Lock()
			s.log.WriteString(sc.Text() + "\n")
			s.mu.Unlock()
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
		close(addr)
		close(logRead)
	}()
	t.Cleanup(func() {
		cancel()
		<-s.code
	})
	u, ok := <-addr
	if !ok {
		code := <-s.code
		s.code <- code
		t.Fatalf("ahead serve exited with %d before listening:\n%s", code, s.logText())
	}
	s.url = u
	return s
}

func (s *served) logText() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.log.String()
}

type answer struct {
	Code    int
	Tool    string          `json:"tool"`
	Status  string          `json:"status"`
	Output  json.RawMessage `json:"output"`
	Source  string          `json:"source"`
	SavedMS float64         `json:"saved_ms"`
	Error   string          `json:"error"`
}

func call(t *testing.T, url, session, body string) answer {
	t.Helper()
	resp, err := http.Post(url+"/v1/sessions/"+session+"/calls", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var a answer
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
		t.Fatalf("POST %s: answer is not JSON: %v", body, err)
	}
	a.Code = resp.StatusCode
	return a
}

func getText(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	return string(b)
}

// waitFor polls cond, for conditions only real sockets and processes can
// bring about (synctest cannot run them); it fails the test after 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestServeEndToEnd runs `ahead serve` as a user would, through run, with a
// configuration in the shape of issue 2 §8 in front of a real HTTP tool
// server and a local command, a mined pattern pool and a trace directory.
func TestServeEndToEnd(t *testing.T) {
	tools := newToolServer(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "tool.sh"), []byte("#!/bin/sh\nprintf '{\"tool\": \"%s\", \"args\": %s}' \"$1\" \"$(cat)\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	minePool(t, filepath.Join(dir, "pool.json"))
	config := `
listen: 127.0.0.1:7777          # overridden by --listen
patterns: ./pool.json
traces: ./traces
max_body: 1KiB
shutdown_grace: 20s
backends:
  web:
    http: {url: "` + tools.URL + `/tools/{tool}", timeout: 10s, headers: {X-Ahead: test}}
    tools: [search, fetch, slow, missing]
    slots: 8
  local:
    exec: {command: ["./tool.sh", "{tool}"], timeout: 30s}
    tools: [shell]
speculation_policy:
  default: {allow: false}
  tools:
    search: {allow: true}
    fetch: {allow: true, reads: url}
engine: {spec_budget: 4, ttl: 60s, idle_timeout: 10m}
`
	cfgPath := filepath.Join(dir, "ahead.yaml")
	if err := os.WriteFile(cfgPath, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startAheadServe(t, "--config", cfgPath, "--listen", "127.0.0.1:0")

	// Executed, then the predicted fetch is reused.
	a := call(t, s.url, "agent", `{"tool": "search", "args": {"q": "rust"}}`)
	if a.Code != 200 || a.Source != "executed" || !strings.Contains(string(a.Output), `"url":"https://rust.example/1"`) {
		t.Fatalf("search: %+v", a)
	}
	waitFor(t, "the speculative fetches to complete", func() bool {
		var st struct{ Entries, Ready int }
		json.Unmarshal([]byte(getText(t, s.url+"/v1/stats")), &st)
		return st.Entries > 0 && st.Ready == st.Entries
	})
	a = call(t, s.url, "agent", `{"tool": "fetch", "args": {"url": "https://rust.example/1"}}`)
	if a.Code != 200 || a.Source != "reused" || string(a.Output) != `"page at https://rust.example/1"` {
		t.Errorf("fetch: %+v, want reused", a)
	}
	if n := tools.count(`fetch{"url":"https://rust.example/1"}`); n != 1 {
		t.Errorf("fetch ran %d times on the tool server, want 1", n)
	}
	// The exec backend, with its command relative to the configuration.
	a = call(t, s.url, "agent", `{"tool": "shell", "args": {"cmd": "ls"}}`)
	if a.Code != 200 || a.Status != "ok" || string(a.Output) != `{"tool":"shell","args":{"cmd":"ls"}}` {
		t.Errorf("shell: %+v", a)
	}
	// The backend's 404 is the tool's own failure: a result.
	if a := call(t, s.url, "agent", `{"tool": "missing"}`); a.Code != 200 || a.Status != "error" {
		t.Errorf("missing on the tool server: %+v, want 200 with status error", a)
	}
	for _, tc := range []struct {
		body string
		code int
		msg  string
	}{
		{`{"tool": "search", "args": [1]}`, 400, `bad request: "args" must be a JSON object, got an array`},
		{`{"tool": "search", "args": {"q": 1, "q": 2}}`, 400, `duplicate key "q"`},
		{`{"tool": "nope"}`, 404, `unknown tool "nope"`},
		{`{"tool": "search", "args": {"q": "` + strings.Repeat("x", 1024) + `"}}`, 413, "request body is larger than the limit of 1 KiB"},
	} {
		if a := call(t, s.url, "agent", tc.body); a.Code != tc.code || !strings.Contains(a.Error, tc.msg) {
			t.Errorf("POST %.40s: %d %q, want %d %q", tc.body, a.Code, a.Error, tc.code, tc.msg)
		}
	}
	if got := getText(t, s.url+"/healthz"); strings.TrimSpace(got) != `{"status":"ok"}` {
		t.Errorf("/healthz = %s", got)
	}
	metrics := getText(t, s.url+"/metrics")
	for _, want := range []string{
		`ahead_calls_total{source="reused",tool="fetch"} 1`,
		`ahead_calls_total{source="executed",tool="search"} 1`,
		`ahead_calls_total{source="executed",tool="shell"} 1`,
		`ahead_speculative_outcomes_total{outcome="reused",tool="fetch"} 1`,
		"go_goroutines ",
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}

	// SIGTERM with a call in flight: the server stops accepting, the call
	// finishes and is answered, and run exits 0.
	slow := make(chan answer, 1)
	go func() { slow <- call(t, s.url, "agent", `{"tool": "slow"}`) }()
	<-tools.arrived
	s.cancel()
	host := strings.TrimPrefix(s.url, "http://")
	waitFor(t, "the listener to close", func() bool {
		c, err := net.Dial("tcp", host)
		if err != nil {
			return true
		}
		c.Close()
		return false
	})
	select {
	case a := <-slow:
		t.Fatalf("the slow call was answered before its tool finished: %+v", a)
	case code := <-s.code:
		t.Fatalf("run exited with %d while a call was in flight", code)
	default:
	}
	close(tools.release)
	if a := <-slow; a.Code != 200 || a.Source != "executed" || string(a.Output) != `"done slowly"` {
		t.Errorf("call in flight at shutdown: %+v, want it answered in full", a)
	}
	code := <-s.code
	s.code <- code // for the cleanup
	if code != 0 {
		t.Fatalf("exit code %d, want 0; log:\n%s", code, s.logText())
	}

	// The traces hold every authoritative call, the one that finished
	// during shutdown included, and the speculative fetch.
	files, err := trace.Files(filepath.Join(dir, "traces"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	origins := map[string]int{}
	for ev, err := range trace.NewReader(nil).Events(files...) {
		if err != nil {
			t.Fatal(err)
		}
		kind := ev.Source
		if ev.Speculative {
			kind = "speculative " + ev.Outcome
			if ev.Origin != "" && ev.Origin != "pattern" {
				// The built-in default speaks for the tools the pool
				// does not know (it learns them as they are called):
				// how many guesses it makes, and how each ends
				// (invalidated by the next write, or left unclaimed at
				// shutdown), depends on when they are made beside the
				// agent's writes, so they are checked apart: reads
				// only, and none handed to the agent (its calls are
				// pinned below).
				origins[ev.Origin+" "+ev.Tool+" "+ev.Outcome]++
				continue
			}
		}
		got = append(got, ev.Tool+" "+kind)
	}
	for k := range origins {
		if f := strings.Fields(k); f[1] != "search" && f[1] != "fetch" || f[2] == "reused" || f[2] == "promoted" {
			t.Errorf("a guess of the built-in default: %q (%d), want reads of the tool server, none handed to the agent", k, origins[k])
		}
	}
	// The second result's fetch ran too (up to eight guesses per tool by
	// default) and the shell call, a write, invalidated it.
	want := []string{"search executed", "fetch speculative reused", "fetch reused", "fetch speculative invalidated", "shell executed", "missing executed", "slow executed"}
	if strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Errorf("traces hold %q, want %q", got, want)
	}
	// The pool was checkpointed at shutdown and still loads.
	if _, err := pattern.Load(filepath.Join(dir, "pool.json")); err != nil {
		t.Errorf("pool after the final checkpoint: %v", err)
	}
}

func TestServeErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("backends:\n  web:\n    http: {url: 'ftp://x/{tool}'}\n    slots: -1\n"), 0o644)
	// A pool that does not exist yet is the normal first state (it
	// learns); one that is not a pool is an error.
	badPool := filepath.Join(dir, "badpool.yaml")
	os.WriteFile(badPool, []byte("patterns: ./garbage.json\nbackends:\n  web:\n    http: {url: 'http://127.0.0.1:9/{tool}'}\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "garbage.json"), []byte("not a pool"), 0o644)
	badURL := filepath.Join(dir, "badurl.yaml")
	os.WriteFile(badURL, []byte("backends:\n  web:\n    http: {url: 'ftp://x/{tool}'}\n"), 0o644)
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"serve"}, 2, "--config is required"},
		{[]string{"serve", "--config", bad, "extra"}, 2, `unexpected arguments ["extra"]`},
		{[]string{"serve", "--config", bad, "--listen", "7777"}, 2, `--listen: want HOST:PORT, got "7777"`},
		{[]string{"serve", "--config", filepath.Join(dir, "none.yaml")}, 1, "reading config: open"},
		{[]string{"serve", "--config", bad}, 1, bad + ":4:12: backends.web.slots: must be at least 1, got -1"},
		{[]string{"serve", "--config", badURL, "--listen", "127.0.0.1:0"}, 1, badURL + `:3:17: backends.web.http.url: remote: bad URL template "ftp://x/{tool}": want an http or https URL`},
		{[]string{"serve", "--config", badPool, "--listen", "127.0.0.1:0"}, 1, "patterns: "},
	} {
		var stderr bytes.Buffer
		code := run(t.Context(), &env{stdin: strings.NewReader(""), stdout: io.Discard, stderr: &stderr}, tc.args)
		if code != tc.code || !strings.Contains(stderr.String(), tc.msg) {
			t.Errorf("ahead %q: exit %d, stderr:\n%s\nwant exit %d and %q", tc.args, code, stderr.String(), tc.code, tc.msg)
		}
	}
}

// TestServeListenerInUse checks that a taken port fails at once, before
// anything starts.
func TestServeListenerInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cfg := filepath.Join(t.TempDir(), "a.yaml")
	os.WriteFile(cfg, []byte("backends: {web: {http: {url: 'http://127.0.0.1:9/{tool}'}}}\n"), 0o644)
	var stderr bytes.Buffer
	code := run(t.Context(), &env{stdin: strings.NewReader(""), stdout: io.Discard, stderr: &stderr}, []string{"serve", "--config", cfg, "--listen", ln.Addr().String()})
	if code != 1 || !strings.Contains(stderr.String(), "address already in use") {
		t.Errorf("exit %d, stderr %s; want 1 and address already in use", code, stderr.String())
	}
}

// TestServeGraceExpires checks that a call still running when the grace
// period ends is cut off, answered 503 and recorded as failed, and that
// the exit says so (code 1).
func TestServeGraceExpires(t *testing.T) {
	tools := newToolServer(t)
	defer close(tools.release) // after the test: lets the tool server close
	dir := t.TempDir()
	cfg := filepath.Join(dir, "a.yaml")
	os.WriteFile(cfg, []byte("shutdown_grace: 50ms\ntraces: ./traces\nbackends: {web: {http: {url: '"+tools.URL+"/tools/{tool}'}}}\n"), 0o644)
	s := startAheadServe(t, "--config", cfg, "--listen", "127.0.0.1:0")
	slow := make(chan answer, 1)
	go func() {
		resp, err := http.Post(s.url+"/v1/sessions/a/calls", "application/json", strings.NewReader(`{"tool": "slow"}`))
		if err == nil {
			resp.Body.Close()
			slow <- answer{Code: resp.StatusCode}
			return
		}
		slow <- answer{Error: err.Error()}
	}()
	<-tools.arrived
	s.cancel()
	code := <-s.code
	s.code <- code
	if code != 1 || !strings.Contains(s.logText(), "shutdown: calls still in flight after 50ms were cancelled") {
		t.Errorf("exit %d, log:\n%s\nwant 1 and the calls cut off named", code, s.logText())
	}
	if a := <-slow; a.Code != http.StatusServiceUnavailable {
		t.Errorf("the cut-off call got %+v, want a 503", a)
	}
	var kinds []string
	for ev, err := range trace.NewReader(nil).Events(filepath.Join(dir, "traces")) {
		if err != nil {
			t.Fatal(err)
		}
		kinds = append(kinds, ev.Kind+" "+ev.Tool)
	}
	if !slices.Contains(kinds, "failed slow") {
		t.Errorf("traces hold %q, want the cut-off call recorded as failed", kinds)
	}
}

// TestServeSummary: at exit ahead serve prints the one-paragraph summary
// on stderr, unless --quiet; and a pool file that does not exist yet is
// written at the final checkpoint.
func TestServeSummary(t *testing.T) {
	tools := newToolServer(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "ahead.yaml")
	config := "patterns: ./new-pool.json\nbackends: {web: {http: {url: \"" + tools.URL + "/tools/{tool}\"}}}\n"
	if err := os.WriteFile(file, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, quiet := range []bool{false, true} {
		args := []string{"--config", file, "--listen", "127.0.0.1:0"}
		if quiet {
			args = append(args, "--quiet")
		}
		s := startAheadServe(t, args...)
		if a := call(t, s.url, "s1", `{"tool": "search", "args": {"q": "go"}}`); a.Code != 200 {
			t.Fatalf("call: %+v", a)
		}
		s.cancel()
		code := <-s.code
		s.code <- code
		log := s.logText()
		if code != 0 || strings.Contains(log, "ahead: 1 tool call: 1 executed") == quiet {
			t.Errorf("quiet %v: exit %d, stderr:\n%s", quiet, code, log)
		}
		if !quiet && !strings.Contains(log, "does not exist yet") {
			t.Errorf("no warning of the missing pool:\n%s", log)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "new-pool.json")); err != nil {
		t.Errorf("the pool was not written at exit: %v", err)
	}
}

func TestLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:7777": true, "[::1]:7777": true, "localhost:1": true,
		"0.0.0.0:7777": false, ":7777": false, "10.0.0.1:80": false,
	} {
		if got := loopback(addr); got != want {
			t.Errorf("loopback(%q) = %v, want %v", addr, got, want)
		}
	}
}

// TestServeRefusesOpenAddressWithoutToken checks that ahead serve does not
// open its tools to the network by accident.
func TestServeRefusesOpenAddressWithoutToken(t *testing.T) {
	dir := t.TempDir()
	cfg := dir + "/ahead.yaml"
	if err := os.WriteFile(cfg, []byte("backends: {b: {http: {url: 'http://127.0.0.1:9/{tool}'}}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	code := run(t.Context(), &env{stdout: &out, stderr: &out}, []string{"serve", "--config", cfg, "--listen", "0.0.0.0:0"})
	if code != 2 || !strings.Contains(out.String(), "without a token: set auth_token_env") {
		t.Errorf("exit %d, stderr %q; want 2 and a word about auth_token_env", code, out.String())
	}
}
