package mcpproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ahead-dev/ahead/backend"
)

// The bytes of a stdio upstream's answers (issue 23). The SDK reads a
// stdio upstream's messages whole, each up to mcp.DefaultMaxLineLength
// (16 MiB), from one stream that every call of the session shares: N
// sessions each calling a tool that answers 8 MiB held N × 8 MiB, outside
// max_answer_bytes, and its decoder kept a buffer as large as the largest
// message each connection ever read (up to twice it), for the session's
// life: 32 sessions that had each read one 8 MiB answer took RSS to 1 GiB.
// So ahead runs the command itself (commandTransport, as
// mcp.CommandTransport does) and reads its messages (stdioConn): each
// message into a buffer of its own, dropped once decoded, whose bytes are
// counted before they are taken in, in the budget of the call the message
// answers (backend.Budget, carried by the call's context: ahead serve's
// max_answer_bytes for the calls of HTTP requests). Over the budget, the
// read waits and the upstream is not read meanwhile (nothing is lost), as
// an HTTP upstream's answer waits (budget.go).
//
// Which call a message answers is known only from its id, which a server
// may write after the result (the TypeScript SDK does: {"result": …,
// "jsonrpc": "2.0", "id": 3}). Until its id has been read, a message's
// bytes are counted in the oldest call in flight on the connection whose
// context carries a budget; once the message is read whole, they move to
// the call it answers, or are given back if it answers none counted (a
// notification, a request from the server, a speculative call's answer:
// those are bounded per message, and speculative ones by the engine's
// budget). A budget that cannot give bytes back (no Shrink) keeps them
// until its request ends: more is counted, never less.

// meterChunk is the most read from the upstream at a time.
const meterChunk = budgetChunk

// maxMessage bounds one message of a stdio upstream, as the SDK does.
const maxMessage = mcp.DefaultMaxLineLength

// commandTransport runs an upstream's command and speaks MCP with it over
// its stdin and stdout, as mcp.CommandTransport does, through a stdioConn.
type commandTransport struct {
	cmd *exec.Cmd
	// terminate is how long closing waits for the command to exit once
	// its stdin is closed before it is sent SIGTERM, then SIGKILL.
	terminate time.Duration
}

func (t *commandTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	stdout, err := t.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stdin, err := t.cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if t.cmd.WaitDelay == 0 {
		// A child of the command holding its stderr open must not
		// keep Close waiting once the command itself is gone.
		t.cmd.WaitDelay = t.terminate
	}
	if err := t.cmd.Start(); err != nil {
		return nil, err
	}
	return newStdioConn(stdout, &process{cmd: t.cmd, stdin: stdin, terminate: t.terminate}), nil
}

// process is the command's stdin; closing it ends the command: stdin
// closed, then SIGTERM after terminate, then SIGKILL.
type process struct {
	cmd       *exec.Cmd
	stdin     io.WriteCloser
	terminate time.Duration
}

func (p *process) Write(b []byte) (int, error) { return p.stdin.Write(b) }

func (p *process) Close() error {
	// Whatever closing stdin says, the process is ended and waited for
	// (below): its end closes stdout, which ends the connection's read
	// loop.
	_ = p.stdin.Close()
	exited := make(chan error, 1)
	go func() { exited <- p.cmd.Wait() }() // ends with the process, which the steps below end
	wait := func() (error, bool) {
		t := time.NewTimer(p.terminate)
		defer t.Stop()
		select {
		case err := <-exited:
			return err, true
		case <-t.C:
			return nil, false
		}
	}
	if err, ok := wait(); ok {
		return err
	}
	// Where SIGTERM cannot be sent (Windows), straight to SIGKILL.
	if p.cmd.Process.Signal(syscall.SIGTERM) == nil {
		if err, ok := wait(); ok {
			return err
		}
	}
	_ = p.cmd.Process.Kill()
	return <-exited // the process is gone; WaitDelay bounds the wait for its pipes
}

// stdioConn is an MCP connection over a byte stream each way (a command's
// stdout and stdin): newline-delimited JSON-RPC messages (a batch, a JSON
// array, is read too), each read into a buffer of its own and counted
// (see above).
type stdioConn struct {
	w io.WriteCloser // closing it ends the stream read
	m *meter
	// end ends the meter's life: a read waiting for a budget stops.
	end context.CancelFunc

	writeMu sync.Mutex // serialises writes to w

	incoming  chan readResult   // from readLoop
	queue     []jsonrpc.Message // the rest of a batch; only Read touches it
	closed    chan struct{}
	closeOnce sync.Once
	closeErr  error
	loop      sync.WaitGroup // readLoop
}

