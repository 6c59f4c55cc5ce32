package gateway

import (
	"bytes"
	"encoding/json"
	"errors"

	"github.com/ahead-dev/ahead/callkey"
)

// Limits that bound a stream parser's memory; a stream past them is
// relayed unparsed.
const (
	maxEvent     = 4 << 20 // one SSE event's data
	maxOpenCalls = 256     // tool calls being assembled at once
)

var errTooLarge = errors.New("gateway: response too large to parse")

// toolCall is a call complete in the model's response. Args is the
// canonical JSON of its arguments.
type toolCall struct {
	ID   string
	Name string
	Args json.RawMessage
}

// callParser is fed a response body in arbitrary pieces. write copies
// what it keeps; an error means it gave up. end marks the end of the body.
type callParser interface {
	write(p []byte) error
	end()
}

// emitCall passes on a call whose arguments are a JSON object (empty means
// {}); a call whose arguments do not parse is not offered.
func emitCall(emit func(toolCall), id, name string, args []byte) {
	if name == "" {
		return
	}
	canon, err := callkey.Canonical(args)
	if err != nil {
		return
	}
	emit(toolCall{ID: id, Name: name, Args: canon})
}

// sseDecoder splits a text/event-stream into events as the HTML standard
// defines them: lines end in \n, \r\n or \r (even split across writes);
// "data:" lines accumulate, joined by \n; a blank line dispatches; lines
// starting with ':' are comments.
type sseDecoder struct {
	line   []byte
	event  []byte
	data   []byte
	hasCR  bool // the last byte seen was \r: a following \n is part of it
	hasDat bool
	on     func(event, data []byte)
}

func (d *sseDecoder) write(p []byte) error {
	for len(p) > 0 {
		if d.hasCR {
			d.hasCR = false
			if p[0] == '\n' {
				p = p[1:]
				continue
			}
		}
		i := bytes.IndexAny(p, "\r\n")
		if i < 0 {
			if len(d.line)+len(p) > maxEvent {
				return errTooLarge
			}
			d.line = append(d.line, p...)
			return nil
		}
		var line []byte
		if len(d.line) > 0 {
			if len(d.line)+i > maxEvent {
				return errTooLarge
			}
			d.line = append(d.line, p[:i]...)
			line = d.line
		} else {
			line = p[:i]
		}
		d.hasCR = p[i] == '\r'
		p = p[i+1:]
		if err := d.field(line); err != nil {
			return err
		}
		d.line = d.line[:0]
	}
	return nil
}

func (d *sseDecoder) field(line []byte) error {
	if len(line) == 0 {
		if d.hasDat {
			d.on(d.event, d.data)
		}
		d.event, d.data, d.hasDat = d.event[:0], d.data[:0], false
		return nil
	}
	name, value, _ := bytes.Cut(line, []byte{':'})
	if len(value) > 0 && value[0] == ' ' {
		value = value[1:]
	}
	switch string(name) {
	case "data":
		if len(d.data)+len(value)+1 > maxEvent {
			return errTooLarge
		}
		if d.hasDat {
			d.data = append(d.data, '\n')
		}
		d.data, d.hasDat = append(d.data, value...), true
	case "event":
		d.event = append(d.event[:0], value...)
	}
	return nil
}

// newStreamParser returns the parser of an API's event stream.
func newStreamParser(a api, emit func(toolCall)) callParser {
	var s interface {
		event(event, data []byte)
		finish()
		failed() bool
	}
	switch a {
	case apiChat:
		s = &chatStream{emit: emit}
	case apiResponses:
		s = &responsesStream{emit: emit}
	case apiMessages:
		s = &messagesStream{emit: emit}
	default:
		return nil
	}
	p := &streamParser{s: s}
	p.dec.on = s.event
	return p
}

type streamParser struct {
	dec sseDecoder
	s   interface {
		event(event, data []byte)
		finish()
		failed() bool
	}
}

func (p *streamParser) write(b []byte) error {
	if err := p.dec.write(b); err != nil {
		return err
	}
	if p.s.failed() {
		return errTooLarge
	}
	return nil
}

