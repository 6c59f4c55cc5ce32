package server

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
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
	srv := httptest.NewServer(guard(echoBody, guardOptions{ReadTimeout: 200 * time.Millisecond, WriteTimeout: time.Second}))
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
	srv := httptest.NewServer(guard(slow, guardOptions{ReadTimeout: 100 * time.Millisecond, WriteTimeout: 100 * time.Millisecond}))
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
	srv := httptest.NewServer(guard(big, guardOptions{ReadTimeout: time.Second, WriteTimeout: 200 * time.Millisecond}))
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
	srv := httptest.NewServer(guard(echoBody, guardOptions{ReadTimeout: time.Second, WriteTimeout: time.Second, Token: "s3cret"}))
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
