package remote

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ahead-dev/ahead/backend"
)

func TestCallResponses(t *testing.T) {
	long := strings.Repeat("é", 5000) // 10,000 bytes
	tests := []struct {
		name    string
		handler http.HandlerFunc
		opts    Options
		want    backend.Response
	}{
		{"ok json", func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, `{"hits":3}`)
		}, Options{}, backend.Response{Output: `{"hits":3}`}},
		{"created text", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusCreated)
			io.WriteString(w, "made it")
		}, Options{}, backend.Response{Output: "made it"}},
		{"no content", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusNoContent)
		}, Options{}, backend.Response{}},
		{"not found", func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "no such tool", http.StatusNotFound)
		}, Options{}, backend.Response{IsError: true, Output: "HTTP 404 Not Found: no such tool\n"}},
		{"server error without body", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusInternalServerError)
		}, Options{}, backend.Response{IsError: true, Output: "HTTP 500 Internal Server Error"}},
		{"long error body truncated on a rune boundary", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusBadGateway)
			io.WriteString(w, long)
		}, Options{MaxErrorBytes: 101}, backend.Response{IsError: true, Output: "HTTP 502 Bad Gateway: " + strings.Repeat("é", 50) + "… (100 of 10000 bytes)"}},
		{"429 with seconds", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", "7")
			http.Error(w, "slow down", http.StatusTooManyRequests)
		}, Options{}, backend.Response{IsError: true, Output: "HTTP 429 Too Many Requests: slow down\n", RetryAfter: 7 * time.Second}},
		{"429 without header", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusTooManyRequests)
		}, Options{}, backend.Response{IsError: true, Output: "HTTP 429 Too Many Requests", RetryAfter: time.Second}},
		{"503 with far date capped", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", time.Now().Add(48*time.Hour).UTC().Format(http.TimeFormat))
			w.WriteHeader(http.StatusServiceUnavailable)
		}, Options{}, backend.Response{IsError: true, Output: "HTTP 503 Service Unavailable", RetryAfter: 10 * time.Minute}},
		{"ok with retry after", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", "2")
			io.WriteString(w, "ok")
		}, Options{}, backend.Response{Output: "ok", RetryAfter: 2 * time.Second}},
		{"garbage retry after ignored", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", "soon")
			io.WriteString(w, "ok")
		}, Options{}, backend.Response{Output: "ok"}},
		{"redirect not followed", func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/elsewhere" {
				t.Error("redirect followed")
			}
			http.Redirect(w, r, "/elsewhere", http.StatusFound)
		}, Options{}, backend.Response{IsError: true, Output: "HTTP 302 Found"}},
		{"over limit with length", func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, strings.Repeat("x", 2000))
		}, Options{MaxResponseBytes: 1000}, backend.Response{IsError: true, Output: "HTTP 200 OK: response of 2000 bytes is over the 1000-byte limit"}},
		{"over limit streamed", func(w http.ResponseWriter, r *http.Request) {
			for range 20 {
				io.WriteString(w, strings.Repeat("x", 100))
				w.(http.Flusher).Flush() // no Content-Length
			}
		}, Options{MaxResponseBytes: 1000}, backend.Response{IsError: true, Output: "HTTP 200 OK: response over the 1000-byte limit"}},
		{"exactly at limit", func(w http.ResponseWriter, r *http.Request) {
			w.(http.Flusher).Flush()
			io.WriteString(w, strings.Repeat("x", 1000))
		}, Options{MaxResponseBytes: 1000}, backend.Response{Output: strings.Repeat("x", 1000)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(tt.handler)
			defer srv.Close()
			b, err := New(srv.URL+"/tools/{tool}", &tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			got, err := b.Call(t.Context(), backend.Request{Tool: "search", Args: []byte(`{"q":"x"}`)})
			if err != nil {
				t.Fatalf("Call: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Call mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCallRequest(t *testing.T) {
	type seen struct {
		Method, URI, ContentType, Auth, Tool, Body, Spec string
	}
	var (
		mu  sync.Mutex
		got []seen
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, seen{r.Method, r.RequestURI, r.Header.Get("Content-Type"), r.Header.Get("Authorization"), r.Header.Get("X-Tenant"), string(body), r.Header.Get("Ahead-Speculative")})
		mu.Unlock()
	}))
	defer srv.Close()
	hdr := http.Header{"Authorization": {"Bearer s3cret"}, "X-Tenant": {"t1"}}
	b, err := New(srv.URL+"/v1/{tool}/run?name={tool}", &Options{Header: hdr})
	if err != nil {
		t.Fatal(err)
	}
	hdr.Set("X-Tenant", "changed after New") // New copies the header
	for _, req := range []backend.Request{
		{Tool: "search", Args: []byte(`{"q":"go"}`)},
		{Tool: "a/b c&d=e", Args: []byte(`{}`)},
		{Tool: "noargs"},
		{Tool: "..", Args: []byte(`{}`)},
		{Tool: "search", Args: []byte(`{"q":"go"}`), Speculative: true},
	} {
		if _, err := b.Call(t.Context(), req); err != nil {
			t.Fatalf("Call(%s): %v", req.Tool, err)
		}
	}
	want := []seen{
		{"POST", "/v1/search/run?name=search", "application/json", "Bearer s3cret", "t1", `{"q":"go"}`, ""},
		{"POST", "/v1/a%2Fb%20c&d=e/run?name=a%2Fb+c%26d%3De", "application/json", "Bearer s3cret", "t1", `{}`, ""},
		{"POST", "/v1/noargs/run?name=noargs", "application/json", "Bearer s3cret", "t1", `{}`, ""},
		{"POST", "/v1/%2E%2E/run?name=..", "application/json", "Bearer s3cret", "t1", `{}`, ""},
		{"POST", "/v1/search/run?name=search", "application/json", "Bearer s3cret", "t1", `{"q":"go"}`, "1"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}

func TestCallTimeout(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Never answers; ends when the client gives up. (The server notices
		// a closed connection only once the request body has been read.)
		io.ReadAll(r.Body)
		<-r.Context().Done()
	}))
	defer srv.Close()
	b, err := New(srv.URL+"/{tool}", &Options{Timeout: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.Call(t.Context(), backend.Request{Tool: "slow"})
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("Call = %v, want ErrTimeout", err)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a per-call timeout must not look like the caller's context ending: %v", err)
	}
	if !strings.Contains(err.Error(), "slow: no response within 20ms") {
		t.Errorf("error %q does not say which tool and how long", err)
	}
}

func TestCallCancel(t *testing.T) {
	started := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		close(started)
		<-r.Context().Done()
	}))
	defer srv.Close()
	b, err := New(srv.URL+"/{tool}", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := b.Call(ctx, backend.Request{Tool: "slow"})
		errc <- err
	}()
	<-started
	cancel()
	if err := <-errc; err != context.Canceled {
		t.Errorf("Call after cancel = %v, want context.Canceled itself", err)
	}
}

