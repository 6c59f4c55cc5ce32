// Package httpapi serves ahead's engine over HTTP: the tool-call API that
// agents (or their harnesses) call instead of their tools, the session
// lifecycle, and the operator's views (Prometheus metrics, health, per-tool
// statistics).
//
// Routes:
//
//	POST   /v1/sessions/{session}/calls   {"tool": "...", "args": {...}} → result
//	POST   /v1/sessions/{session}/messages {"role": "user", "content": "..."} → 204
//	POST   /v1/sessions/{session}/tools    {"tools": [{"name", "description", "input_schema"}]} → 204
//	DELETE /v1/sessions/{session}         end the session (204)
//	GET    /v1/stats                      per-tool summary (JSON)
//	GET    /metrics                       Prometheus exposition
//	GET    /healthz                       liveness
//
// A call's answer is 200 whenever the tool ran, including a tool's own
// failure (status "error"); other codes mean the call could not be served
// and carry {"error": "..."}: 400 malformed request, 404 unknown tool, 413
// body over the limit, 502 backend unreachable, 503 engine closed or the
// backend's queue full (with Retry-After: a backend with slots set holds at
// most its queue bound of waiting calls), 504 backend timed out. The handler adds nothing to the engine's promise: a
// result is exactly what the engine returned for exactly the request's call.
package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ahead-dev/ahead/backend"
	"github.com/ahead-dev/ahead/engine"
	"github.com/ahead-dev/ahead/sched"
)

// ErrShutdown is the cause a server gives the contexts of the requests it
// cuts off at shutdown (context.WithCancelCause): their calls are answered
// 503 rather than left without an answer.
var ErrShutdown = errors.New("ahead: shutting down: the call was cut off after the grace period")

// ErrBusy is the cause a server gives the context of a request it sheds to
// make room (ahead serve: a call whose output waits for the answer budget,
// its client having received nothing, when every connection slot is
// wanted): the call is answered 503, and the client may ask again.
var ErrBusy = errors.New("ahead: busy: every connection is held and this call's answer was waiting for memory; ask again")

// Engine is what the handler needs of *engine.Engine.
type Engine interface {
	Call(ctx context.Context, session, tool string, args json.RawMessage) (engine.Result, error)
	Begin(session string)
	Message(ctx context.Context, session, role, content string) error
	EndSession(session string)
	Stats() engine.Stats
}

var _ Engine = (*engine.Engine)(nil)

// DefaultMaxBodyBytes is the request body limit when Options sets none.
const DefaultMaxBodyBytes = 8 << 20

// Options configure a Handler. The zero value is valid.
type Options struct {
	// MaxBodyBytes bounds a call's request body; larger bodies get 413.
	// 0 means DefaultMaxBodyBytes (8 MiB).
	MaxBodyBytes int64
	// Gatherer is served at /metrics. Nil means /metrics answers 404:
	// the handler never falls back to Prometheus' global registry, so
	// two servers in one process keep their metrics apart.
	Gatherer prometheus.Gatherer
	// Logger logs calls that could not be served; nil means
	// slog.Default().
	Logger *slog.Logger
	// Fleet, if set, returns the fleet's state for /v1/stats; nil means
	// the replica is alone.
	Fleet func() *FleetStats
	// Upstreams, if set, returns the MCP upstreams' state for /v1/stats;
	// nil means ahead fronts none.
	Upstreams func() []UpstreamStats
	// Answers, if set, returns the bytes held for answers for /v1/stats
	// (ahead serve's); nil: none are shown.
	Answers func() *AnswerStats
}

// Handler is the HTTP API of an engine. Create it with New.
type Handler struct {
	eng  Engine
	opts Options
	mux  *http.ServeMux
}

var _ http.Handler = (*Handler)(nil)

// New returns the HTTP API of eng. opts may be nil.
func New(eng Engine, opts *Options) *Handler {
	h := &Handler{eng: eng, mux: http.NewServeMux()}
	if opts != nil {
		h.opts = *opts
	}
	if h.opts.MaxBodyBytes <= 0 {
		h.opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if h.opts.Logger == nil {
		h.opts.Logger = slog.Default()
	}
	h.mux.HandleFunc("POST /v1/sessions/{session}/calls", h.call)
	h.mux.HandleFunc("POST /v1/sessions/{session}/messages", h.message)
	h.mux.HandleFunc("POST /v1/sessions/{session}/tools", h.tools)
	h.mux.HandleFunc("POST /v1/sessions/{session}", h.begin)
	h.mux.HandleFunc("DELETE /v1/sessions/{session}", h.endSession)
	h.mux.HandleFunc("GET /v1/stats", h.stats)
	h.mux.HandleFunc("GET /healthz", h.healthz)
	if h.opts.Gatherer != nil {
		h.mux.Handle("GET /metrics", promhttp.HandlerFor(h.opts.Gatherer, promhttp.HandlerOpts{
			ErrorLog: slog.NewLogLogger(h.opts.Logger.Handler(), slog.LevelError),
		}))
	}
	return h
}

// ServeHTTP routes the request. Session ids are checked before any route
// sees them, and requests no route takes get a JSON error like the rest.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if rest, ok := strings.CutPrefix(r.URL.EscapedPath(), "/v1/sessions/"); ok {
		id, _, _ := strings.Cut(rest, "/")
		if msg := checkSession(id); msg != "" {
			writeError(w, http.StatusBadRequest, msg)
			return
		}
	}
	if _, pattern := h.mux.Handler(r); pattern == "" {
		h.unrouted(w, r)
		return
	}
	h.mux.ServeHTTP(w, r)
}