var _ mcp.Connection = (*stdioConn)(nil)

// newStdioConn returns a connection reading r and writing w, whose Close
// must end r.
func newStdioConn(r io.Reader, w io.WriteCloser) *stdioConn {
	life, end := context.WithCancel(context.Background())
	c := &stdioConn{w: w, m: newMeter(life), end: end, incoming: make(chan readResult), closed: make(chan struct{})}
	c.loop.Go(func() { c.readLoop(r) })
	return c
}

// readResult is what readLoop read: a message, or a batch's, or why it
// stopped.
type readResult struct {
	msgs []jsonrpc.Message
	err  error
}

func (c *stdioConn) SessionID() string { return "" }

// Read returns the next message. The SDK calls it from one goroutine.
func (c *stdioConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(c.queue) == 0 {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case r := <-c.incoming:
			if r.err != nil {
				return nil, r.err
			}
			c.queue = r.msgs
		case <-c.closed:
			return nil, io.EOF
		}
	}
	m := c.queue[0]
	c.queue[0] = nil // not kept for the session's life (8 MiB a session, say)
	c.queue = c.queue[1:]
	return m, nil
}

// Write writes msg as one line. A call whose context carries a budget is
// registered with the meter, which counts its answer.
func (c *stdioConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	data, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return fmt.Errorf("encoding a message: %w", err)
	}
	var id string
	if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() {
		if b := backend.BudgetOf(ctx); b != nil {
			if raw, err := json.Marshal(req.ID.Raw()); err == nil {
				id = string(raw)
				c.m.add(id, ctx, b)
			}
		}
	}
	c.writeMu.Lock()
	_, err = c.w.Write(append(data, '\n'))
	c.writeMu.Unlock()
	if err != nil && id != "" {
		c.m.remove(id)
	}
	return err
}

// Close ends the stream (for a command: ends the command) and waits for
// the read loop.
func (c *stdioConn) Close() error {
	c.closeOnce.Do(func() {
		close(c.closed)
		c.end()
		c.closeErr = c.w.Close()
		c.loop.Wait()
	})
	return c.closeErr
}

// readLoop reads the messages until the stream ends, and hands them to
// Read.
func (c *stdioConn) readLoop(r io.Reader) {
	send := func(res readResult) bool {
		select {
		case c.incoming <- res:
			return true
		case <-c.closed:
			return false
		}
	}
	buf := make([]byte, meterChunk)
	var msg []byte
	m := c.m
	for {
		n, err := r.Read(buf)
		for rest := buf[:n]; len(rest) > 0; {
			if !m.f.started {
				// Between messages: not kept.
				if rest = bytes.TrimLeft(rest, " \t\r\n"); len(rest) == 0 {
					break
				}
				if rest[0] != '{' && rest[0] != '[' {
					send(readResult{err: fmt.Errorf("mcpproxy: upstream sent %q, not a JSON-RPC message", rest[:min(len(rest), 16)])})
					return
				}
			}
			k, ended := m.f.scan(rest)
			if len(msg)+k > maxMessage {
				send(readResult{err: fmt.Errorf("mcpproxy: upstream message over %d bytes", maxMessage)})
				return
			}
			msg = m.take(msg, rest[:k])
			rest = rest[k:]
			if !ended {
				continue
			}
			m.end()
			msgs, derr := decodeMessages(msg)
			msg = nil // the next message gets a buffer of its own
			if derr != nil {
				send(readResult{err: derr})
				return
			}
			if !send(readResult{msgs: msgs}) {
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				err = fmt.Errorf("reading the upstream: %w", err)
			}
			send(readResult{err: err})
			return
		}
	}
}