func TestCallTransportFailure(t *testing.T) {
	// A port nothing listens on: take one, then close it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	b, err := New("http://"+addr+"/{tool}", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := b.Call(t.Context(), backend.Request{Tool: "search"})
	if err == nil {
		t.Fatalf("Call to a closed port = %+v, want an error", resp)
	}
	if errors.Is(err, ErrTimeout) || errors.Is(err, context.Canceled) {
		t.Errorf("transport failure reported as %v", err)
	}
	if !strings.Contains(err.Error(), "remote: search:") {
		t.Errorf("error %q does not name the tool", err)
	}
	if err := b.Warmup(t.Context(), backend.Request{Tool: "search"}); err == nil {
		t.Error("Warmup of a closed port succeeded")
	}
}

func TestCallDroppedConnection(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100")
		io.WriteString(w, "partial")
		panic(http.ErrAbortHandler) // cut the body short
	}))
	defer srv.Close()
	b, _ := New(srv.URL+"/{tool}", nil)
	if resp, err := b.Call(t.Context(), backend.Request{Tool: "t"}); err == nil {
		t.Errorf("Call with a truncated body = %+v, want an error", resp)
	}
}

func TestWarmup(t *testing.T) {
	var handled, conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handled.Add(1)
		io.WriteString(w, "ran "+r.URL.Path)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	b, err := New(srv.URL+"/tools/{tool}", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Warmup(t.Context(), backend.Request{Tool: "delete_everything"}); err != nil {
		t.Fatalf("Warmup: %v", err)
	}
	if n := handled.Load(); n != 0 {
		t.Fatalf("Warmup reached the handler %d times; it must never run a tool", n)
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("Warmup opened %d connections, want 1", n)
	}
	resp, err := b.Call(t.Context(), backend.Request{Tool: "search"})
	if err != nil || resp.Output != "ran /tools/search" {
		t.Fatalf("Call = %+v, %v", resp, err)
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("the call after Warmup opened a new connection (%d in all); want the warm one reused", n)
	}
}

func TestNew(t *testing.T) {
	for _, tmpl := range []string{
		"http://127.0.0.1:9000/{tool}",
		"https://tools.example/api/v1/{tool}?mode=fast",
		"http://[::1]:9000/call",
		"http://localhost/run?tool={tool}",
	} {
		if _, err := New(tmpl, nil); err != nil {
			t.Errorf("New(%q): %v", tmpl, err)
		}
	}
	for tmpl, want := range map[string]string{
		"127.0.0.1:9000/{tool}":       "bad URL template",
		"localhost/{tool}":            "want an http or https URL",
		"ftp://host/{tool}":           "want an http or https URL",
		"http:///{tool}":              "no host",
		"http://{tool}.example.com/":  "not the host",
		"http://host:{tool}/":         "",
		"http://host/{tool}#frag":     "a fragment is never sent",
		"http://host/%zz/{tool}":      "invalid URL escape",
		"http://user:{tool}@host/x/y": "not the host",
	} {
		_, err := New(tmpl, nil)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("New(%q) = %v, want an error containing %q", tmpl, err, want)
		}
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 300e6, time.UTC)
	tests := []struct {
		in     string
		want   time.Duration
		wantOK bool
	}{
		{"120", 2 * time.Minute, true},
		{" 5 ", 5 * time.Second, true},
		{"0", 0, false},
		{"999999999999", maxRetryAfter, true},
		{"99999999999999999999999", 0, false}, // not a uint64: not a date either
		{"-1", 0, false},
		{"1.5", 0, false},
		{"Sun, 01 Mar 2026 12:00:30 GMT", 30 * time.Second, true}, // 29.7 s, rounded up
		{"Sunday, 01-Mar-26 12:01:00 GMT", time.Minute, true},     // RFC 850
		{"Sun Mar  1 12:00:10 2026", 10 * time.Second, true},      // asctime
		{"Sun, 01 Mar 2026 11:00:00 GMT", 0, false},               // past
		{"tomorrow", 0, false},
		{"", 0, false},
	}
	for _, tt := range tests {
		got, ok := parseRetryAfter(tt.in, now)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("parseRetryAfter(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.wantOK)
		}
	}
}

