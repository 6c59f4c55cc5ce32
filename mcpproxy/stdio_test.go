package mcpproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/iotest"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ahead-dev/ahead/backend"
	"github.com/ahead-dev/ahead/engine"
	"github.com/ahead-dev/ahead/policy"
)

// bigServerEnv makes the test binary an MCP server on stdio (see
// TestMain) whose tool big answers as many bytes of text as the variable
// says.
const bigServerEnv = "AHEAD_TEST_BIG_SERVER"

func serveBig(size string) int {
	n, err := strconv.Atoi(size)
	if err != nil {
		fmt.Fprintln(os.Stderr, "big server:", err)
		return 1
	}
	big := strings.Repeat("x", n)
	srv := mcp.NewServer(&mcp.Implementation{Name: "big", Version: "1"}, &mcp.ServerOptions{Logger: slog.New(slog.DiscardHandler)})
	mcp.AddTool(srv, &mcp.Tool{Name: "big"}, func(context.Context, *mcp.CallToolRequest, map[string]any) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: big}}}, nil, nil
	})
	if err := srv.Run(context.Background(), &mcp.StdioTransport{}); err != nil && !strings.Contains(err.Error(), "EOF") {
		fmt.Fprintln(os.Stderr, "big server:", err)
		return 1
	}
	return 0
}

// Shrink gives back bytes counted (the server's hold does too).
func (c *countBudget) Shrink(n int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n -= n
}

