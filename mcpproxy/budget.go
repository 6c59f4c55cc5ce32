package mcpproxy

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ahead-dev/ahead/backend"
)

// The bytes of an HTTP upstream's answers (issue 23). The SDK reads a
// JSON answer whole (io.ReadAll) with no bound, and a stream's events up
// to mcp.DefaultMaxEventSize each; over stdio, a message is at most
// mcp.DefaultMaxLineLength. So an HTTP upstream's JSON answer is bounded
// here like a stdio message, and what a call's answer brings is counted,
// as it is read, in the budget its context carries (backend.Budget: ahead
// serve's max_answer_bytes, for the calls of HTTP requests), as the http
// and exec backends count their outputs: while the budget is full the
// upstream's answer is not read (nothing is lost).

// maxUpstreamJSON bounds one JSON answer of an HTTP upstream, as the SDK
// bounds one message over stdio.
const maxUpstreamJSON = mcp.DefaultMaxLineLength

// budgetChunk is the most a counted read takes at a time: what is read
// before it is counted.
const budgetChunk = 32 << 10

// budgetTransport counts the answers of an HTTP upstream in the budget of
// the call they answer, and bounds JSON answers.
type budgetTransport struct {
	base  http.RoundTripper
	limit int64 // of a JSON answer; 0: maxUpstreamJSON
}

func (t budgetTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	b := backend.BudgetOf(req.Context())
	stream := strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream")
	if b == nil && stream {
		return resp, nil // each event bounded by the SDK
	}
	limit := cmp.Or(t.limit, maxUpstreamJSON)
	if stream {
		limit = -1
	}
	resp.Body = &countedBody{ReadCloser: resp.Body, ctx: req.Context(), b: b, limit: limit}
	return resp, nil
}

// countedBody counts what is read of an answer in b (nil: not counted),
// and fails a read beyond limit (negative: none).
type countedBody struct {
	io.ReadCloser
	ctx   context.Context
	b     backend.Budget
	limit int64
	read  int64
}

func (c *countedBody) Read(p []byte) (int, error) {
	if c.limit >= 0 && c.read > c.limit {
		return 0, fmt.Errorf("mcpproxy: upstream answer over %d bytes", c.limit)
	}
	p = p[:min(len(p), budgetChunk)]
	n, err := c.ReadCloser.Read(p)
	c.read += int64(n)
	if c.b != nil && n > 0 {
		// Counted once read, so that the count is exact; a wait here
		// leaves the rest of the answer unread. A call that ended
		// (its context done) counts no more: what it read is dropped
		// with it, and failing the read would fail the connection,
		// which other calls share.
		if c.b.Grow(c.ctx, int64(n)) != nil {
			c.b = nil
		}
	}
	if c.limit >= 0 && c.read > c.limit {
		return 0, fmt.Errorf("mcpproxy: upstream answer over %d bytes", c.limit)
	}
	return n, err
}

// The calls of older clients over HTTP (issue 23). The SDK serves a
// session's messages in a context of the session (derived from the HTTP
// request that opened it), not of the HTTP request that carried them, so
// the budget that request carries (ahead serve's hold of its answer,
// backend.Budget) never reached its call's upstream reader: /mcp's calls
// of older clients were counted in the hold of the session's first
// request, which had ended (so not at all). The handler
// names the request's budget in a header of its own, which the SDK hands
// the call (mcp.RequestExtra.Header), and the call takes the budget
// back. (A 2026-07-28 request is served in its own context, budget and
// all.)

// budgetHeader names, inside ahead, the budget of the HTTP request a
// message came in; a client's own is dropped.
const budgetHeader = "Ahead-Internal-Budget"

// requestBudgets are the budgets of the HTTP requests in flight, by the
// token budgetHeader carries.
type requestBudgets struct {
	seq atomic.Uint64
	m   sync.Map // token → backend.Budget
}

// carry names r's budget, if it carries one, in r's budgetHeader, and
// returns the function that forgets it once r has been served.
func (rb *requestBudgets) carry(r *http.Request) func() {
	r.Header.Del(budgetHeader) // never a client's
	b := backend.BudgetOf(r.Context())
	if b == nil {
		return func() {}
	}
	tok := strconv.FormatUint(rb.seq.Add(1), 10)
	rb.m.Store(tok, b)
	r.Header.Set(budgetHeader, tok)
	return func() { rb.m.Delete(tok) }
}

// with returns ctx carrying the budget of the HTTP request req came in,
// if it was named (the session's context may carry another: that of the
// request that opened the session, long answered).
func (rb *requestBudgets) with(ctx context.Context, req mcp.Request) context.Context {
	e := req.GetExtra()
	if e == nil || e.Header == nil {
		return ctx
	}
	if b, ok := rb.m.Load(e.Header.Get(budgetHeader)); ok {
		return backend.WithBudget(ctx, b.(backend.Budget))
	}
	return ctx
}
