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

// ImportOptions configure ImportOpenAI. The zero value is valid.
type ImportOptions struct {
	// SkipBad skips tool calls whose arguments are not a JSON object
	// (counted in ImportStats.Bad) instead of failing.
	SkipBad bool
}

// ImportStats count what an import found.
type ImportStats struct {
	Sessions   int // conversations with at least one answered call
	Calls      int // events produced
	Unanswered int // tool calls without a result (not turned into events)
	Orphans    int // tool results that answer no pending call
	Bad        int // calls skipped for malformed arguments (SkipBad)
}

// ImportOpenAI converts chat transcripts in the OpenAI messages shape into
// events. data holds one file, named name in errors and sessions. It may be
//
//   - a JSON array of messages, or one JSON value or JSONL line per message:
//     one conversation;
//   - objects with a "messages" array (one per line, or a JSON array of
//     them): one conversation each.
//
// A conversation's session id is its "session_id", "session" or "id" field
// when it has one, else name (with "/N" appended when the file holds
// several conversations). Assistant messages' "tool_calls" (and the legacy
// "function_call") are calls; "role": "tool" (or "function") messages are
// their results, paired by tool_call_id with the oldest unanswered call of
// that id, or, when the id is missing or matches none (ids repeat in some
// logs), with the oldest unanswered call. Responses-API items
// ("type": "function_call" / "function_call_output") are paired by call_id
// the same way.
//
// A result is an error when the message says so ("is_error": true or
// "status": "error") or its text starts with "Error:", the convention of
// most tool wrappers. Events come out in call order with consecutive seqs;
// step counts the assistant turns. Calls left unanswered are not events.
func ImportOpenAI(name string, data []byte, opts *ImportOptions, stats *ImportStats) ([]Event, error) {
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
		evs, err := importConversation(name, data, id, c.msgs, o, stats)
		if err != nil {
			return nil, err
		}
		if len(evs) > 0 {
			stats.Sessions++
		}
		out = append(out, evs...)
	}
	return out, nil
}

// conversation is one transcript: its messages with their byte offsets.
type conversation struct {
	id   string
	msgs []rawMsg
}