// MaxSessionBytes is the longest session id the API takes.
const MaxSessionBytes = 256

// checkSession says what is wrong with a session id from a path (escaped
// as in the URL), or "" if nothing is: it must be non-empty, at most
// MaxSessionBytes, valid UTF-8 and printable (ids reach logs, traces and
// backends).
func checkSession(escaped string) string {
	id, err := url.PathUnescape(escaped)
	switch {
	case err != nil:
		return "session id: " + err.Error()
	case id == "":
		return "session id is empty"
	case len(id) > MaxSessionBytes:
		return fmt.Sprintf("session id is %d bytes long; at most %d are allowed", len(id), MaxSessionBytes)
	case !utf8.ValidString(id):
		return "session id is not valid UTF-8"
	case strings.ContainsFunc(id, func(r rune) bool { return !unicode.IsPrint(r) }):
		return "session id contains a control or non-printable character"
	}
	return ""
}

// unrouted answers a request no route takes: 405 with Allow when the path
// exists under other methods, else 404.
func (h *Handler) unrouted(w http.ResponseWriter, r *http.Request) {
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodDelete} {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := h.mux.Handler(probe); pattern != "" {
			allow = append(allow, m)
		}
	}
	if len(allow) > 0 {
		w.Header().Set("Allow", strings.Join(allow, ", "))
		writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s is not allowed on %s (allowed: %s)", r.Method, r.URL.Path, strings.Join(allow, ", ")))
		return
	}
	writeError(w, http.StatusNotFound, "no such route: "+r.URL.Path)
}

type errorResponse struct {
	Error string `json:"error"`
}

// body reads a request's body within the limit, answering 413 or 400 and
// reporting false when it cannot.
func (h *Handler) body(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := readBody(w, r, h.opts.MaxBodyBytes)
	if err != nil {
		if mbe, ok := errors.AsType[*http.MaxBytesError](err); ok {
			writeError(w, http.StatusRequestEntityTooLarge, "request body is larger than the limit of "+formatBytes(mbe.Limit))
			return nil, false
		}
		// The client went away or the connection broke mid-body; the
		// answer will most likely not arrive, but say what happened.
		writeError(w, http.StatusBadRequest, "reading request body: "+err.Error())
		return nil, false
	}
	return body, true
}

