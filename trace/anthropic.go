package trace

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// ImportAnthropic converts transcripts in the Anthropic Messages shape into
// events: calls and the messages around them. data holds one file, named
// name in errors and sessions, in the forms ImportOpenAI reads: a JSON
// array of messages or one message per JSONL line (one conversation), or
// request-shaped objects with "messages" and an optional "system" (a string
// or text blocks), one per line or in a JSON array (one conversation each).
// Session ids are found as ImportOpenAI finds them.
//
// A message's content is a string or an array of blocks. "tool_use" blocks
// (id, name, input) of an assistant message are the calls of its model
// turn; "tool_result" blocks (tool_use_id, content as a string or blocks,
// is_error) of a user message are their results, paired by id as
// ImportOpenAI pairs them. "text" blocks are the message's text, joined by
// newlines; images, thinking and other blocks are dropped. The system
// prompt, user text and assistant text become message events; tool
// results are the calls' outputs, not messages.
func ImportAnthropic(name string, data []byte, opts *ImportOptions, stats *ImportStats) ([]Event, error) {
	return importFile(name, data, opts, stats, anthropicMessage)
}

type anMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type anBlock struct {
	Type string `json:"type"`
	// tool_use
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
	// tool_result
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

// anthropicMessage reads one message.
func anthropicMessage(t *transcript, m rawMsg) error {
	var msg anMessage
	if err := json.Unmarshal(m.data, &msg); err != nil {
		return t.fail(m, "", err)
	}
	switch msg.Role {
	case RoleUser, RoleAssistant, RoleSystem:
	case "":
		return t.fail(m, ".role", errors.New("missing"))
	default:
		return nil // not a message of the conversation
	}
	text, err := contentText(msg.Content)
	if err != nil {
		return t.fail(m, ".content", err)
	}
	var blocks []anBlock
	if c := bytes.TrimSpace(msg.Content); len(c) > 0 && c[0] == '[' {
		if err := json.Unmarshal(c, &blocks); err != nil {
			return t.fail(m, ".content", err)
		}
	}
	// The turn's text comes before its calls; results come before the
	// text that follows them (the API puts tool_result blocks first).
	if msg.Role == RoleAssistant {
		t.startTurn() // each assistant message is a model turn
		t.message(RoleAssistant, text)
	}
	for j, b := range blocks {
		switch {
		case b.Type == "tool_use" && msg.Role == RoleAssistant:
			if err := t.call(m, fmt.Sprintf(".content[%d].input", j), b.ID, b.Name, b.Input); err != nil {
				return err
			}
		case b.Type == "tool_result":
			out, err := contentText(b.Content)
			if err != nil {
				return t.fail(m, fmt.Sprintf(".content[%d].content", j), err)
			}
			t.answer(b.ToolUseID, "", out, b.IsError)
		}
	}
	if msg.Role != RoleAssistant {
		t.message(msg.Role, text)
	}
	return nil
}