type rawMsg struct {
	off  int64 // offset in the file, for error positions
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

// splitConversations finds the conversations of a file.
func splitConversations(name string, data []byte) ([]conversation, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	var loose conversation // messages given one per value
	var convs []conversation
	add := func(off int64, v json.RawMessage) error {
		var probe struct {
			Messages  json.RawMessage `json:"messages"`
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
			c := conversation{id: firstString(probe.SessionID, probe.Session, probe.ID)}
			for _, m := range msgs {
				c.msgs = append(c.msgs, rawMsg{off: off, data: m})
			}
			convs = append(convs, c)
		case probe.Role != nil || probe.Type != nil:
			loose.msgs = append(loose.msgs, rawMsg{off: off, data: v})
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

type oaFunction struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

type oaMessage struct {
	Role      string          `json:"role"`
	Type      string          `json:"type"`
	Content   json.RawMessage `json:"content"`
	ToolCalls []struct {
		ID       string     `json:"id"`
		Function oaFunction `json:"function"`
	} `json:"tool_calls"`
	FunctionCall *oaFunction     `json:"function_call"`
	ToolCallID   string          `json:"tool_call_id"`
	Name         string          `json:"name"`
	IsError      bool            `json:"is_error"`
	Status       string          `json:"status"`
	CallID       string          `json:"call_id"`
	Arguments    json.RawMessage `json:"arguments"`
	Output       json.RawMessage `json:"output"`
}

type pendingCall struct {
	ev       Event
	answered bool
	off      int64
}

func importConversation(name string, data []byte, session string, msgs []rawMsg, o ImportOptions, stats *ImportStats) ([]Event, error) {
	var calls []*pendingCall
	step := 0
	addCall := func(m rawMsg, field, id, tool string, rawArgs json.RawMessage) error {
		args, err := callArgs(rawArgs)
		if err == nil && tool == "" {
			err = errors.New("missing function name")
		}
		if err != nil {
			if !o.SkipBad {
				return importError(name, data, m.off, field, err)
			}
			stats.Bad++
			return nil
		}
		calls = append(calls, &pendingCall{off: m.off, ev: Event{
			Session: session, Step: step, Tool: tool, Args: args,
			Requestor: "assistant", CallID: id,
		}})
		return nil
	}
	answer := func(id, tool, output string, isErr bool) {
		var c *pendingCall
		for _, p := range calls { // the oldest unanswered call with this id
			if !p.answered && id != "" && p.ev.CallID == id {
				c = p
				break
			}
		}
		if c == nil { // by position: the oldest unanswered call (of this tool, if named)
			for _, p := range calls {
				if !p.answered && (tool == "" || p.ev.Tool == tool) {
					c = p
					break
				}
			}
		}
		if c == nil {
			stats.Orphans++
			return
		}
		c.answered = true
		c.ev.Output = output
		c.ev.Status = StatusOK
		if isErr || strings.HasPrefix(output, "Error:") {
			c.ev.Status = StatusError
		}
	}
	for i, m := range msgs {
		var msg oaMessage
		if err := json.Unmarshal(m.data, &msg); err != nil {
			return nil, importError(name, data, m.off, fmt.Sprintf("messages[%d]", i), err)
		}
		isErr := msg.IsError || msg.Status == "error"
		switch {
		case msg.Role == "assistant":
			step++
			for j, tc := range msg.ToolCalls {
				field := fmt.Sprintf("messages[%d].tool_calls[%d].function", i, j)
				if err := addCall(m, field, tc.ID, tc.Function.Name, tc.Function.Arguments); err != nil {
					return nil, err
				}
			}
			if fc := msg.FunctionCall; fc != nil {
				if err := addCall(m, fmt.Sprintf("messages[%d].function_call", i), "", fc.Name, fc.Arguments); err != nil {
					return nil, err
				}
			}
		case msg.Role == "tool" || msg.Role == "function":
			out, err := contentText(msg.Content)
			if err != nil {
				return nil, importError(name, data, m.off, fmt.Sprintf("messages[%d].content", i), err)
			}
			tool := ""
			if msg.Role == "function" {
				tool = msg.Name
			}
			answer(msg.ToolCallID, tool, out, isErr)
		case msg.Type == "function_call":
			// Responses-API items: consecutive calls form one turn.
			if i == 0 || !isResponsesCall(msgs[i-1].data) {
				step++
			}
			if err := addCall(m, fmt.Sprintf("messages[%d].arguments", i), msg.CallID, msg.Name, msg.Arguments); err != nil {
				return nil, err
			}
		case msg.Type == "function_call_output":
			out, err := contentText(msg.Output)
			if err != nil {
				return nil, importError(name, data, m.off, fmt.Sprintf("messages[%d].output", i), err)
			}
			answer(msg.CallID, "", out, isErr)
		case msg.Role == "" && msg.Type == "":
			return nil, importError(name, data, m.off, fmt.Sprintf("messages[%d]", i), errors.New(`neither "role" nor "type"`))
		}
	}
	var out []Event
	for _, c := range calls {
		if !c.answered {
			stats.Unanswered++
			continue
		}
		c.ev.Seq = len(out)
		out = append(out, c.ev)
		stats.Calls++
	}
	return out, nil
}

func isResponsesCall(data json.RawMessage) bool {
	var probe struct {
		Type string `json:"type"`
	}
	return json.Unmarshal(data, &probe) == nil && probe.Type == "function_call"
}

// callArgs turns a call's arguments (a string holding JSON, as the API
// sends them, or an object some loggers store decoded) into a JSON object.
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
// content array joined by newlines.
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
			var part struct {
				Text *string `json:"text"`
			}
			if len(bytes.TrimSpace(p)) > 0 && bytes.TrimSpace(p)[0] == '"' {
				var s string
				if err := json.Unmarshal(p, &s); err != nil {
					return "", err
				}
				texts = append(texts, s)
				continue
			}
			if err := json.Unmarshal(p, &part); err != nil {
				return "", err
			}
			if part.Text != nil {
				texts = append(texts, *part.Text)
			}
		}
		return strings.Join(texts, "\n"), nil
	default:
		// A decoded value some loggers store: keep its JSON text.
		return string(raw), nil
	}
}
