package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ahead-dev/ahead/backend"
	"github.com/ahead-dev/ahead/engine"
	"github.com/ahead-dev/ahead/httpapi"
)

// tools is an in-process backend covering every kind of answer a backend
// gives: JSON and text outputs, a tool's own failure, an unreachable
// backend and a backend timeout.
var tools = backend.Funcs{
	"echo": func(ctx context.Context, args json.RawMessage) (string, error) {
		return string(args), nil
	},
	"text": func(ctx context.Context, args json.RawMessage) (string, error) {
		return "plain <text>\nline 2", nil
	},
	"number_text": func(ctx context.Context, args json.RawMessage) (string, error) {
		return " 42 ", nil
	},
	"fail": func(ctx context.Context, args json.RawMessage) (string, error) {
		return "", errors.New("no such file")
	},
}

// brokenBackend fails to run tools at all: a backend that is down, or one
// that times out.
type brokenBackend struct{ err error }

func (b brokenBackend) Call(ctx context.Context, req backend.Request) (backend.Response, error) {
	return backend.Response{}, b.err
}

// quiet keeps the expected warnings about unserved calls out of test logs.
var quiet = slog.New(slog.DiscardHandler)

func newHandler(eng httpapi.Engine, opts httpapi.Options) *httpapi.Handler {
	opts.Logger = quiet
	return httpapi.New(eng, &opts)
}

func newEngine(t *testing.T, reg prometheus.Registerer) *engine.Engine {
	t.Helper()
	eng := engine.New(&engine.Options{
		Backends: map[string]engine.Backend{
			"local":   {Backend: tools, Tools: []string{"echo", "text", "number_text", "fail"}},
			"down":    {Backend: brokenBackend{errors.New("dial tcp 127.0.0.1:9: connection refused")}, Tools: []string{"down"}},
			"timeout": {Backend: brokenBackend{context.DeadlineExceeded}, Tools: []string{"slow"}},
			"remote":  {Backend: brokenBackend{fmt.Errorf("remote: sleepy: no response within 10s: %w", backend.ErrTimeout)}, Tools: []string{"sleepy"}},
		},
		Registerer: reg,
	})
	t.Cleanup(eng.Close)
	return eng
}

type answer struct {
	Code int
	Body string // compact JSON, or text for non-JSON answers
}

func do(t *testing.T, h http.Handler, method, path, body string) answer {
	t.Helper()
	req := httptest.NewRequestWithContext(t.Context(), method, path, strings.NewReader(body))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	got := strings.TrimSpace(rec.Body.String())
	if strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") {
		var v any
		if err := json.Unmarshal(rec.Body.Bytes(), &v); err != nil {
			t.Fatalf("%s %s: answer is not JSON: %v\n%s", method, path, err, got)
		}
	}
	return answer{rec.Code, got}
}

