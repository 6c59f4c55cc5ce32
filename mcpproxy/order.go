package mcpproxy

import (
	"context"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The Go SDK dispatches a response to its waiting call as soon as it reads
// it, but queues incoming notifications for a handler goroutine. So the
// result of a tool call can overtake the log and progress messages the
// upstream sent before it (they are first on the wire), and the proxy would
// close the agent's request stream before forwarding them: the agent would
// see them late or never (the conformance scenario tools-call-with-logging
// caught it under load). A barrier counts those notifications as they are
// read, in wire order, and a call waits for the count to drain before it
// returns its result.
//
// Only connections that implement nothing beyond mcp.Connection are
// wrapped (stdio and in-memory). The SDK type-asserts its streamable HTTP
// client connection to unexported interfaces a wrapper cannot forward, so
// HTTP upstreams keep the SDK's ordering.

// orderedMethods are the notifications that belong to a request in flight
// and so must reach the agent before its result.
func orderedMethod(m string) bool {
	return m == "notifications/message" || m == "notifications/progress"
}

// barrierWait caps how long a result waits for notifications: a handler
// stuck on a slow agent must not hold every call.
const barrierWait = 2 * time.Second

// barrier counts the ordered notifications read but not yet forwarded.
type barrier struct {
	mu   sync.Mutex
	n    int
	zero chan struct{} // closed while n == 0
}

func newBarrier() *barrier {
	b := &barrier{zero: make(chan struct{})}
	close(b.zero)
	return b
}

func (b *barrier) read() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.n == 0 {
		b.zero = make(chan struct{})
	}
	b.n++
}

func (b *barrier) handled() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.n == 0 {
		return // read before the barrier was installed
	}
	if b.n--; b.n == 0 {
		close(b.zero)
	}
}

// wait returns when every ordered notification read so far has been
// handled, ctx is done, or barrierWait has passed.
func (b *barrier) wait(ctx context.Context) {
	b.mu.Lock()
	zero, n := b.zero, b.n
	b.mu.Unlock()
	if n == 0 {
		return
	}
	t := time.NewTimer(barrierWait)
	defer t.Stop()
	select {
	case <-zero:
	case <-ctx.Done():
	case <-t.C:
	}
}

// middleware marks an ordered notification handled once its handler (which
// forwards it to the agent) has returned.
func (b *barrier) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if orderedMethod(method) {
			b.handled()
		}
		return res, err
	}
}

// orderedTransport wraps a transport so that its connection counts ordered
// notifications as they are read.
type orderedTransport struct {
	mcp.Transport
	b *barrier
}

func (t orderedTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return orderedConn{c, t.b}, nil
}

type orderedConn struct {
	mcp.Connection
	b *barrier
}

func (c orderedConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	m, err := c.Connection.Read(ctx)
	if r, ok := m.(*jsonrpc.Request); ok && !r.IsCall() && orderedMethod(r.Method) {
		c.b.read()
	}
	return m, err
}