// decodeMessages decodes one message, or a batch of them.
func decodeMessages(data []byte) ([]jsonrpc.Message, error) {
	if data[0] == '[' {
		var raws []json.RawMessage
		if err := json.Unmarshal(data, &raws); err != nil {
			return nil, fmt.Errorf("mcpproxy: upstream batch: %w", err)
		}
		if len(raws) == 0 {
			return nil, errors.New("mcpproxy: upstream sent an empty batch")
		}
		msgs := make([]jsonrpc.Message, 0, len(raws))
		for _, raw := range raws {
			msg, err := jsonrpc.DecodeMessage(raw)
			if err != nil {
				return nil, fmt.Errorf("mcpproxy: upstream message: %w", err)
			}
			msgs = append(msgs, msg)
		}
		return msgs, nil
	}
	msg, err := jsonrpc.DecodeMessage(data)
	if err != nil {
		return nil, fmt.Errorf("mcpproxy: upstream message: %w", err)
	}
	return []jsonrpc.Message{msg}, nil
}

// A shrinker is a budget that can give back bytes it counted
// (server's hold).
type shrinker interface {
	Shrink(n int64)
}

// meterCall is a call in flight whose answer is counted.
type meterCall struct {
	ctx     context.Context
	b       backend.Budget
	seq     uint64 // order of writing
	release func() // of ctx
}

// meter counts each message a stdio upstream sends in the budget of the
// call it answers (see the top of this file).
type meter struct {
	life context.Context // ends with the connection: waits for budgets stop

	mu    sync.Mutex            // protects calls and seq
	calls map[string]*meterCall // by the id's JSON
	seq   uint64

	// The message being read: only the read loop touches these.
	f       frameScan
	owner   *meterCall // counts the message's bytes; nil: none
	ownerID string     // owner's id
	counted int64      // bytes of the message counted in owner
}

func newMeter(life context.Context) *meter {
	return &meter{life: life, calls: make(map[string]*meterCall)}
}

// add registers the call of id, made with ctx, whose answer b counts.
// Its waits for b end with ctx or with the connection.
func (m *meter) add(id string, ctx context.Context, b backend.Budget) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(m.life, cancel)
	m.mu.Lock()
	defer m.mu.Unlock()
	if old := m.calls[id]; old != nil {
		old.release()
	}
	m.seq++
	m.calls[id] = &meterCall{ctx: ctx, b: b, seq: m.seq, release: func() { stop(); cancel() }}
}

func (m *meter) remove(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c := m.calls[id]; c != nil {
		c.release()
		delete(m.calls, id)
	}
}

// call is the call of id still in flight; nil if none.
func (m *meter) call(id string) *meterCall {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := m.calls[id]
	if c != nil && c.ctx.Err() != nil {
		c.release()
		delete(m.calls, id) // it ended unanswered (cancelled)
		return nil
	}
	return c
}

// oldest is the call written first among those still in flight.
func (m *meter) oldest() (string, *meterCall) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var id string
	var o *meterCall
	for k, c := range m.calls {
		if c.ctx.Err() != nil {
			c.release()
			delete(m.calls, k)
			continue
		}
		if o == nil || c.seq < o.seq {
			id, o = k, c
		}
	}
	return id, o
}

// take appends b, bytes of the message being read, to msg, counting what
// msg grows by before it grows.
func (m *meter) take(msg, b []byte) []byte {
	if len(msg)+len(b) > cap(msg) {
		c := min(max(2*cap(msg), len(msg)+len(b), 4<<10), maxMessage)
		m.count(int64(c - cap(msg)))
		msg = append(make([]byte, 0, c), msg...)
	}
	return append(msg, b...)
}

// count counts n more bytes of the message being read.
func (m *meter) count(n int64) {
	if m.counted == 0 && m.owner == nil {
		m.ownerID, m.owner = m.oldest() // until its id tells
	}
	if id, ok := m.f.id(); ok && id != m.ownerID {
		m.move(id, m.call(id)) // its id tells: the bytes so far go to its call
	}
	if m.owner == nil {
		return
	}
	if err := m.owner.b.Grow(m.owner.ctx, n); err != nil {
		// The call ended while its answer waited for the budget:
		// nothing more is counted for it (its request gives back what
		// it counted); the rest of the message is read uncounted.
		m.remove(m.ownerID)
		m.owner, m.ownerID, m.counted = nil, "", 0
		return
	}
	m.counted += n
}

// move takes the bytes counted so far of the message from its owner to c
// (nil: none), the call of id.
func (m *meter) move(id string, c *meterCall) {
	if c == m.owner {
		m.ownerID = id
		return
	}
	if m.owner != nil && m.counted > 0 {
		if s, ok := m.owner.b.(shrinker); ok {
			s.Shrink(m.counted)
		}
	}
	counted := m.counted
	m.owner, m.ownerID, m.counted = c, id, 0
	if c != nil && counted > 0 {
		if err := c.b.Grow(c.ctx, counted); err != nil {
			m.remove(id)
			m.owner, m.ownerID = nil, ""
			return
		}
		m.counted = counted
	}
}