// end completes the calls still open: the stream has ended. An event the
// stream left unterminated is discarded, as the standard says.
func (p *streamParser) end() { p.s.finish() }

// pending is a call being assembled from fragments.
type pending struct {
	key  int // the API's index of the call
	id   string
	name string
	args []byte
	// input is the arguments given whole (Anthropic's content_block_start
	// input), used when no fragments came.
	input    []byte
	hasFrags bool
}

// calls is the set of open calls of one stream, in the order they started.
type calls struct {
	open []*pending
	over bool // too many open calls or too many bytes: gave up
	size int
}

func (c *calls) start(key int, id, name string) *pending {
	if c.find(key) != nil {
		return c.find(key)
	}
	if len(c.open) >= maxOpenCalls {
		c.over = true
		return nil
	}
	p := &pending{key: key, id: id, name: name}
	c.open = append(c.open, p)
	return p
}

func (c *calls) find(key int) *pending {
	for _, p := range c.open {
		if p.key == key {
			return p
		}
	}
	return nil
}

func (c *calls) appendArgs(p *pending, frag string) {
	if c.size += len(frag); c.size > maxEvent {
		c.over = true
		return
	}
	p.args = append(p.args, frag...)
	p.hasFrags = true
}

// complete emits and forgets the open call with key.
func (c *calls) complete(key int, emit func(toolCall)) {
	for i, p := range c.open {
		if p.key == key {
			c.open = append(c.open[:i], c.open[i+1:]...)
			c.size -= len(p.args)
			args := p.args
			if !p.hasFrags {
				args = p.input
			}
			emitCall(emit, p.id, p.name, args)
			return
		}
	}
}

// completeAll emits every open call, in the order they started.
func (c *calls) completeAll(emit func(toolCall)) {
	for len(c.open) > 0 {
		c.complete(c.open[0].key, emit)
	}
}

// chatStream follows chat-completions deltas. A call is complete when a
// later call of the same choice starts, when its choice finishes, or when
// the stream ends ([DONE] or EOF).
type chatStream struct {
	emit  func(toolCall)
	calls calls
	done  bool
}