// message hands a message of the conversation to the engine.
func (h *Handler) message(w http.ResponseWriter, r *http.Request) {
	body, ok := h.body(w, r)
	if !ok {
		return
	}
	var m struct {
		Role    *string `json:"role"`
		Content *string `json:"content"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	switch err := dec.Decode(&m); {
	case err != nil:
		writeError(w, http.StatusBadRequest, "decoding message: "+err.Error())
		return
	case dec.More():
		writeError(w, http.StatusBadRequest, "decoding message: more than one JSON value")
		return
	case m.Role == nil:
		writeError(w, http.StatusBadRequest, `message: "role" is missing (want "system", "user" or "assistant")`)
		return
	case m.Content == nil:
		writeError(w, http.StatusBadRequest, `message: "content" is missing`)
		return
	}
	if err := h.eng.Message(r.Context(), r.PathValue("session"), *m.Role, *m.Content); err != nil {
		code := http.StatusBadRequest
		switch {
		case errors.Is(err, engine.ErrClosed):
			code = http.StatusServiceUnavailable
		case !errors.Is(err, engine.ErrInvalidMessage):
			code = http.StatusInternalServerError
		}
		writeError(w, code, err.Error())
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (h *Handler) call(w http.ResponseWriter, r *http.Request) {
	session := r.PathValue("session")
	body, ok := h.body(w, r)
	if !ok {
		return
	}
	req, err := DecodeCall(body)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	// A request ends early only when its client went away (a broken
	// connection): a call already sent runs on, for the same call posted
	// again to join (engine/orphan.go).
	res, err := h.eng.Call(engine.KeepRunning(r.Context()), session, req.Tool, req.Args)
	if err != nil {
		if qf, ok := errors.AsType[*sched.QueueFullError](err); ok {
			// The backend's queue is full (its slots are set and busy):
			// the call did not run; the client may try again.
			w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(qf.RetryAfter.Seconds()))))
			writeError(w, http.StatusServiceUnavailable, err.Error())
			return
		}
		code := h.callErrorCode(r.Context(), err)
		if cause := context.Cause(r.Context()); errors.Is(cause, ErrBusy) {
			// Shed to make room (a defence that works as meant under
			// load): the client is told why, the log only at debug.
			h.opts.Logger.Debug("call shed", "session", session, "tool", req.Tool, "code", code)
			writeError(w, code, cause.Error())
			return
		}
		if code >= 500 {
			h.opts.Logger.Warn("call not served", "session", session, "tool", req.Tool, "code", code, "err", err)
		}
		writeError(w, code, err.Error())
		return
	}
	buf := respBufs.Get().(*[]byte)
	*buf = appendResult((*buf)[:0], res)
	setJSONHeaders(w)
	w.WriteHeader(http.StatusOK)
	w.Write(*buf)
	if cap(*buf) <= maxPooledBody {
		respBufs.Put(buf)
	}
}

var respBufs = sync.Pool{New: func() any { return new([]byte) }}

// callErrorCode maps an error of Engine.Call to an HTTP status.
func (h *Handler) callErrorCode(ctx context.Context, err error) int {
	switch {
	case errors.Is(err, engine.ErrInvalidArgs):
		return http.StatusBadRequest
	case errors.Is(err, engine.ErrUnknownTool):
		return http.StatusNotFound
	case errors.Is(err, engine.ErrClosed), errors.Is(err, sched.ErrClosed), errors.Is(context.Cause(ctx), ErrShutdown),
		errors.Is(context.Cause(ctx), ErrBusy):
		return http.StatusServiceUnavailable
	case ctx.Err() != nil:
		// The client gave up (or the server is closing its connection);
		// nobody reads this answer. 499 is nginx's "client closed
		// request"; it keeps such calls apart from backend failures in
		// access logs.
		return 499
	case errors.Is(err, backend.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		// The request's context is live, so the deadline was the
		// backend's own timeout.
		return http.StatusGatewayTimeout
	default:
		return http.StatusBadGateway
	}
}

// begin announces a session before its first call, so that call can be
// speculated on too. A session also starts with its first call without it.
func (h *Handler) begin(w http.ResponseWriter, r *http.Request) {
	h.eng.Begin(r.PathValue("session"))
	w.WriteHeader(http.StatusNoContent)
}

func (h *Handler) endSession(w http.ResponseWriter, r *http.Request) {
	h.eng.EndSession(r.PathValue("session"))
	w.WriteHeader(http.StatusNoContent)
}

func (h *Handler) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// readBody reads the whole body, at most limit bytes. Reading it before
// decoding lets a body over the limit be told apart from a malformed one,
// and gives decoding errors exact offsets.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	if r.ContentLength > limit {
		return nil, &http.MaxBytesError{Limit: limit}
	}
	rd := http.MaxBytesReader(w, r.Body, limit)
	buf := bodyBufs.Get().(*bytes.Buffer)
	buf.Reset()
	defer putBodyBuf(buf)
	// Issue 23: the buffer grows as bytes arrive. A declared length is
	// only a hint, up to what a pooled buffer holds: 200 connections
	// declaring 8 MiB and sending one byte took 1.6 GiB when it was
	// allocated up front.
	if r.ContentLength > 0 {
		buf.Grow(int(min(r.ContentLength, maxPooledBody)))
	}
	if _, err := buf.ReadFrom(rd); err != nil {
		return nil, err
	}
	// The engine keeps the arguments (canonicalised into its own copy),
	// and the decoded call refers to the body: hand out a copy so the
	// buffer can be reused.
	return bytes.Clone(buf.Bytes()), nil
}

var bodyBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxPooledBody keeps one huge request from pinning its buffer.
const maxPooledBody = 64 << 10

func putBodyBuf(b *bytes.Buffer) {
	if b.Cap() <= maxPooledBody {
		bodyBufs.Put(b)
	}
}

// marshalNoEscape is json.Marshal without HTML escaping: outputs are data
// for an agent, not HTML, and "<" should stay readable.
func marshalNoEscape(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := marshalNoEscape(v)
	if err != nil {
		// Only our own response types get here; they always marshal.
		code = http.StatusInternalServerError
		b = []byte(`{"error":"encoding the response failed"}`)
	}
	setJSONHeaders(w)
	w.WriteHeader(code)
	w.Write(append(b, '\n'))
}

func setJSONHeaders(w http.ResponseWriter) {
	h := w.Header()
	// Direct map writes: the keys are already canonical, and Set would
	// canonicalise them again on every call.
	h["Content-Type"] = jsonContentType
	h["X-Content-Type-Options"] = nosniff
}

var (
	jsonContentType = []string{"application/json"}
	nosniff         = []string{"nosniff"}
)

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, errorResponse{Error: msg})
}

// formatBytes prints a byte count the way the limit is usually configured.
func formatBytes(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return itoa(n>>20) + " MiB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return itoa(n>>10) + " KiB"
	default:
		return itoa(n) + " bytes"
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
