package trace

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// This file holds what the transcript importers (openai.go, anthropic.go)
// share: finding the conversations of a file, and a transcript that pairs
// results with calls and numbers calls and messages as the trace format
// says.

// ImportOptions configure an importer. The zero value is valid.
type ImportOptions struct {
	// SkipBad skips tool calls whose arguments are not a JSON object
	// (counted in ImportStats.Bad) instead of failing.
	SkipBad bool
}

// ImportStats count what an import found.
type ImportStats struct {
	Sessions   int // conversations that produced at least one event
	Calls      int // call events produced
	Messages   int // message events produced
	Unanswered int // tool calls without a result (not turned into events)
	Orphans    int // tool results that answer no pending call
	Bad        int // calls skipped for malformed arguments (SkipBad)
}

// A messageFunc feeds one message (or item) of a conversation to t.
type messageFunc func(t *transcript, m rawMsg) error

// importFile splits data into conversations and feeds each message of
// each to conv. A conversation's session id is its "session_id",
// "session" or "id" field when it has one, else name (with "/N" appended
// when the file holds several conversations).
func importFile(name string, data []byte, opts *ImportOptions, stats *ImportStats, conv messageFunc) ([]Event, error) {
	var o ImportOptions
	if opts != nil {
		o = *opts
	}
	if stats == nil {
		stats = new(ImportStats)
	}
	convs, err := splitConversations(name, data)
	if err != nil {
		return nil, err
	}
	var out []Event
	for i, c := range convs {
		id := c.id
		if id == "" {
			id = name
			if len(convs) > 1 {
				id = name + "/" + strconv.Itoa(i)
			}
		}
		t := &transcript{name: name, data: data, session: id, opts: o, stats: stats}
		if c.system != nil {
			text, err := contentText(c.system)
			if err != nil {
				return nil, importError(name, data, c.off, "system", err)
			}
			t.message(RoleSystem, text)
		}
		for _, m := range c.msgs {
			if err := conv(t, m); err != nil {
				return nil, err
			}
		}
		evs := t.events()
		if len(evs) > 0 {
			stats.Sessions++
		}
		out = append(out, evs...)
	}
	return out, nil
}

// conversation is one transcript: its messages with their byte offsets,
// and the system prompt of a request-shaped object ("system").
type conversation struct {
	id     string
	off    int64
	system json.RawMessage
	msgs   []rawMsg
}

type rawMsg struct {
	off  int64 // offset in the file, for error positions
	i    int   // index in its conversation, for error fields
	data json.RawMessage
}

// importError names file:line of an offset.
func importError(name string, data []byte, off int64, field string, err error) error {
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	line := 1 + bytes.Count(data[:off], []byte{'\n'})
	return &LineError{File: name, Line: line, Field: field, Err: err}
}