func TestCalls(t *testing.T) {
	h := newHandler(newEngine(t, nil), httpapi.Options{MaxBodyBytes: 1 << 10})
	const calls = "/v1/sessions/s1/calls"
	for _, tc := range []struct {
		name string
		body string
		want answer
	}{
		{"json output is a JSON value", `{"tool": "echo", "args": {"b": [1, 2.50], "a": "x"}}`,
			answer{200, `{"tool":"echo","status":"ok","output":{"a":"x","b":[1,2.50]},"source":"executed","saved_ms":0,"seq":0}`}},
		{"text output is a string", `{"tool": "text", "args": {}}`,
			answer{200, `{"tool":"text","status":"ok","output":"plain <text>\nline 2","source":"executed","saved_ms":0,"seq":1}`}},
		{"json scalar output", `{"tool": "number_text"}`,
			answer{200, `{"tool":"number_text","status":"ok","output":42,"source":"executed","saved_ms":0,"seq":2}`}},
		{"null args", `{"tool": "echo", "args": null}`,
			answer{200, `{"tool":"echo","status":"ok","output":{},"source":"executed","saved_ms":0,"seq":3}`}},
		{"tool failure is a result", `{"tool": "fail", "args": {"path": "x"}}`,
			answer{200, `{"tool":"fail","status":"error","output":"no such file","source":"executed","saved_ms":0,"seq":4}`}},
		{"unknown tool", `{"tool": "nope", "args": {}}`,
			answer{404, `{"error":"unknown tool \"nope\""}`}},
		{"backend unreachable", `{"tool": "down", "args": {}}`,
			answer{502, `{"error":"calling down: dial tcp 127.0.0.1:9: connection refused"}`}},
		{"backend timeout", `{"tool": "slow", "args": {}}`,
			answer{504, `{"error":"calling slow: context deadline exceeded"}`}},
		{"backend's own timeout", `{"tool": "sleepy", "args": {}}`,
			answer{504, `{"error":"calling sleepy: remote: sleepy: no response within 10s: backend timeout"}`}},
		{"empty body", ``,
			answer{400, `{"error":"bad request: empty body; want {\"tool\": \"...\", \"args\": {...}}"}`}},
		{"not json", `tool=echo`,
			answer{400, `{"error":"bad request: invalid JSON at offset 1: invalid character 'o' in literal true (expecting 'r')"}`}},
		{"truncated", `{"tool": "echo", "args": {"a": 1`,
			answer{400, `{"error":"bad request: unexpected end of JSON at offset 32"}`}},
		{"array body", `[{"tool": "echo"}]`,
			answer{400, `{"error":"bad request: body must be a JSON object {\"tool\": \"...\", \"args\": {...}}, got an array"}`}},
		{"unknown field", `{"tool": "echo", "arguments": {}}`,
			answer{400, `{"error":"bad request: unknown field \"arguments\" at offset 17 (want \"tool\" and \"args\")"}`}},
		{"missing tool", `{"args": {}}`,
			answer{400, `{"error":"bad request: missing field \"tool\""}`}},
		{"empty tool", `{"tool": ""}`,
			answer{400, `{"error":"bad request: \"tool\" must not be empty"}`}},
		{"tool not a string", `{"tool": 7}`,
			answer{400, `{"error":"bad request: \"tool\" must be a string, got a number"}`}},
		{"args an array", `{"tool": "echo", "args": [1]}`,
			answer{400, `{"error":"bad request: \"args\" must be a JSON object, got an array"}`}},
		{"args a string", `{"tool": "echo", "args": "{}"}`,
			answer{400, `{"error":"bad request: \"args\" must be a JSON object, got a string"}`}},
		{"duplicate tool", `{"tool": "echo", "tool": "fail"}`,
			answer{400, `{"error":"bad request: duplicate field \"tool\" at offset 17"}`}},
		{"duplicate arg key", `{"tool": "echo", "args": {"a": 1, "a": 2}}`,
			answer{400, `{"error":"calling echo: callkey: invalid arguments: duplicate key \"a\" in the object at offset 0"}`}},
		{"trailing data", `{"tool": "echo"} {}`,
			answer{400, `{"error":"bad request: invalid JSON at offset 17: invalid character '{' after top-level value"}`}},
		{"invalid utf-8", "{\"tool\": \"ec\xffho\"}",
			answer{400, `{"error":"bad request: invalid UTF-8 at offset 12"}`}},
		{"body over the limit", `{"tool": "echo", "args": {"a": "` + strings.Repeat("x", 1<<10) + `"}}`,
			answer{413, `{"error":"request body is larger than the limit of 1 KiB"}`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := do(t, h, "POST", calls, tc.body)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("POST %s %s: answer differs (-want +got):\n%s", calls, tc.body, diff)
			}
		})
	}
}

// TestDefaultBodyLimit checks the 8 MiB default, announced and streamed.
// (Bodies are only read up to the limit, so this stays fast under -race;
// the boundary itself is checked with a small limit in TestBodyLimitExact.)
func TestDefaultBodyLimit(t *testing.T) {
	h := newHandler(newEngine(t, nil), httpapi.Options{})
	big := `{"tool": "echo", "args": {"a": "` + strings.Repeat("x", httpapi.DefaultMaxBodyBytes) + `"}}`
	for _, length := range []int64{int64(len(big)), -1} {
		req := httptest.NewRequestWithContext(t.Context(), "POST", "/v1/sessions/s/calls", strings.NewReader(big))
		req.ContentLength = length
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if want := `{"error":"request body is larger than the limit of 8 MiB"}`; rec.Code != 413 || strings.TrimSpace(rec.Body.String()) != want {
			t.Errorf("Content-Length %d: %d %s, want 413 %s", length, rec.Code, rec.Body, want)
		}
	}
}

func TestBodyLimitExact(t *testing.T) {
	body := `{"tool": "echo", "args": {"a": "xyz"}}`
	for _, tc := range []struct {
		limit int64
		code  int
	}{{int64(len(body)), 200}, {int64(len(body)) - 1, 413}} {
		h := newHandler(newEngine(t, nil), httpapi.Options{MaxBodyBytes: tc.limit})
		if got := do(t, h, "POST", "/v1/sessions/s/calls", body); got.Code != tc.code {
			t.Errorf("body of %d bytes, limit %d: code %d, want %d", len(body), tc.limit, got.Code, tc.code)
		}
	}
}

