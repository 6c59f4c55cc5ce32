// Package remote is the HTTP backend: each tool call is a POST of the
// canonical arguments JSON to a URL made from a template, such as
// http://127.0.0.1:9000/tools/{tool}.
//
// A 2xx response is the tool's output. Any other status is the tool's own
// failure: an error result carrying the status and (the start of) the body,
// which the agent sees and ahead never reuses. Only a failure to get a
// response at all — the server unreachable, the per-call timeout, a
// cancelled context — is returned as an error. A 429 or a Retry-After
// header sets Response.RetryAfter so that the scheduler backs off.
//
// Response bodies are bounded (Options.MaxResponseBytes): a response over
// the limit becomes an error result, never an unbounded allocation.
package remote

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/ahead-dev/ahead/backend"
)

// ErrTimeout is wrapped by the error returned when a call gets no complete
// response within Options.Timeout.
var ErrTimeout = fmt.Errorf("remote: %w", backend.ErrTimeout)

// Defaults for the zero Options fields.
const (
	DefaultTimeout          = 30 * time.Second
	DefaultMaxResponseBytes = 8 << 20
	// DefaultMaxErrorBytes is how much of a non-2xx body goes into the
	// error result: enough for a stack trace or a JSON problem document,
	// not a whole HTML error page.
	DefaultMaxErrorBytes = 4 << 10
	// maxRetryAfter caps a server's Retry-After, so that a misconfigured
	// server cannot switch speculation off for days.
	maxRetryAfter = 10 * time.Minute
	// defaultRetryAfter is the back-off for a 429 without a usable
	// Retry-After header.
	defaultRetryAfter = time.Second
)

// Options configure a Backend. The zero value is usable.
type Options struct {
	// Timeout bounds each call, from sending the request to reading the
	// whole body. Zero means DefaultTimeout; negative means no timeout
	// (only the caller's context).
	Timeout time.Duration
	// Header is added to every request (for example Authorization).
	// Content-Type is always application/json.
	Header http.Header
	// MaxResponseBytes bounds a response body. Zero means
	// DefaultMaxResponseBytes.
	MaxResponseBytes int64
	// MaxErrorBytes bounds how much of a non-2xx body is kept in the
	// error result. Zero means DefaultMaxErrorBytes.
	MaxErrorBytes int
	// Client sends the requests. Nil means a client owned by the Backend,
	// with a connection pool sized for many concurrent calls to one host
	// and redirects not followed. A caller-supplied client is used as is.
	Client *http.Client
}

// Backend calls tools over HTTP. It is safe for concurrent use.
type Backend struct {
	path, query string // the template, split at '?'
	opts        Options
	client      *http.Client
	owned       *http.Transport // nil for a caller-supplied client
	origin      *url.URL        // scheme and host, for Warmup
}

var (
	_ backend.Backend = (*Backend)(nil)
	_ backend.Warmer  = (*Backend)(nil)
)