// splitConversations finds the conversations of a file: a JSON array of
// messages, or one JSON value or JSONL line per message (one conversation),
// or objects with a "messages" array, one per line or in a JSON array (one
// conversation each).
func splitConversations(name string, data []byte) ([]conversation, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	var loose conversation // messages given one per value
	var convs []conversation
	add := func(off int64, v json.RawMessage) error {
		var probe struct {
			Messages  json.RawMessage `json:"messages"`
			System    json.RawMessage `json:"system"`
			Role      *string         `json:"role"`
			Type      *string         `json:"type"`
			SessionID json.RawMessage `json:"session_id"`
			Session   json.RawMessage `json:"session"`
			ID        json.RawMessage `json:"id"`
		}
		if err := json.Unmarshal(v, &probe); err != nil {
			return importError(name, data, off, "", fmt.Errorf("want a message or a conversation object: %v", err))
		}
		switch {
		case probe.Messages != nil:
			var msgs []json.RawMessage
			if err := json.Unmarshal(probe.Messages, &msgs); err != nil {
				return importError(name, data, off, "messages", fmt.Errorf("want an array: %v", err))
			}
			c := conversation{id: firstString(probe.SessionID, probe.Session, probe.ID), off: off}
			if s := bytes.TrimSpace(probe.System); len(s) > 0 && string(s) != "null" {
				c.system = s
			}
			for i, m := range msgs {
				c.msgs = append(c.msgs, rawMsg{off: off, i: i, data: m})
			}
			convs = append(convs, c)
		case probe.Role != nil || probe.Type != nil:
			loose.msgs = append(loose.msgs, rawMsg{off: off, i: len(loose.msgs), data: v})
		default:
			return importError(name, data, off, "", errors.New(`want a message ("role") or a conversation ("messages")`))
		}
		return nil
	}
	for {
		// The offset where the next value starts (InputOffset is just
		// after the previous one, before the newline that ends its line).
		off := dec.InputOffset()
		for off < int64(len(data)) && (data[off] == ' ' || data[off] == '\t' || data[off] == '\n' || data[off] == '\r') {
			off++
		}
		var v json.RawMessage
		err := dec.Decode(&v)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, importError(name, data, off, "", err)
		}
		v = bytes.TrimSpace(v)
		if len(v) > 0 && v[0] == '[' {
			var elems []json.RawMessage
			if err := json.Unmarshal(v, &elems); err != nil {
				return nil, importError(name, data, off, "", err)
			}
			for _, e := range elems {
				if err := add(off, e); err != nil {
					return nil, err
				}
			}
			continue
		}
		if err := add(off, v); err != nil {
			return nil, err
		}
	}
	if len(loose.msgs) > 0 {
		convs = append([]conversation{loose}, convs...)
	}
	return convs, nil
}

func firstString(vs ...json.RawMessage) string {
	for _, v := range vs {
		var s string
		if json.Unmarshal(v, &s) == nil && s != "" {
			return s
		}
	}
	return ""
}

// transcript accumulates one conversation's calls and messages in the
// order they were said, pairs results with calls, and turns them into
// events (events).
type transcript struct {
	name    string // file, for errors
	data    []byte
	session string
	opts    ImportOptions
	stats   *ImportStats

	items []importItem
	calls []*pendingCall // in order, for pairing results
	turn  *modelTurn     // the model turn being read, nil between turns
}

// importItem is a call or a message, in transcript order.
type importItem struct {
	call *pendingCall
	msg  Event // when call is nil
	turn *modelTurn
}

// modelTurn is one model turn: its text and the calls it issued share a
// step.
type modelTurn struct {
	emitted bool // some call of the turn was answered
	step    int
}

type pendingCall struct {
	ev       Event
	answered bool
}

// fail returns err as an error of message m at field, which continues the
// message's own name ("messages[3]" + ".content").
func (t *transcript) fail(m rawMsg, field string, err error) error {
	return importError(t.name, t.data, m.off, fmt.Sprintf("messages[%d]%s", m.i, field), err)
}

// startTurn begins a new model turn; endTurn marks that the model's turn is
// over (a user, system or tool message came).
func (t *transcript) startTurn() { t.turn = &modelTurn{} }
func (t *transcript) endTurn()   { t.turn = nil }

// message adds a message of role; empty text (a message of images, or of
// tool calls only) is no message. An assistant message belongs to the
// current model turn, starting one if none is open.
func (t *transcript) message(role, text string) {
	if text == "" {
		return
	}
	it := importItem{msg: Event{Kind: KindMessage, Session: t.session, Role: role, Content: text}}
	if role == RoleAssistant {
		if t.turn == nil {
			t.startTurn()
		}
		it.turn = t.turn
	} else {
		t.endTurn()
	}
	t.items = append(t.items, it)
}

// call adds a tool call of the current model turn (starting one if none
// is open). Arguments that are not a JSON object, or a missing tool name,
// are an error of m at field, or with SkipBad a call left out.
func (t *transcript) call(m rawMsg, field, id, tool string, rawArgs json.RawMessage) error {
	args, err := callArgs(rawArgs)
	if err == nil && tool == "" {
		err = errors.New("missing function name")
	}
	if err != nil {
		if !t.opts.SkipBad {
			return t.fail(m, field, err)
		}
		t.stats.Bad++
		return nil
	}
	if t.turn == nil {
		t.startTurn()
	}
	c := &pendingCall{ev: Event{Session: t.session, Tool: tool, Args: args, Requestor: "assistant", CallID: id}}
	t.calls = append(t.calls, c)
	t.items = append(t.items, importItem{call: c, turn: t.turn})
	return nil
}

