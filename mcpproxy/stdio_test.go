package mcpproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/iotest"

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
// is counted in the budget of the call it answers, whether its id comes
// before the result (the Go SDK) or after it (the TypeScript SDK), read
// a byte at a time or in large pieces; notifications, requests from the
// server and answers to calls without a budget are not counted in the
// end; ids, braces and quotes inside strings and nested objects do not
// mislead it.
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
	stream := strings.Join([]string{notice, b2, request, c3, d4, a1, notice}, "\n") + "\n"

	for _, tc := range []struct {
		name string
		r    func(io.Reader) io.Reader
	}{
		{"a byte at a time", iotest.OneByteReader},
		{"half pieces", iotest.HalfReader},
		{"whole pieces", func(r io.Reader) io.Reader { return r }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var a, b countBudget
			m := newMeter(tc.r(strings.NewReader(stream)))
			cancelled, cancel := context.WithCancel(t.Context())
			m.add("1", t.Context(), &a)
			m.add(`"b"`, t.Context(), &b)
			m.add("4", cancelled, &a)
			cancel()
			var got bytes.Buffer
			if _, err := io.Copy(&got, m); err != nil {
				t.Fatal(err)
			}
			if got.String() != stream {
				t.Fatal("the meter changed the stream")
			}
			if a.count() != int64(len(a1)) || b.count() != int64(len(b2)) {
				t.Errorf("counted %d and %d bytes, want %d and %d (each call's answer)", a.count(), b.count(), len(a1), len(b2))
			}
			if len(m.calls) != 0 {
				t.Errorf("%d calls still registered after every answer was read, want 0", len(m.calls))
			}
		})
	}
	// The messages themselves are valid JSON (the test's own check).
	for _, msg := range []string{a1, b2, notice, request} {
		if !json.Valid([]byte(msg)) {
			t.Fatalf("invalid test message %.80s", msg)
		}
	}
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
	// The answer's JSON around the text, and the tools list the session's
	// first call asked for on its way.
	if got := b.count(); got < size || got > size+4<<10 {
		t.Errorf("%d bytes counted for a %d-byte answer, want it and its JSON", got, size)
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
	if got := g.count(); got < size || got > size+4<<10 {
		t.Errorf("%d bytes counted for a %d-byte answer, want it and its JSON", got, size)
	}
}