type chatCall struct {
	Index    int    `json:"index"`
	ID       string `json:"id"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// chatKey keys a call by choice and index (choices are few, calls fewer
// than 1<<16).
func chatKey(choice, index int) int { return choice<<16 | index&0xffff }

func (s *chatStream) event(_, data []byte) {
	if s.done || s.calls.over {
		return
	}
	if bytes.Equal(data, []byte("[DONE]")) {
		s.finish()
		return
	}
	var v struct {
		Choices []struct {
			Index int `json:"index"`
			Delta struct {
				ToolCalls []chatCall `json:"tool_calls"`
			} `json:"delta"`
			FinishReason *string `json:"finish_reason"`
		} `json:"choices"`
	}
	if json.Unmarshal(data, &v) != nil {
		return
	}
	for _, ch := range v.Choices {
		for _, tc := range ch.Delta.ToolCalls {
			key := chatKey(ch.Index, tc.Index)
			p := s.calls.find(key)
			if p == nil {
				// A new call: the choice's earlier calls are complete.
				for _, q := range append([]*pending(nil), s.calls.open...) {
					if q.key>>16 == ch.Index && q.key < key {
						s.calls.complete(q.key, s.emit)
					}
				}
				if p = s.calls.start(key, tc.ID, tc.Function.Name); p == nil {
					return
				}
			}
			if p.name == "" {
				p.name = tc.Function.Name
			}
			if p.id == "" {
				p.id = tc.ID
			}
			s.calls.appendArgs(p, tc.Function.Arguments)
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			for _, q := range append([]*pending(nil), s.calls.open...) {
				if q.key>>16 == ch.Index {
					s.calls.complete(q.key, s.emit)
				}
			}
		}
	}
}

func (s *chatStream) finish() {
	if !s.done && !s.calls.over {
		s.calls.completeAll(s.emit)
	}
	s.done = true
}

func (s *chatStream) failed() bool { return s.calls.over }

// responsesItem is a Responses API output item.
type responsesItem struct {
	Type      string `json:"type"`
	ID        string `json:"id"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// responsesStream follows Responses events. A function_call item is
// complete at response.function_call_arguments.done or
// response.output_item.done, whichever comes first; each item is offered
// once.
type responsesStream struct {
	emit  func(toolCall)
	items map[int]*responsesItem // by output_index, from output_item.added
	done  map[int]bool
}

func (s *responsesStream) event(_, data []byte) {
	var v struct {
		Type        string         `json:"type"`
		OutputIndex int            `json:"output_index"`
		Item        *responsesItem `json:"item"`
		Arguments   *string        `json:"arguments"`
		Name        string         `json:"name"`
	}
	if json.Unmarshal(data, &v) != nil {
		return
	}
	if s.items == nil {
		s.items, s.done = map[int]*responsesItem{}, map[int]bool{}
	}
	switch v.Type {
	case "response.output_item.added":
		if v.Item != nil && v.Item.Type == "function_call" && len(s.items) < maxOpenCalls {
			s.items[v.OutputIndex] = v.Item
		}
	case "response.function_call_arguments.done":
		it := s.items[v.OutputIndex]
		if it == nil || v.Arguments == nil || s.done[v.OutputIndex] {
			return
		}
		name := v.Name
		if name == "" {
			name = it.Name
		}
		s.done[v.OutputIndex] = true
		delete(s.items, v.OutputIndex)
		emitCall(s.emit, it.CallID, name, []byte(*v.Arguments))
	case "response.output_item.done":
		it := v.Item
		if it == nil || it.Type != "function_call" || s.done[v.OutputIndex] {
			return
		}
		s.done[v.OutputIndex] = true
		delete(s.items, v.OutputIndex)
		emitCall(s.emit, it.CallID, it.Name, []byte(it.Arguments))
	}
}

// finish offers nothing more: a Responses call is only known complete from
// its own done events (the deltas carry no name).
func (s *responsesStream) finish() {}

func (s *responsesStream) failed() bool { return false }

// messagesStream follows Anthropic content blocks. A tool_use block is
// complete at its content_block_stop, when a later block starts, or when
// the message ends.
type messagesStream struct {
	emit  func(toolCall)
	calls calls
	done  bool
}

func (s *messagesStream) event(_, data []byte) {
	if s.done || s.calls.over {
		return
	}
	var v struct {
		Type         string `json:"type"`
		Index        int    `json:"index"`
		ContentBlock *struct {
			Type  string          `json:"type"`
			ID    string          `json:"id"`
			Name  string          `json:"name"`
			Input json.RawMessage `json:"input"`
		} `json:"content_block"`
		Delta *struct {
			Type        string `json:"type"`
			PartialJSON string `json:"partial_json"`
		} `json:"delta"`
	}
	if json.Unmarshal(data, &v) != nil {
		return
	}
	switch v.Type {
	case "content_block_start":
		for _, q := range append([]*pending(nil), s.calls.open...) {
			if q.key < v.Index {
				s.calls.complete(q.key, s.emit)
			}
		}
		if b := v.ContentBlock; b != nil && b.Type == "tool_use" {
			if p := s.calls.start(v.Index, b.ID, b.Name); p != nil {
				p.input = append([]byte(nil), b.Input...)
			}
		}
	case "content_block_delta":
		if v.Delta != nil && v.Delta.Type == "input_json_delta" {
			if p := s.calls.find(v.Index); p != nil {
				s.calls.appendArgs(p, v.Delta.PartialJSON)
			}
		}
	case "content_block_stop":
		s.calls.complete(v.Index, s.emit)
	case "message_stop":
		s.finish()
	}
}

func (s *messagesStream) finish() {
	if !s.done && !s.calls.over {
		s.calls.completeAll(s.emit)
	}
	s.done = true
}

func (s *messagesStream) failed() bool { return s.calls.over }