// answer pairs a result with the oldest unanswered call of its id, or,
// when the id is missing or matches none (ids repeat in some logs), with
// the oldest unanswered call (of tool, if named). A result is an error
// when isErr or its text starts with "Error:", the convention of most
// tool wrappers. A result ends the model turn.
func (t *transcript) answer(id, tool, output string, isErr bool) {
	t.endTurn()
	var c *pendingCall
	for _, p := range t.calls {
		if !p.answered && id != "" && p.ev.CallID == id {
			c = p
			break
		}
	}
	if c == nil {
		for _, p := range t.calls {
			if !p.answered && (tool == "" || p.ev.Tool == tool) {
				c = p
				break
			}
		}
	}
	if c == nil {
		t.stats.Orphans++
		return
	}
	c.answered = true
	c.ev.Output = output
	c.ev.Status = StatusOK
	if isErr || strings.HasPrefix(output, "Error:") {
		c.ev.Status = StatusError
	}
}

// events returns the transcript's events in order: answered calls with
// consecutive seqs, steps numbering the model turns that issued them, and
// messages with the seq of the next call and, on an assistant message
// whose turn issued calls, their step (../shared/traces/README.md).
// Calls left unanswered are not events.
func (t *transcript) events() []Event {
	for _, it := range t.items {
		if it.call != nil && it.call.answered {
			it.turn.emitted = true
		}
	}
	var out []Event
	seq, step := 0, 0
	for _, it := range t.items {
		if it.turn != nil && it.turn.emitted && it.turn.step == 0 {
			step++
			it.turn.step = step
		}
		if it.call == nil {
			ev := it.msg
			ev.Seq = seq
			if it.turn != nil {
				ev.Step = it.turn.step
			}
			out = append(out, ev)
			t.stats.Messages++
			continue
		}
		if !it.call.answered {
			t.stats.Unanswered++
			continue
		}
		ev := it.call.ev
		ev.Seq, ev.Step = seq, it.turn.step
		seq++
		out = append(out, ev)
		t.stats.Calls++
	}
	return out
}

// callArgs turns a call's arguments (a string holding JSON, as the OpenAI
// API sends them, or an object, as Anthropic's and some loggers do) into a
// compact JSON object.
func callArgs(raw json.RawMessage) (json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		raw = bytes.TrimSpace([]byte(s))
		if len(raw) == 0 {
			return nil, nil
		}
	}
	if raw[0] != '{' || !json.Valid(raw) {
		return nil, fmt.Errorf("arguments are not a JSON object: %.60q", raw)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// contentText returns a message's text: a string, or the text parts of a
// content array joined by newlines. Text parts are strings and objects of
// type "text" (OpenAI chat, Anthropic), "input_text" or "output_text"
// (OpenAI Responses), or of no type; images and other parts are dropped.
func contentText(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	switch raw[0] {
	case '"':
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err
	case '[':
		var parts []json.RawMessage
		if err := json.Unmarshal(raw, &parts); err != nil {
			return "", err
		}
		var texts []string
		for _, p := range parts {
			if p = bytes.TrimSpace(p); len(p) > 0 && p[0] == '"' {
				var s string
				if err := json.Unmarshal(p, &s); err != nil {
					return "", err
				}
				texts = append(texts, s)
				continue
			}
			var part struct {
				Type string  `json:"type"`
				Text *string `json:"text"`
			}
			if err := json.Unmarshal(p, &part); err != nil {
				return "", err
			}
			switch part.Type {
			case "", "text", "input_text", "output_text":
				if part.Text != nil {
					texts = append(texts, *part.Text)
				}
			}
		}
		return strings.Join(texts, "\n"), nil
	default:
		// A decoded value some loggers store: keep its JSON text.
		return string(raw), nil
	}
}
