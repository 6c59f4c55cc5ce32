package server

import (
	"context"
	"crypto/subtle"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/ahead-dev/ahead/backend"
)

// guardOptions are what guard enforces; zero fields enforce nothing.
type guardOptions struct {
	ReadTimeout, WriteTimeout time.Duration
	// Token, if set, is wanted on every route but /healthz.
	Token string
	// Answers, if set, bounds the answer bytes being written (answers.go).
	Answers *answers
}

// guard wraps the server's handler with what keeps a client from pinning
// it and, with a token, from using it at all:
//   - reading a request (headers and body) must end within ReadTimeout;
//   - each write of an answer must be taken by the client within
//     WriteTimeout, renewed as each piece is taken, so that long tool calls
//     and model or MCP streams are never cut while they flow;
//   - the answer bytes being written, all clients together, stay within
//     Answers' budget: over it, the slowest readers are cut;
//   - with a token, every route but /healthz wants "Authorization: Bearer
//     TOKEN", or "Ahead-Authorization: Bearer TOKEN" (the model gateway's
//     Authorization header belongs to the model API: see providerOnly);
//   - a request that did not authenticate (/healthz, a refusal) gets its
//     answer and the connection closes: it holds no connection slot idle.
func guard(h http.Handler, o guardOptions) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		if o.Token == "" || r.URL.Path == "/healthz" {
			if r.URL.Path == "/healthz" {
				w.Header().Set("Connection", "close")
			}
		} else if !authorized(r, o.Token) {
			w.Header().Set("Connection", "close")
			w.Header().Set("WWW-Authenticate", `Bearer realm="ahead"`)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprintln(w, `{"error":"missing or wrong token: send Authorization: Bearer TOKEN (or Ahead-Authorization on model API routes)"}`)
			return
		}
		r.Header.Del("Ahead-Authorization") // never forwarded
		if o.ReadTimeout > 0 && r.Body != nil && r.Body != http.NoBody {
			_ = rc.SetReadDeadline(time.Now().Add(o.ReadTimeout))
			r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc}
		}
		var held *hold
		if o.Answers != nil {
			// The call's output is counted as it is read (answers.go).
			held = o.Answers.newHold()
			defer held.end()
			ctx := r.Context()
			if strings.HasPrefix(r.URL.Path, "/v1/sessions/") {
				// The API's calls may be shed for a connection slot
				// (answers.shedQueued): answered 503, ErrBusy.
				var cancel context.CancelCauseFunc
				ctx, cancel = context.WithCancelCause(ctx)
				defer cancel(nil)
				held.shed = cancel
			}
			r = r.WithContext(backend.WithBudget(ctx, held))
		}
		if o.WriteTimeout > 0 || o.Answers != nil {
			w = &deadlineWriter{ResponseWriter: w, rc: rc, d: o.WriteTimeout, answers: o.Answers, hold: held}
		}
		h.ServeHTTP(w, r)
		// The connection may serve another request: no deadline of this
		// one may outlive it.
		_ = rc.SetWriteDeadline(time.Time{})
	})
}

func authorized(r *http.Request, token string) bool {
	return bearer(r, "Ahead-Authorization", token) || bearer(r, "Authorization", token)
}

func bearer(r *http.Request, header, token string) bool {
	got, ok := strings.CutPrefix(r.Header.Get(header), "Bearer ")
	return ok && subtle.ConstantTimeCompare([]byte(got), []byte(token)) == 1
}

// providerOnly guards the model gateway's routes, whose Authorization
// header is forwarded to the model provider: ahead's own token there is
// refused, never forwarded (issue 23). A client of the gateway sends
// ahead's token in Ahead-Authorization.
func providerOnly(h http.Handler, token string) http.Handler {
	if token == "" {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if bearer(r, "Authorization", token) {
			w.Header().Set("Connection", "close")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprintln(w, `{"error":"ahead's token was sent in Authorization, which model API routes forward to the model provider: send it in Ahead-Authorization: Bearer TOKEN"}`)
			return
		}
		h.ServeHTTP(w, r)
	})
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

// deadlineWriter gives each write its own deadline, and counts large
// writes in the answer budget, handing them over a piece at a time.
type deadlineWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	d       time.Duration // 0: no deadline
	answers *answers      // nil: not counted
	hold    *hold         // the request's output, counted until its answer is
}

func (w *deadlineWriter) Write(p []byte) (int, error) {
	if w.answers == nil || len(p) <= answerSmall {
		w.renew()
		return w.ResponseWriter.Write(p)
	}
	f := w.answers.begin(int64(len(p)), w.rc, w.hold)
	defer w.answers.end(f)
	written := 0
	for written < len(p) {
		if !w.answers.next(f, w.d) {
			return written, errAnswerCut
		}
		n, err := w.ResponseWriter.Write(p[written : written+min(answerChunk, len(p)-written)])
		written += n
		if err != nil {
			if w.answers.wasCut(f) {
				err = errAnswerCut
			}
			return written, err
		}
	}
	return written, nil
}

// WriteHeader closes the connection after a shed request's answer: its
// slot is wanted (answers.shedQueued).
func (w *deadlineWriter) WriteHeader(code int) {
	if w.hold != nil && w.hold.wasShed() {
		w.Header().Set("Connection", "close")
		w.Header().Set("Retry-After", "1")
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *deadlineWriter) renew() {
	if w.d > 0 {
		_ = w.rc.SetWriteDeadline(time.Now().Add(w.d))
	}
}

func (w *deadlineWriter) Flush() {
	w.renew()
	_ = w.rc.Flush()
}

// Unwrap lets http.ResponseController reach the connection.
func (w *deadlineWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