func (c *countBudget) count() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// TestMeterCountsEachAnswerInItsCall: each message a stdio upstream sends
// is counted in the budget of the call it answers (the capacity of the
// buffer it is read into: at most twice its length), whether its id comes
// before the result (the Go SDK) or after it (the TypeScript SDK), read a
// byte at a time or in large pieces; notifications, requests from the
// server and answers to calls without a budget or cancelled are not
// counted in the end; ids, braces and quotes inside strings and nested
// objects do not mislead it; every message reaches Read as sent.
func TestMeterCountsEachAnswerInItsCall(t *testing.T) {
	text := func(n int) string {
		return strings.Repeat(`x}{\"id\":9,\\\"]`, n/16)
	}
	resp := func(id, body string, idFirst bool) string {
		result := `{"content":[{"type":"text","text":"` + body + `"}],"structuredContent":{"id":1,"items":[{"id":"2"}]}}`
		if idFirst {
			return `{"jsonrpc":"2.0","id":` + id + `,"result":` + result + `}`
		}
		return `{"result":` + result + `,"jsonrpc":"2.0","id":` + id + `}`
	}
	a1 := resp("1", text(100<<10), true)    // Go order
	b2 := resp(`"b"`, text(200<<10), false) // TypeScript order, a string id
	c3 := resp("3", text(50<<10), false)    // a call without a budget
	d4 := resp("4", text(10<<10), true)     // its call was cancelled
	notice := `{"jsonrpc":"2.0","method":"notifications/progress","params":{"id":1,"progressToken":1,"progress":1,"message":"` + text(30<<10) + `"}}`
	request := `{"id":1,"jsonrpc":"2.0","method":"sampling/createMessage","params":{"messages":[]}}`
	for _, msg := range []string{a1, b2, c3, d4, notice, request} {
		if !json.Valid([]byte(msg)) {
			t.Fatalf("invalid test message %.80s", msg)
		}
	}

	within := func(got int64, msg string) bool { return got >= int64(len(msg)) && got <= 2*int64(len(msg))+4<<10 }
	run := func(t *testing.T, r io.Reader, msgs []string) (a, b *countBudget) {
		a, b = &countBudget{}, &countBudget{}
		c := newStdioConn(r, nopWriteCloser{io.Discard})
		defer c.Close()
		// The call of id 1 is registered as the SDK makes it: written
		// with a context carrying its budget.
		call := &jsonrpc.Request{ID: mustID(t, float64(1)), Method: "tools/call"}
		if err := c.Write(backend.WithBudget(t.Context(), a), call); err != nil {
			t.Fatal(err)
		}
		c.m.add(`"b"`, t.Context(), b)
		cancelled, cancel := context.WithCancel(t.Context())
		c.m.add("4", cancelled, a)
		cancel()
		for i, want := range msgs {
			got, err := c.Read(t.Context())
			if err != nil {
				t.Fatalf("message %d: %v", i, err)
			}
			data, _ := jsonrpc.EncodeMessage(got)
			again, _ := jsonrpc.EncodeMessage(decode(t, want))
			if !bytes.Equal(data, again) {
				t.Fatalf("message %d changed: %.80s, want %.80s", i, data, want)
			}
		}
		if _, err := c.Read(t.Context()); err != io.EOF {
			t.Errorf("after the last message: %v, want EOF", err)
		}
		return a, b
	}
	readers := []struct {
		name string
		r    func(io.Reader) io.Reader
	}{
		{"a byte at a time", iotest.OneByteReader},
		{"half pieces", iotest.HalfReader},
		{"whole pieces", func(r io.Reader) io.Reader { return r }},
	}
	for _, tc := range readers {
		t.Run(tc.name, func(t *testing.T) {
			msgs := []string{notice, b2, request, c3, d4, a1, notice}
			stream := strings.Join(msgs, "\n") + "\n"
			a, b := run(t, tc.r(strings.NewReader(stream)), msgs)
			if !within(a.count(), a1) || !within(b.count(), b2) {
				t.Errorf("counted %d and %d bytes, want %d and %d (each call's answer) up to twice", a.count(), b.count(), len(a1), len(b2))
			}
			msgs = []string{notice, request, c3, d4, notice}
			stream = strings.Join(msgs, "\r\n")
			a, b = run(t, tc.r(strings.NewReader(stream)), msgs)
			if a.count() != 0 || b.count() != 0 {
				t.Errorf("counted %d and %d bytes of messages answering neither call, want 0", a.count(), b.count())
			}
		})
	}
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

func mustID(t *testing.T, v any) jsonrpc.ID {
	id, err := jsonrpc.MakeID(v)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func decode(t *testing.T, msg string) jsonrpc.Message {
	m, err := jsonrpc.DecodeMessage([]byte(msg))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// gateBudget lets limit bytes through, then blocks every Grow until open
// is closed, telling blocked when the first one does.
type gateBudget struct {
	countBudget
	limit   int64
	blocked chan struct{}
	once    sync.Once
	open    chan struct{}
}

func (g *gateBudget) Grow(ctx context.Context, n int64) error {
	if g.count()+n > g.limit {
		g.once.Do(func() { close(g.blocked) })
		select {
		case <-g.open:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return g.countBudget.Grow(ctx, n)
}

// Issue 23: a stdio upstream's answers were read whole by the SDK, up to
// 16 MiB each, outside max_answer_bytes. A call's answer is counted in the
// budget its context carries as it is read, and over the budget the
// upstream is not read: the call waits.
func TestStdioAnswersCounted(t *testing.T) {
	const size = 1 << 20
	p, err := New(&Options{
		Upstreams: []Upstream{{Name: "big", Command: os.Args[0], Args: []string{"-test.run=^$"},
			Env: map[string]string{bigServerEnv: strconv.Itoa(size)}}},
		Logger: slog.New(slog.DiscardHandler),
		Stderr: io.Discard,
	})
	if err != nil {
		t.Fatal(err)
	}
	eng := engine.New(&engine.Options{Backends: p.Backends(), Route: p.Route, Policy: &policy.Policy{},
		Logger: slog.New(slog.DiscardHandler)})
	p.Attach(eng)
	t.Cleanup(func() {
		p.Close()
		eng.Close()
	})

	var b countBudget
	res, err := eng.Call(backend.WithBudget(t.Context(), &b), "s1", "big", json.RawMessage(`{}`))
	if err != nil || len(res.Output) != size {
		t.Fatalf("big: %d bytes, %v; want %d", len(res.Output), err, size)
	}
	// The buffer the answer was read into (at most twice its length), and
	// the tools list the session's first call asked for on its way.
	if got := b.count(); got < size || got > 2*size+16<<10 {
		t.Errorf("%d bytes counted for a %d-byte answer, want it up to twice", got, size)
	}

	g := &gateBudget{limit: 256 << 10, blocked: make(chan struct{}), open: make(chan struct{})}
	done := make(chan error, 1)
	go func() { // owned: received below
		_, err := eng.Call(backend.WithBudget(t.Context(), g), "s1", "big", json.RawMessage(`{"again":1}`))
		done <- err
	}()
	select {
	case <-g.blocked:
	case err := <-done:
		t.Fatalf("the call returned (%v) without waiting for the budget", err)
	}
	select {
	case err := <-done:
		t.Fatalf("the call returned (%v) while its answer waited for the budget", err)
	default:
	}
	close(g.open)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := g.count(); got < size || got > 2*size+16<<10 {
		t.Errorf("%d bytes counted for a %d-byte answer, want it up to twice", got, size)
	}
}

// Issue 23: the calls of ahead's own MCP front (/mcp in ahead serve) are
// counted as the tool API's are: the budget the HTTP request carries
// reaches the upstream's reader, for older clients (whose calls the SDK
// serves outside the request's context) and 2026-07-28 ones alike, with
// a stdio upstream and an HTTP one.
func TestFrontCallsCounted(t *testing.T) {
	const size = 256 << 10
	big := strings.Repeat("y", size)
	srv := mcp.NewServer(&mcp.Implementation{Name: "web", Version: "1"}, &mcp.ServerOptions{Logger: slog.New(slog.DiscardHandler)})
	mcp.AddTool(srv, &mcp.Tool{Name: "big"}, func(context.Context, *mcp.CallToolRequest, map[string]any) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: big}}}, nil, nil
	})
	web := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{Logger: slog.New(slog.DiscardHandler)}))
	t.Cleanup(web.Close)
	p, err := New(&Options{
		Upstreams: []Upstream{
			{Name: "stdio", Prefix: "stdio_", Command: os.Args[0], Args: []string{"-test.run=^$"},
				Env: map[string]string{bigServerEnv: strconv.Itoa(size)}},
			{Name: "web", Prefix: "web_", URL: web.URL},
		},
		Logger: slog.New(slog.DiscardHandler),
		Stderr: io.Discard,
	})
	if err != nil {
		t.Fatal(err)
	}
	eng := engine.New(&engine.Options{Backends: p.Backends(), Route: p.Route, Policy: &policy.Policy{},
		Logger: slog.New(slog.DiscardHandler)})
	p.Attach(eng)
	// Each request gets a budget of its own, as ahead serve's guard gives
	// it; the last tools/call's is kept.
	var mu sync.Mutex
	var last *countBudget
	h := p.Handler()
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		b := &countBudget{}
		if bytes.Contains(body, []byte(`"tools/call"`)) {
			mu.Lock()
			last = b
			mu.Unlock()
		}
		h.ServeHTTP(w, r.WithContext(backend.WithBudget(r.Context(), b)))
	}))
	t.Cleanup(func() {
		front.Close()
		p.Close()
		eng.Close()
	})
	for _, version := range []string{agentProtocol, newEraVersion} {
		cs := newEraClient(t, front.URL, version, nil)
		for _, tool := range []string{"stdio_big", "web_big"} {
			res, _ := call(t, cs, tool, map[string]any{})
			if len(text(res)) != size {
				t.Fatalf("%s over %s: %d bytes, want %d", tool, version, len(text(res)), size)
			}
			mu.Lock()
			b := last
			mu.Unlock()
			if got := b.count(); got < size {
				t.Errorf("%s over %s: %d bytes counted for a %d-byte answer, want at least it", tool, version, got, size)
			}
		}
	}
}

