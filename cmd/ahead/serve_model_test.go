package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"
)

// echoBody answers with the request body once it has been read whole.
var echoBody = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	w.Write(b)
})

// TestGuardStalledBody checks that a client that sends its headers and
// then stalls its body cannot hold a connection past the read timeout.
func TestGuardStalledBody(t *testing.T) {
	srv := httptest.NewServer(guard(echoBody, 200*time.Millisecond, time.Second, ""))
	defer srv.Close()
	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"par")
	c.SetReadDeadline(time.Now().Add(10 * time.Second)) // a bound for a broken test, not a timing
	start := time.Now()
	_, err = io.ReadAll(c)
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		t.Fatalf("the server held the stalled connection for %v", time.Since(start))
	}
}

// TestGuardLongCallNotCut checks that the read timeout covers reading the
// request only: a handler that works longer than it still answers.
func TestGuardLongCallNotCut(t *testing.T) {
	slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		select {
		case <-time.After(400 * time.Millisecond): // a tool that takes longer than the read timeout
		case <-r.Context().Done():
			http.Error(w, "cancelled", 499)
			return
		}
		io.WriteString(w, "done")
	})
	srv := httptest.NewServer(guard(slow, 100*time.Millisecond, 100*time.Millisecond, ""))
	defer srv.Close()
	resp, err := http.Post(srv.URL, "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(b) != "done" {
		t.Errorf("long call: %d %q, want 200 done", resp.StatusCode, b)
	}
}

// TestGuardClientNotReading checks that a client that stops reading an
// answer is cut off after the write timeout rather than pinning memory.
func TestGuardClientNotReading(t *testing.T) {
	wrote := make(chan error, 1)
	big := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := []byte(strings.Repeat("x", 64<<10))
		for range 4096 { // 256 MiB: far more than socket buffers hold
			if _, err := w.Write(chunk); err != nil {
				wrote <- err
				return
			}
		}
		wrote <- nil
	})
	srv := httptest.NewServer(guard(big, time.Second, 200*time.Millisecond, ""))
	defer srv.Close()
	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	bufio.NewReader(c).Peek(1) // the answer started; now never read again
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	select {
	case err := <-wrote:
		if err == nil {
			t.Fatal("the handler wrote 256 MiB to a client that reads nothing")
		}
	case <-ctx.Done():
		t.Fatal("the handler is still blocked writing to a client that reads nothing")
	}
}

func TestGuardToken(t *testing.T) {
	srv := httptest.NewServer(guard(echoBody, time.Second, time.Second, "s3cret"))
	defer srv.Close()
	for _, tc := range []struct {
		path, header, value string
		code                int
	}{
		{"/v1/stats", "", "", 401},
		{"/v1/stats", "Authorization", "Bearer wrong", 401},
		{"/v1/stats", "Authorization", "Bearer s3cret", 200},
		{"/v1/chat/completions", "Ahead-Authorization", "Bearer s3cret", 200},
		{"/healthz", "", "", 200},
	} {
		req, _ := http.NewRequest("POST", srv.URL+tc.path, strings.NewReader("x"))
		if tc.header != "" {
			req.Header.Set(tc.header, tc.value)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.code {
			t.Errorf("%s with %s %q: %d, want %d", tc.path, tc.header, tc.value, resp.StatusCode, tc.code)
		}
		if tc.code == 401 && !strings.HasPrefix(string(b), `{"error":`) {
			t.Errorf("401 body %q is not a JSON error", b)
		}
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