// end closes the message read whole: its bytes stay with the call it
// answers (released when that call's answer is written), or are given
// back.
func (m *meter) end() {
	id, ok := m.f.id()
	if ok && !m.f.method {
		m.move(id, m.call(id))
		m.remove(id) // answered
	} else {
		m.move("", nil)
	}
	m.owner, m.ownerID, m.counted = nil, "", 0
	m.f = frameScan{}
}

// frameScan follows one JSON value (a JSON-RPC message) through the bytes
// of a stream, enough to tell where it ends, its top-level "id" and
// whether it has a top-level "method" (a request or a notification, not
// an answer).
type frameScan struct {
	started bool // a byte of the value was seen
	depth   int
	inStr   bool
	esc     bool
	key     bool   // the string being read is a top-level key
	wantKey bool   // at depth 1, the next string is a key
	buf     []byte // the top-level key being read, or the id's value (short)
	last    string // the last top-level key read
	inID    bool   // reading the id's value
	idRaw   []byte
	idDone  bool
	method  bool
}

// maxScanned bounds the key and id bytes kept: longer keys are not "id"
// or "method", and a longer id is not ahead's.
const maxScanned = 64

// id returns the message's id, as JSON, once read.
func (f *frameScan) id() (string, bool) {
	if !f.idDone {
		return "", false
	}
	return string(f.idRaw), true
}

// scan reads b up to the end of the value (if it ends in b) and returns
// how many bytes it read and whether the value ended. Bytes before the
// value (whitespace between messages) are read with started false.
func (f *frameScan) scan(b []byte) (int, bool) {
	for i := 0; i < len(b); i++ {
		c := b[i]
		if f.inStr {
			if f.esc {
				f.esc = false
				f.keep(c)
				continue
			}
			if !f.key && !f.inID {
				// Skip to the next quote or backslash: outputs are
				// long strings.
				j := i
				for j < len(b) && b[j] != '"' && b[j] != '\\' {
					j++
				}
				if i = j; i == len(b) {
					return len(b), false
				}
				c = b[i]
			}
			switch c {
			case '\\':
				f.esc = true
				f.keep(c)
			case '"':
				f.inStr = false
				if f.key {
					f.key = false
					f.last = string(f.buf)
					f.buf = f.buf[:0]
					if f.last == "method" {
						f.method = true
					}
				} else {
					f.keep(c)
				}
			default:
				f.keep(c)
			}
			continue
		}
		switch c {
		case ' ', '\t', '\r', '\n':
			if !f.started {
				continue
			}
		}
		f.started = true
		switch c {
		case '"':
			f.inStr = true
			if f.depth == 1 && f.wantKey {
				f.key = true
				f.wantKey = false
				f.buf = f.buf[:0]
			} else {
				f.keep(c)
			}
		case '{', '[':
			f.depth++
			f.wantKey = f.depth == 1 && c == '{'
			f.keep(c)
		case '}', ']':
			f.depth--
			if f.depth == 0 {
				f.endID()
				return i + 1, true
			}
			f.keep(c)
		case ':':
			if f.depth == 1 && f.last == "id" && !f.idDone {
				f.inID = true
				f.idRaw = f.idRaw[:0]
				continue
			}
			f.keep(c)
		case ',':
			if f.depth == 1 {
				f.endID()
				f.wantKey = true
				continue
			}
			f.keep(c)
		case ' ', '\t', '\r', '\n':
		default:
			f.keep(c)
			if f.depth == 0 {
				// A top-level scalar: not a message; the SDK's
				// decoder fails on it. Nothing to count.
				f.started = false
			}
		}
	}
	return len(b), false
}

// keep keeps c of a key being read, or of the id's value.
func (f *frameScan) keep(c byte) {
	switch {
	case f.key:
		if len(f.buf) <= maxScanned {
			f.buf = append(f.buf, c)
		}
	case f.inID:
		if len(f.idRaw) <= maxScanned {
			f.idRaw = append(f.idRaw, c)
		}
	}
}

// endID ends the id's value, if it was being read.
func (f *frameScan) endID() {
	if f.inID {
		f.inID = false
		f.idDone = len(f.idRaw) <= maxScanned
	}
}
