package mcpproxy

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"

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
