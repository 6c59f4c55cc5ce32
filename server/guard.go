package server

import (
	"crypto/subtle"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// guard wraps the server's handler with what keeps a client from pinning
// it and, with a token, from using it at all:
//   - reading a request (headers and body) must end within readTimeout;
//   - each write of an answer must be taken by the client within
//     writeTimeout, renewed as each write succeeds, so that long tool calls
//     and model or MCP streams are never cut while they flow;
//   - with a token, every route but /healthz wants "Authorization: Bearer
//     TOKEN", or "Ahead-Authorization: Bearer TOKEN" (the model gateway's
//     Authorization header belongs to the model API and passes through).
func guard(h http.Handler, readTimeout, writeTimeout time.Duration, token string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		if token != "" && r.URL.Path != "/healthz" && !authorized(r, token) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="ahead"`)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprintln(w, `{"error":"missing or wrong token: send Authorization: Bearer TOKEN (or Ahead-Authorization on model API routes)"}`)
			return
		}
		r.Header.Del("Ahead-Authorization") // never forwarded
		if readTimeout > 0 && r.Body != nil && r.Body != http.NoBody {
			_ = rc.SetReadDeadline(time.Now().Add(readTimeout))
			r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc}
		}
		if writeTimeout > 0 {
			w = &deadlineWriter{ResponseWriter: w, rc: rc, d: writeTimeout}
		}
		h.ServeHTTP(w, r)
		// The connection may serve another request: no deadline of this
		// one may outlive it.
		_ = rc.SetWriteDeadline(time.Time{})
	})
}

func authorized(r *http.Request, token string) bool {
	for _, h := range []string{"Ahead-Authorization", "Authorization"} {
		got, ok := strings.CutPrefix(r.Header.Get(h), "Bearer ")
		if ok && subtle.ConstantTimeCompare([]byte(got), []byte(token)) == 1 {
			return true
		}
	}
	return false
}

// deadlineBody lifts the read deadline once the body is read whole: the
// time a tool takes afterwards is not the client's. A body that failed
// (the deadline passed) keeps it, so the server cannot wait on the rest.
type deadlineBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	done bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && !b.done {
		b.done = true
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// deadlineWriter gives each write its own deadline.
type deadlineWriter struct {
	http.ResponseWriter
	rc *http.ResponseController
	d  time.Duration
}

func (w *deadlineWriter) Write(p []byte) (int, error) {
	_ = w.rc.SetWriteDeadline(time.Now().Add(w.d))
	return w.ResponseWriter.Write(p)
}

func (w *deadlineWriter) Flush() {
	_ = w.rc.SetWriteDeadline(time.Now().Add(w.d))
	_ = w.rc.Flush()
}

// Unwrap lets http.ResponseController reach the connection.
func (w *deadlineWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