func TestEngineClosed(t *testing.T) {
	eng := newEngine(t, nil)
	h := newHandler(eng, httpapi.Options{})
	eng.Close()
	got := do(t, h, "POST", "/v1/sessions/s/calls", `{"tool": "echo"}`)
	if want := (answer{503, `{"error":"engine: closed"}`}); got != want {
		t.Errorf("after Close: %+v, want %+v", got, want)
	}
}

func TestClientGone(t *testing.T) {
	eng := engine.New(&engine.Options{Backends: map[string]engine.Backend{"b": {Backend: backend.Funcs{
		"wait": func(ctx context.Context, args json.RawMessage) (string, error) {
			<-ctx.Done()
			return "", ctx.Err()
		},
	}}}})
	t.Cleanup(eng.Close)
	h := newHandler(eng, httpapi.Options{})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
	defer cancel()
	req := httptest.NewRequestWithContext(ctx, "POST", "/v1/sessions/s/calls", strings.NewReader(`{"tool": "wait"}`))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != 499 {
		t.Errorf("code = %d, want 499 (client closed request); body %s", rec.Code, rec.Body)
	}
}

func TestSessionsStatsHealth(t *testing.T) {
	reg := prometheus.NewRegistry()
	eng := newEngine(t, reg)
	h := newHandler(eng, httpapi.Options{Gatherer: reg})
	for range 2 {
		if got := do(t, h, "POST", "/v1/sessions/a/calls", `{"tool": "echo", "args": {"q": 1}}`); got.Code != 200 {
			t.Fatalf("call: %+v", got)
		}
	}
	if got := do(t, h, "POST", "/v1/sessions/b/calls", `{"tool": "text"}`); got.Code != 200 {
		t.Fatalf("call: %+v", got)
	}
	if got, want := eng.Stats().Sessions, 2; got != want {
		t.Fatalf("sessions = %d, want %d", got, want)
	}

	if got := do(t, h, "DELETE", "/v1/sessions/a", ""); got != (answer{204, ""}) {
		t.Errorf("DELETE: %+v, want 204", got)
	}
	if got := do(t, h, "DELETE", "/v1/sessions/never-seen", ""); got != (answer{204, ""}) {
		t.Errorf("DELETE unknown session: %+v, want 204", got)
	}
	if got, want := eng.Stats().Sessions, 1; got != want {
		t.Errorf("sessions after DELETE = %d, want %d", got, want)
	}

	got := do(t, h, "GET", "/v1/stats", "")
	if got.Code != 200 {
		t.Fatalf("GET /v1/stats: %+v", got)
	}
	var st struct {
		Calls    int64 `json:"calls"`
		Executed int64 `json:"executed"`
		Sessions int   `json:"sessions"`
		Tools    map[string]struct {
			Calls    int64 `json:"calls"`
			Executed int64 `json:"executed"`
			Reused   int64 `json:"reused"`
		} `json:"tools"`
	}
	if err := json.Unmarshal([]byte(got.Body), &st); err != nil {
		t.Fatal(err)
	}
	if st.Calls != 3 || st.Executed != 3 || st.Sessions != 1 || st.Tools["echo"].Calls != 2 || st.Tools["text"].Executed != 1 {
		t.Errorf("stats = %s", got.Body)
	}

	if got := do(t, h, "GET", "/healthz", ""); got != (answer{200, `{"status":"ok"}`}) {
		t.Errorf("GET /healthz: %+v", got)
	}

	m := do(t, h, "GET", "/metrics", "")
	for _, want := range []string{
		`ahead_calls_total{source="executed",tool="echo"} 2`,
		`ahead_calls_total{source="executed",tool="text"} 1`,
		`ahead_call_duration_seconds_count{source="executed"} 3`,
		`ahead_backend_load{backend="local",kind="slots"} 0`,
	} {
		if m.Code != 200 || !strings.Contains(m.Body, want) {
			t.Errorf("GET /metrics: code %d, missing %q in\n%s", m.Code, want, m.Body)
		}
	}
}

func TestRoutes(t *testing.T) {
	h := newHandler(newEngine(t, nil), httpapi.Options{}) // no Gatherer: no /metrics
	for _, tc := range []struct {
		method, path string
		code         int
	}{
		{"GET", "/metrics", 404},
		{"GET", "/v1/sessions/s/calls", 405},
		{"PUT", "/v1/sessions/s", 405},
		{"POST", "/v1/stats", 405},
		{"GET", "/v1/nothing", 404},
		{"POST", "/v1/sessions/a/b/calls", 404},
	} {
		got := do(t, h, tc.method, tc.path, "")
		if got.Code != tc.code {
			t.Errorf("%s %s: code %d, want %d", tc.method, tc.path, got.Code, tc.code)
		}
		if !strings.HasPrefix(got.Body, `{"error":`) {
			t.Errorf("%s %s: answer %s, want a JSON error", tc.method, tc.path, got.Body)
		}
	}
}