// New returns a backend that POSTs to urlTemplate, an http or https URL in
// which every {tool} is replaced by the tool's name (path-escaped in the
// path, query-escaped in the query). opts may be nil.
func New(urlTemplate string, opts *Options) (*Backend, error) {
	b := &Backend{}
	if opts != nil {
		b.opts = *opts
	}
	if b.opts.Timeout == 0 {
		b.opts.Timeout = DefaultTimeout
	}
	if b.opts.MaxResponseBytes <= 0 {
		b.opts.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if b.opts.MaxErrorBytes <= 0 {
		b.opts.MaxErrorBytes = DefaultMaxErrorBytes
	}
	b.opts.Header = b.opts.Header.Clone()

	u, err := url.Parse(strings.ReplaceAll(urlTemplate, "{tool}", "tool"))
	if err != nil {
		return nil, fmt.Errorf("remote: bad URL template %q: %w", urlTemplate, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("remote: bad URL template %q: want an http or https URL", urlTemplate)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("remote: bad URL template %q: no host", urlTemplate)
	}
	if u.Fragment != "" {
		return nil, fmt.Errorf("remote: bad URL template %q: a fragment is never sent", urlTemplate)
	}
	// {tool} in the host would let an agent's tool name pick the server.
	if i := strings.Index(urlTemplate, "://"); i >= 0 {
		rest := urlTemplate[i+3:]
		if j := strings.IndexAny(rest, "/?"); j >= 0 {
			rest = rest[:j]
		}
		if strings.Contains(rest, "{tool}") {
			return nil, fmt.Errorf("remote: bad URL template %q: {tool} may appear in the path or query, not the host", urlTemplate)
		}
	}
	b.path, b.query, _ = strings.Cut(urlTemplate, "?")
	b.origin = &url.URL{Scheme: u.Scheme, Host: u.Host, User: u.User}

	b.client = b.opts.Client
	if b.client == nil {
		b.owned = newTransport()
		b.client = &http.Client{
			Transport: b.owned,
			// A redirect would turn a POST into a GET (301-303) or send
			// the arguments somewhere the operator did not configure:
			// return the 3xx as the tool's answer instead.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	return b, nil
}

func newTransport() *http.Transport {
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           dialer.DialContext,
		ForceAttemptHTTP2:     true,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		// The default of 2 idle connections per host would make a sidecar
		// that runs many concurrent calls to one tool server open and
		// close connections all the time.
		MaxIdleConns:        256,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
	}
}

// Close closes the idle connections of a backend-owned client. Calls after
// Close still work; they open new connections.
func (b *Backend) Close() {
	if b.owned != nil {
		b.owned.CloseIdleConnections()
	}
}

// URL returns the URL a call to tool is sent to.
func (b *Backend) URL(tool string) string {
	esc := url.PathEscape(tool)
	// "." and ".." are path segments with a meaning; servers that clean
	// paths would send such a call to another tool.
	if tool == "." || tool == ".." {
		esc = strings.Repeat("%2E", len(tool))
	}
	s := strings.ReplaceAll(b.path, "{tool}", esc)
	if b.query != "" {
		s += "?" + strings.ReplaceAll(b.query, "{tool}", url.QueryEscape(tool))
	}
	return s
}

// Call POSTs req.Args to the tool's URL.
func (b *Backend) Call(ctx context.Context, req backend.Request) (backend.Response, error) {
	callCtx, cancel := ctx, context.CancelFunc(func() {})
	if b.opts.Timeout > 0 {
		callCtx, cancel = context.WithTimeoutCause(ctx, b.opts.Timeout, ErrTimeout)
	}
	defer cancel()
	body := []byte(req.Args)
	if len(body) == 0 {
		body = []byte("{}")
	}
	hreq, err := http.NewRequestWithContext(callCtx, http.MethodPost, b.URL(req.Tool), bytes.NewReader(body))
	if err != nil {
		return backend.Response{}, fmt.Errorf("remote: %s: %w", req.Tool, err)
	}
	for k, v := range b.opts.Header {
		hreq.Header[k] = v
	}
	hreq.Header.Set("Content-Type", "application/json")
	if req.Speculative {
		// Backends may deprioritise, or not bill, work no agent asked
		// for yet.
		hreq.Header.Set("Ahead-Speculative", "1")
	}
	if hreq.Header.Get("Accept") == "" {
		hreq.Header.Set("Accept", "application/json, text/plain;q=0.9, */*;q=0.8")
	}

	resp, err := b.client.Do(hreq)
	if err != nil {
		return backend.Response{}, b.failure(ctx, callCtx, req.Tool, err)
	}
	defer resp.Body.Close()

	out := backend.Response{RetryAfter: retryAfter(resp, time.Now())}
	max := b.opts.MaxResponseBytes
	if resp.ContentLength > max {
		out.IsError = true
		out.Output = fmt.Sprintf("HTTP %s: response of %d bytes is over the %d-byte limit", resp.Status, resp.ContentLength, max)
		return out, nil
	}
	// Counted in the front's budget (if any) as the bytes arrive, and
	// handed over without another copy: the buffer is not used again.
	data, err := backend.ReadCounted(callCtx, backend.BudgetOf(ctx), resp.Body, resp.ContentLength, max)
	if err != nil {
		return backend.Response{}, b.failure(ctx, callCtx, req.Tool, err)
	}
	if int64(len(data)) > max {
		out.IsError = true
		out.Output = fmt.Sprintf("HTTP %s: response over the %d-byte limit", resp.Status, max)
		return out, nil
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		if len(data) > 0 {
			out.Output = unsafe.String(&data[0], len(data))
		}
		return out, nil
	}
	out.IsError = true
	out.Output = "HTTP " + resp.Status
	if len(data) > 0 {
		out.Output += ": " + truncate(data, b.opts.MaxErrorBytes)
	}
	return out, nil
}

// failure explains why no response arrived: the caller's context (returned
// as is, as the backend contract requires), the per-call timeout, or the
// transport.
func (b *Backend) failure(ctx, callCtx context.Context, tool string, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if errors.Is(context.Cause(callCtx), ErrTimeout) {
		return fmt.Errorf("remote: %s: no response within %v: %w", tool, b.opts.Timeout, ErrTimeout)
	}
	return fmt.Errorf("remote: %s: %w", tool, err)
}

// truncate returns data as text, cut to at most max bytes on a UTF-8
// boundary with a note of how much was left out.
func truncate(data []byte, max int) string {
	if len(data) <= max {
		return string(data)
	}
	cut := max
	for cut > 0 && cut > max-utf8.UTFMax && !utf8.RuneStart(data[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d of %d bytes)", data[:cut], cut, len(data))
}

// retryAfter returns how long the server asked us to wait: the Retry-After
// header (delay-seconds or an HTTP-date), or a default for a 429 without
// one, capped at maxRetryAfter.
func retryAfter(resp *http.Response, now time.Time) time.Duration {
	d, ok := parseRetryAfter(resp.Header.Get("Retry-After"), now)
	if !ok && resp.StatusCode == http.StatusTooManyRequests {
		d, ok = defaultRetryAfter, true
	}
	if !ok {
		return 0
	}
	return min(d, maxRetryAfter)
}

// parseRetryAfter parses a Retry-After value (RFC 9110, section 10.2.3),
// capped at maxRetryAfter.
// A date in the past means "now", which is no back-off; the caller
// substitutes the default for a 429.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseUint(v, 10, 64); err == nil {
		if secs > uint64(maxRetryAfter/time.Second) {
			return maxRetryAfter, true
		}
		return time.Duration(secs) * time.Second, secs > 0
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	d := t.Sub(now)
	if d <= 0 {
		return 0, false
	}
	// HTTP dates have one-second resolution: round up, so that we never
	// come back before the server's date.
	if d >= maxRetryAfter {
		return maxRetryAfter, true // also keeps the rounding below from overflowing
	}
	return (d + time.Second - 1).Truncate(time.Second), true
}

// Warmup opens (or keeps) a connection to the tool's server without
// calling any tool: it sends OPTIONS * — the server-wide ping of RFC 9110,
// which Go's server and common proxies answer themselves without invoking
// any handler — and keeps the connection in the pool for the next call.
// Any HTTP response, whatever its status, means the connection works.
func (b *Backend) Warmup(ctx context.Context, req backend.Request) error {
	tool := req.Tool
	if b.opts.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, b.opts.Timeout)
		defer cancel()
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodOptions, b.origin.String(), nil)
	if err != nil {
		return fmt.Errorf("remote: warming up %s: %w", tool, err)
	}
	hreq.URL.Opaque = "*" // the request target is "*", not a path
	for k, v := range b.opts.Header {
		hreq.Header[k] = v
	}
	resp, err := b.client.Do(hreq)
	if err != nil {
		return fmt.Errorf("remote: warming up %s: %w", tool, err)
	}
	// Drain a little so that the connection goes back to the pool.
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	return nil
}