func TestTruncate(t *testing.T) {
	for _, tt := range []struct {
		in   string
		max  int
		want string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"0123456789abc", 10, "0123456789… (10 of 13 bytes)"},
		{"ab€cd", 3, "ab… (2 of 7 bytes)"}, // never split the euro sign
		{"€€", 1, "… (0 of 6 bytes)"},
	} {
		if got := truncate([]byte(tt.in), tt.max); got != tt.want {
			t.Errorf("truncate(%q, %d) = %q, want %q", tt.in, tt.max, got, tt.want)
		}
	}
}

// BenchmarkCall measures the backend's cost per call against a loopback
// server that answers at once: request building, one keep-alive round
// trip, and reading the body.
func BenchmarkCall(b *testing.B) {
	out := strings.Repeat(`{"title":"result","url":"https://example.com/"},`, 20)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, out)
	}))
	defer srv.Close()
	be, err := New(srv.URL+"/tools/{tool}", nil)
	if err != nil {
		b.Fatal(err)
	}
	defer be.Close()
	req := backend.Request{Tool: "web_search", Args: []byte(`{"max_results":10,"query":"golang canonical json"}`)}
	b.ReportAllocs()
	for b.Loop() {
		if resp, err := be.Call(b.Context(), req); err != nil || resp.IsError {
			b.Fatal(resp, err)
		}
	}
}

func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{"0", "120", "Sun, 01 Mar 2026 12:00:30 GMT", "Sun Mar  1 12:00:10 2026", "-1", "", "18446744073709551616"} {
		f.Add(s)
	}
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, v string) {
		d, ok := parseRetryAfter(v, now)
		if d < 0 || d > maxRetryAfter || ok != (d > 0) {
			t.Errorf("parseRetryAfter(%q) = %v, %v; want 0 < d <= %v exactly when ok", v, d, ok, maxRetryAfter)
		}
	})
}
