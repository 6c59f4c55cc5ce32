package gateway

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"sync"
	"time"

	"github.com/ahead-dev/ahead/predict"
)

// teeLimit bounds the bytes a parser may fall behind the copy; past it the
// parser gives up and the relay goes on alone.
const teeLimit = 1 << 20

// tee passes the copy's reads to a parser without ever making the copy
// wait: Write appends to a pending buffer under a mutex and returns; the
// parser swaps the pending buffer with its own. When the pending bytes
// would pass teeLimit the tee is overrun and drops everything after.
// The two buffers grow to the largest backlog and are then reused, so the
// tee allocates per turn, not per byte.
type tee struct {
	mu      sync.Mutex // protects the fields below
	pending []byte
	closed  bool // the body ended (or the parser quit)
	cut     bool // the body ended early (a failed read or write)
	overrun bool
	wake    chan struct{} // capacity 1: a Write or Close happened
}

func newTee() *tee { return &tee{wake: make(chan struct{}, 1)} }

// teeBufs keeps the tee's two buffers between turns (as *[]byte), so that
// once they have grown to the backlog parsers lag behind by (at most
// teeLimit), a turn allocates nothing for them however long its body.
var teeBufs = sync.Pool{New: func() any { return new([]byte) }}

// buffers returns the tee's two buffers, from teeBufs: pending's storage
// and the parser's first spare.
func (t *tee) buffers() (a, b *[]byte, spare []byte) {
	a, b = teeBufs.Get().(*[]byte), teeBufs.Get().(*[]byte)
	t.mu.Lock()
	if t.pending == nil && !t.closed && !t.overrun {
		t.pending = (*a)[:0]
	}
	t.mu.Unlock()
	return a, b, (*b)[:0]
}

// release ends the tee for good (a Write after it keeps nothing) and puts
// its buffers back: the parser's last spare and whatever pending holds.
func (t *tee) release(a, b *[]byte, spare []byte) {
	t.mu.Lock()
	t.closed = true
	p := t.pending
	t.pending = nil
	t.mu.Unlock()
	*a, *b = p[:0], spare[:0]
	teeBufs.Put(a)
	teeBufs.Put(b)
}

// Write never blocks and never fails.
func (t *tee) Write(p []byte) {
	t.mu.Lock()
	switch {
	case t.closed || t.overrun:
	case len(t.pending)+len(p) > teeLimit:
		t.overrun, t.pending = true, t.pending[:0] // kept for teeBufs, never read
	default:
		t.pending = append(t.pending, p...)
	}
	t.mu.Unlock()
	t.signal()
}

// Close marks the end of the body; cut says it ended early.
func (t *tee) Close(cut bool) {
	t.mu.Lock()
	t.closed, t.cut = true, t.cut || cut
	t.mu.Unlock()
	t.signal()
}