// repeat reads msg over and over.
type repeat struct {
	msg []byte
	off int
}

func (r *repeat) Read(p []byte) (int, error) {
	n := copy(p, r.msg[r.off:])
	r.off = (r.off + n) % len(r.msg)
	return n, nil
}

// BenchmarkStdioRead: reading a stdio upstream's answers, ahead's
// connection (each message scanned for its end and id, into a buffer of
// its own) beside the SDK's (a JSON decoder), side by side:
//
//	go test -run '^$' -bench StdioRead ./mcpproxy
func BenchmarkStdioRead(b *testing.B) {
	for _, size := range []int{1 << 10, 8 << 20} {
		msg := []byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"` + strings.Repeat("x", size) + `"}]}}` + "\n")
		for _, impl := range []struct {
			name string
			conn func(io.Reader) mcp.Connection
		}{
			{"sdk", func(r io.Reader) mcp.Connection {
				c, err := (&mcp.IOTransport{Reader: io.NopCloser(r), Writer: nopWriteCloser{io.Discard}}).Connect(b.Context())
				if err != nil {
					b.Fatal(err)
				}
				return c
			}},
			{"ahead", func(r io.Reader) mcp.Connection { return newStdioConn(r, nopWriteCloser{io.Discard}) }},
		} {
			b.Run(fmt.Sprintf("%s/%d", impl.name, size), func(b *testing.B) {
				c := impl.conn(&repeat{msg: msg})
				defer c.Close()
				b.SetBytes(int64(len(msg)))
				b.ReportAllocs()
				for b.Loop() {
					if _, err := c.Read(b.Context()); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