// TestSessionIDs checks that session ids are non-empty, printable and
// bounded before they reach the engine, its logs and backends.
func TestSessionIDs(t *testing.T) {
	eng := newEngine(t, nil)
	h := newHandler(eng, httpapi.Options{})
	for _, tc := range []struct {
		path string
		code int
		err  string
	}{
		{"/v1/sessions//calls", 400, "session id is empty"},
		{"/v1/sessions/a%00b/calls", 400, "control"},
		{"/v1/sessions/a%1Bb/calls", 400, "control"},
		{"/v1/sessions/%FF/calls", 400, "UTF-8"},
		{"/v1/sessions/" + strings.Repeat("x", 257) + "/calls", 400, "257 bytes"},
		{"/v1/sessions/" + strings.Repeat("x", 256) + "/calls", 200, ""},
		{"/v1/sessions/caf%C3%A9%20run/calls", 200, ""},
	} {
		got := do(t, h, "POST", tc.path, `{"tool": "echo"}`)
		if got.Code != tc.code || !strings.Contains(got.Body, tc.err) {
			t.Errorf("%.50s: %+v, want %d with %q", tc.path, got, tc.code, tc.err)
		}
	}
	if n := eng.Stats().Sessions; n != 2 {
		t.Errorf("%d sessions reached the engine, want the 2 valid ones", n)
	}
}

// TestSessionFromPath checks that the session is the unescaped path
// segment, so any session id an agent uses round-trips.
func TestSessionFromPath(t *testing.T) {
	eng := newEngine(t, nil)
	h := newHandler(eng, httpapi.Options{})
	if got := do(t, h, "POST", "/v1/sessions/run%2F7%20b/calls", `{"tool": "echo"}`); got.Code != 200 {
		t.Fatalf("call: %+v", got)
	}
	if got := do(t, h, "DELETE", "/v1/sessions/run%2F7%20b", ""); got.Code != 204 {
		t.Fatalf("DELETE: %+v", got)
	}
	if n := eng.Stats().Sessions; n != 0 {
		t.Errorf("sessions after DELETE of the escaped id = %d, want 0", n)
	}
}

// blockingBody yields its bytes, then reports the client's hang-up: the
// rest of the declared length never comes.
type blockingBody struct{ data []byte }

func (b *blockingBody) Read(p []byte) (int, error) {
	if len(b.data) == 0 {
		return 0, io.ErrUnexpectedEOF
	}
	n := copy(p, b.data)
	b.data = b.data[n:]
	return n, nil
}

// TestDeclaredLengthNotAllocated: a body declaring 8 MiB that brings one
// byte costs what arrived, not what was declared (issue 23: 200 such
// connections took RSS to 1.6 GiB).
func TestDeclaredLengthNotAllocated(t *testing.T) {
	h := newHandler(newEngine(t, nil), httpapi.Options{})
	serve := func() {
		req := httptest.NewRequestWithContext(t.Context(), "POST", "/v1/sessions/s/calls", &blockingBody{data: []byte("{")})
		req.ContentLength = httpapi.DefaultMaxBodyBytes
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
	serve() // warm the pools
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	const n = 10
	for range n {
		serve()
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / n; per > 256<<10 {
		t.Errorf("a request declaring %d bytes and sending 1 allocated %d bytes, want at most 256 KiB", httpapi.DefaultMaxBodyBytes, per)
	}
}

// TestShedBusy: a call whose request the server sheds to make room
// (ahead serve's answer budget, cause ErrBusy) is answered 503, as one cut
// by a shutdown is, not 499 as one whose client left.
func TestShedBusy(t *testing.T) {
	eng := engine.New(&engine.Options{Backends: map[string]engine.Backend{"b": {Backend: backend.Funcs{
		"wait": func(ctx context.Context, args json.RawMessage) (string, error) {
			<-ctx.Done()
			return "", ctx.Err()
		},
	}}}})
	t.Cleanup(eng.Close)
	h := newHandler(eng, httpapi.Options{})
	ctx, shed := context.WithCancelCause(t.Context())
	req := httptest.NewRequestWithContext(ctx, "POST", "/v1/sessions/s/calls", strings.NewReader(`{"tool": "wait"}`))
	rec := httptest.NewRecorder()
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.ServeHTTP(rec, req)
	}()
	shed(httpapi.ErrBusy)
	<-done
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "busy") {
		t.Errorf("shed call: %d %s, want 503 saying busy", rec.Code, rec.Body)
	}
}