func (t *tee) signal() {
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// next waits for bytes and returns them in spare's storage (swapped with
// the pending buffer). end is true once the body has ended and every byte
// has been returned; stop is true if the parser fell behind or the body
// was cut: what is still open in it is not known complete.
func (t *tee) next(spare []byte) (p []byte, end, stop bool) {
	for {
		t.mu.Lock()
		if t.overrun {
			t.closed = true
			t.mu.Unlock()
			return nil, true, true
		}
		if len(t.pending) > 0 {
			p, t.pending = t.pending, spare[:0]
			t.mu.Unlock()
			return p, false, false
		}
		if t.closed {
			cut := t.cut
			t.mu.Unlock()
			return nil, true, cut
		}
		t.mu.Unlock()
		<-t.wake
	}
}

// quit stops the tee from keeping bytes for a parser that has given up.
func (t *tee) quit() {
	t.mu.Lock()
	t.closed, t.pending = true, nil
	t.mu.Unlock()
}

// turn is one heard request and its response, parsed on a goroutine owned
// by the Gateway.
type turn struct {
	g       *Gateway
	session string // "" until run names it (no Ahead-Session)
	auto    bool   // the gateway named the session
	api     api
	tee     *tee
	resp    chan response // the response's head, or closed: none came
	parsed  chan struct{} // closed when run returns, under Gateway.mu
	// before are the turns whose body had ended, unparsed, when this
	// one began (only when the gateway names its session): run waits
	// for them before it names it. A turn waits only for turns that
	// ended before it began, so no two wait for each other.
	before []*turn
}

type response struct {
	sent     time.Time
	status   int
	ctype    string
	encoding string
}

func (g *Gateway) startTurn(ctx context.Context, session string, a api, body []byte) *turn {
	t := &turn{g: g, session: session, api: a, tee: newTee(), resp: make(chan response, 1), parsed: make(chan struct{})}
	if session == "" {
		g.mu.Lock()
		for b := range g.ended {
			t.before = append(t.before, b)
		}
		g.mu.Unlock()
	}
	ctx = context.WithoutCancel(ctx) // what was heard stays heard
	g.wg.Go(func() { t.run(ctx, body) })
	return t
}

// respond passes the response head to the parser.
func (t *turn) respond(sent time.Time, res *http.Response) {
	t.resp <- response{
		sent: sent, status: res.StatusCode,
		ctype: res.Header.Get("Content-Type"), encoding: res.Header.Get("Content-Encoding"),
	}
	close(t.resp)
}

// abandon says no response will come.
func (t *turn) abandon() {
	close(t.resp)
	t.tee.Close(true)
}

// close marks the end of the response body; cut says it ended early.
func (t *turn) close(cut bool) {
	t.tee.Close(cut)
	g := t.g
	g.mu.Lock()
	select {
	case <-t.parsed: // run has returned: nothing to wait for
	default:
		g.ended[t] = struct{}{}
	}
	g.mu.Unlock()
}

// finish marks the turn parsed (under Gateway.mu, so that close sees it).
func (t *turn) finish() {
	g := t.g
	g.mu.Lock()
	close(t.parsed)
	delete(g.ended, t)
	g.mu.Unlock()
}

func (t *turn) run(ctx context.Context, body []byte) {
	defer t.finish()
	msgs, appendOnly, ok := requestMessages(t.api, body)
	if t.session == "" {
		if !ok {
			// Nothing to go on: relayed, not heard.
			<-t.resp
			t.tee.quit()
			return
		}
		// The calls whose results this request returns were emitted in
		// responses that had ended when it began; their parsers, running
		// beside the copy, may not have remembered them yet.
		for _, b := range t.before {
			<-b.parsed
		}
		t.before = nil
		t.session, t.auto = t.g.conversation(msgs), true
	}
	// What the session has done when its agent asks the model: the
	// response's calls come after it. Read before the response can reach
	// the agent, unless this goroutine is slower than the upstream's first
	// call and the agent's own call; then seq is too high, and a late offer
	// is taken for the next call (as if no seq were known), never refused
	// wrongly. The name is the one the engine knew then: if it is folded
	// into the tool side's session later, the engine takes the offers for
	// the next call of that session (engine.Engine.Join).
	session := t.g.engineSession(t.session)
	seq := t.g.opts.Engine.NextSeq(session)
	if ok {
		t.g.declare(ctx, session, t.api, body)
		t.g.hear(ctx, t.session, msgs, appendOnly)
	}
	res, ok := <-t.resp
	if !ok || res.status != http.StatusOK {
		t.tee.quit()
		return
	}
	sink := &offerer{g: t.g, session: t.session, engine: session, seq: seq, auto: t.auto, sent: res.sent}
	p := t.parser(res, sink.offer)
	if p == nil {
		t.tee.quit()
		return
	}
	a, b, spare := t.tee.buffers()
	defer func() { t.tee.release(a, b, spare) }()
	for {
		chunk, end, stop := t.tee.next(spare)
		if stop {
			t.g.log.Debug("gateway: response cut or parser behind; what is open is not offered", "session", t.session)
			return
		}
		if end {
			p.end()
			return
		}
		if err := p.write(chunk); err != nil {
			t.g.log.Debug("gateway: response not parsed", "session", t.session, "err", err)
			t.tee.quit()
			return
		}
		spare = chunk
	}
}

// parser picks the parser for a response, or nil when ahead cannot parse
// it (an encoding other than gzip on a JSON body, or an unknown type).
func (t *turn) parser(res response, emit func(toolCall)) callParser {
	ctype, _, _ := mime.ParseMediaType(res.ctype)
	enc := res.encoding
	if enc == "identity" {
		enc = ""
	}
	switch {
	case ctype == "text/event-stream" && enc == "":
		return newStreamParser(t.api, emit)
	case ctype == "application/json" && (enc == "" || enc == "gzip"):
		return &bodyParser{api: t.api, emit: emit, gzip: enc == "gzip"}
	}
	return nil
}

// offerer turns complete tool calls into offers.
type offerer struct {
	g       *Gateway
	session string // the gateway's name for the conversation
	engine  string // the engine's, when the request was heard
	seq     int    // the engine's NextSeq then
	auto    bool   // the gateway named the session: its calls are remembered for linking
	sent    time.Time
	calls   int
}

func (o *offerer) offer(c toolCall) {
	// Remembered first: the agent's call may reach the tool side as soon
	// as the engine has it.
	if l := o.g.opts.Linker; l != nil && o.auto {
		if into, ok := l.Remember(o.session, c.ID, c.Name, c.Args, o.sent); ok {
			// The agent made the call before it was heard: the call
			// links all the same, late (Linker).
			o.g.opts.Engine.Join(o.session, into)
		}
	}
	if o.calls == 0 {
		o.g.opts.Engine.ThinkTime(o.engine, time.Since(o.sent))
	}
	// The agent makes a response's calls in order, one seq each (in one
	// step if it runs them at once, which the engine allows for).
	seq := o.seq + o.calls
	o.calls++
	if !o.g.opts.Engine.Offer(o.engine, seq, []predict.Prediction{{
		Tool: c.Name, Args: c.Args, P: 1, Origin: predict.OriginStream, CallID: c.ID,
	}}) {
		o.g.log.Debug("gateway: a call complete in the stream came after the agent moved on", "session", o.engine, "tool", c.Name)
	}
}

// maxBodyParse bounds a non-streamed response body kept for parsing, and
// what a gzip body may expand to.
const maxBodyParse = 8 << 20

// bodyParser parses a whole non-streamed response when it ends.
type bodyParser struct {
	api  api
	emit func(toolCall)
	gzip bool
	buf  []byte
}

func (p *bodyParser) write(b []byte) error {
	if len(p.buf)+len(b) > maxBodyParse {
		return errTooLarge
	}
	p.buf = append(p.buf, b...)
	return nil
}

func (p *bodyParser) end() {
	data := p.buf
	if p.gzip {
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return
		}
		if data, err = io.ReadAll(io.LimitReader(zr, maxBodyParse)); err != nil {
			return
		}
	}
	parseBody(p.api, data, p.emit)
}

