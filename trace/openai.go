package trace

import (
	"encoding/json"
	"errors"
	"fmt"
)

// ImportOpenAI converts chat transcripts in the OpenAI messages shape, and
// OpenAI Responses items, into events: calls and the messages around them.
// data holds one file, named name in errors and sessions. It may be
//
//   - a JSON array of messages, or one JSON value or JSONL line per message:
//     one conversation;
//   - objects with a "messages" array (one per line, or a JSON array of
//     them): one conversation each.
//
// A conversation's session id is its "session_id", "session" or "id" field
// when it has one, else name (with "/N" appended when the file holds
// several conversations).
//
// Assistant messages' "tool_calls" (and the legacy "function_call") are
// calls; "role": "tool" (or "function") messages are their results, paired
// by tool_call_id with the oldest unanswered call of that id, or, when the
// id is missing or matches none (ids repeat in some logs), with the oldest
// unanswered call. Responses items ("type": "function_call" /
// "function_call_output") are paired by call_id the same way; consecutive
// output items (an assistant "message", "function_call"s) form one model
// turn.
//
// System (and "developer"), user and assistant messages become message
// events with their text (text parts joined by newlines, images dropped);
// tool results are not messages but the calls' outputs.
//
// A result is an error when the message says so ("is_error": true or
// "status": "error") or its text starts with "Error:", the convention of
// most tool wrappers. Events come out in transcript order: calls with
// consecutive seqs, steps counting the model turns that issued calls, and
// messages numbered as ../shared/traces/README.md says. Calls left
// unanswered are not events.
func ImportOpenAI(name string, data []byte, opts *ImportOptions, stats *ImportStats) ([]Event, error) {
	return importFile(name, data, opts, stats, openAIMessage)
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

// openAIMessage reads one chat message or Responses item.
func openAIMessage(t *transcript, m rawMsg) error {
	var msg oaMessage
	if err := json.Unmarshal(m.data, &msg); err != nil {
		return t.fail(m, "", err)
	}
	isErr := msg.IsError || msg.Status == "error"
	switch {
	case msg.Type == "function_call":
		// Joins the open turn: Responses output items of one response.
		return t.call(m, ".arguments", msg.CallID, msg.Name, msg.Arguments)
	case msg.Type == "function_call_output":
		out, err := contentText(msg.Output)
		if err != nil {
			return t.fail(m, ".output", err)
		}
		t.answer(msg.CallID, "", out, isErr)
	case msg.Role == "tool" || msg.Role == "function":
		out, err := contentText(msg.Content)
		if err != nil {
			return t.fail(m, ".content", err)
		}
		tool := ""
		if msg.Role == "function" {
			tool = msg.Name
		}
		t.answer(msg.ToolCallID, tool, out, isErr)
	case msg.Role == RoleAssistant:
		text, err := contentText(msg.Content)
		if err != nil {
			return t.fail(m, ".content", err)
		}
		t.startTurn() // each assistant message is a model turn
		t.message(RoleAssistant, text)
		for j, tc := range msg.ToolCalls {
			if err := t.call(m, fmt.Sprintf(".tool_calls[%d].function", j), tc.ID, tc.Function.Name, tc.Function.Arguments); err != nil {
				return err
			}
		}
		if fc := msg.FunctionCall; fc != nil {
			if err := t.call(m, ".function_call", "", fc.Name, fc.Arguments); err != nil {
				return err
			}
		}
	case msg.Role == RoleSystem || msg.Role == "developer" || msg.Role == RoleUser:
		text, err := contentText(msg.Content)
		if err != nil {
			return t.fail(m, ".content", err)
		}
		role := msg.Role
		if role == "developer" { // the system prompt of newer models
			role = RoleSystem
		}
		t.message(role, text)
	case msg.Role == "" && msg.Type == "":
		return t.fail(m, "", errors.New(`neither "role" nor "type"`))
	}
	// Other items (reasoning, web search calls, ...) carry no call or text.
	return nil
}