// parseBody finds the tool calls of a whole response body.
func parseBody(a api, data []byte, emit func(toolCall)) {
	switch a {
	case apiChat:
		var v struct {
			Choices []struct {
				Message struct {
					ToolCalls []chatCall `json:"tool_calls"`
				} `json:"message"`
			} `json:"choices"`
		}
		if json.Unmarshal(data, &v) != nil {
			return
		}
		for _, ch := range v.Choices {
			for _, c := range ch.Message.ToolCalls {
				emitCall(emit, c.ID, c.Function.Name, []byte(c.Function.Arguments))
			}
		}
	case apiResponses:
		var v struct {
			Output []responsesItem `json:"output"`
		}
		if json.Unmarshal(data, &v) != nil {
			return
		}
		for _, it := range v.Output {
			if it.Type == "function_call" {
				emitCall(emit, it.CallID, it.Name, []byte(it.Arguments))
			}
		}
	case apiMessages:
		var v struct {
			Content []struct {
				Type  string          `json:"type"`
				ID    string          `json:"id"`
				Name  string          `json:"name"`
				Input json.RawMessage `json:"input"`
			} `json:"content"`
		}
		if json.Unmarshal(data, &v) != nil {
			return
		}
		for _, b := range v.Content {
			if b.Type == "tool_use" {
				emitCall(emit, b.ID, b.Name, b.Input)
			}
		}
	}
}
