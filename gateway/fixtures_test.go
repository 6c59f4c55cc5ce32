package gateway

import (
	"encoding/json"
	"fmt"
	"strings"
)

// A script is what the scripted upstream sends: SSE events, and points at
// which it waits for the gateway to have offered a call (proving the offer
// came before the stream ended).
type step struct {
	write    string
	waitTool string
}

func sse(event, data string) step {
	if event != "" {
		return step{write: "event: " + event + "\ndata: " + data + "\n\n"}
	}
	return step{write: "data: " + data + "\n\n"}
}

func wait(tool string) step { return step{waitTool: tool} }

func js(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func chatChunk(delta map[string]any, finish any) step {
	return sse("", js(map[string]any{
		"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-test",
		"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}},
	}))
}

func chatCallDelta(index int, id, name, args string) step {
	fn := map[string]any{"arguments": args}
	tc := map[string]any{"index": index, "function": fn}
	if id != "" {
		tc["id"], tc["type"], fn["name"] = id, "function", name
	}
	return chatChunk(map[string]any{"tool_calls": []any{tc}}, nil)
}

// chatScript streams a turn with two parallel calls: a safe read, then an
// unsafe write. The read is complete when the write starts.
func chatScript() []step {
	return []step{
		chatChunk(map[string]any{"role": "assistant", "content": ""}, nil),
		chatChunk(map[string]any{"content": "Let me look."}, nil),
		chatCallDelta(0, "call_a", "read_file", ""),
		chatCallDelta(0, "", "", `{"pa`),
		chatCallDelta(0, "", "", `th": "a.txt"}`),
		chatCallDelta(1, "call_b", "write_file", ""),
		wait("read_file"),
		chatCallDelta(1, "", "", `{"path":"b.txt",`),
		chatCallDelta(1, "", "", `"text":"hi"}`),
		chatChunk(map[string]any{}, "tool_calls"),
		wait("write_file"),
		sse("", "[DONE]"),
	}
}

const chatBody = `{"id":"chatcmpl-2","object":"chat.completion","created":1,"model":"gpt-test",` +
	`"choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,` +
	`"tool_calls":[{"id":"call_a","type":"function","function":{"name":"read_file","arguments":"{\"path\": \"a.txt\"}"}},` +
	`{"id":"call_b","type":"function","function":{"name":"write_file","arguments":"{\"path\":\"b.txt\",\"text\":\"hi\"}"}}]}}],` +
	`"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`

func responsesEvent(typ string, fields map[string]any) step {
	fields["type"] = typ
	return sse(typ, js(fields))
}

func responsesCall(id, callID, name, args, status string) map[string]any {
	return map[string]any{"type": "function_call", "id": id, "call_id": callID, "name": name, "arguments": args, "status": status}
}

func responsesScript() []step {
	resp := func(status string, output []any) map[string]any {
		return map[string]any{"id": "resp_1", "object": "response", "created_at": 1, "model": "gpt-test",
			"status": status, "output": output}
	}
	a := responsesCall("fc_1", "call_a", "read_file", `{"path":"a.txt"}`, "completed")
	b := responsesCall("fc_2", "call_b", "write_file", `{"path":"b.txt","text":"hi"}`, "completed")
	return []step{
		responsesEvent("response.created", map[string]any{"sequence_number": 0, "response": resp("in_progress", []any{})}),
		responsesEvent("response.output_item.added", map[string]any{"sequence_number": 1, "output_index": 0,
			"item": responsesCall("fc_1", "call_a", "read_file", "", "in_progress")}),
		responsesEvent("response.function_call_arguments.delta", map[string]any{"sequence_number": 2, "output_index": 0, "item_id": "fc_1", "delta": `{"path":`}),
		responsesEvent("response.function_call_arguments.delta", map[string]any{"sequence_number": 3, "output_index": 0, "item_id": "fc_1", "delta": `"a.txt"}`}),
		responsesEvent("response.function_call_arguments.done", map[string]any{"sequence_number": 4, "output_index": 0, "item_id": "fc_1", "arguments": `{"path":"a.txt"}`}),
		wait("read_file"),
		responsesEvent("response.output_item.done", map[string]any{"sequence_number": 5, "output_index": 0, "item": a}),
		responsesEvent("response.output_item.added", map[string]any{"sequence_number": 6, "output_index": 1,
			"item": responsesCall("fc_2", "call_b", "write_file", "", "in_progress")}),
		responsesEvent("response.function_call_arguments.delta", map[string]any{"sequence_number": 7, "output_index": 1, "item_id": "fc_2", "delta": `{"path":"b.txt","text":"hi"}`}),
		responsesEvent("response.output_item.done", map[string]any{"sequence_number": 8, "output_index": 1, "item": b}),
		wait("write_file"),
		responsesEvent("response.completed", map[string]any{"sequence_number": 9, "response": resp("completed", []any{a, b})}),
	}
}

const responsesBody = `{"id":"resp_2","object":"response","created_at":1,"model":"gpt-test","status":"completed","output":[` +
	`{"type":"message","id":"msg_1","role":"assistant","status":"completed","content":[{"type":"output_text","text":"ok","annotations":[]}]},` +
	`{"type":"function_call","id":"fc_1","call_id":"call_a","name":"read_file","arguments":"{\"path\":\"a.txt\"}","status":"completed"},` +
	`{"type":"function_call","id":"fc_2","call_id":"call_b","name":"write_file","arguments":"{\"path\":\"b.txt\",\"text\":\"hi\"}","status":"completed"}]}`

func anthropicEvent(typ string, fields map[string]any) step {
	fields["type"] = typ
	return sse(typ, js(fields))
}

func anthropicToolStart(index int, id, name string) step {
	return anthropicEvent("content_block_start", map[string]any{"index": index,
		"content_block": map[string]any{"type": "tool_use", "id": id, "name": name, "input": map[string]any{}}})
}

func anthropicJSON(index int, partial string) step {
	return anthropicEvent("content_block_delta", map[string]any{"index": index,
		"delta": map[string]any{"type": "input_json_delta", "partial_json": partial}})
}

func anthropicStop(index int) step {
	return anthropicEvent("content_block_stop", map[string]any{"index": index})
}

func anthropicScript() []step {
	return []step{
		anthropicEvent("message_start", map[string]any{"message": map[string]any{
			"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test", "content": []any{},
			"stop_reason": nil, "stop_sequence": nil, "usage": map[string]any{"input_tokens": 1, "output_tokens": 1}}}),
		anthropicEvent("content_block_start", map[string]any{"index": 0, "content_block": map[string]any{"type": "text", "text": ""}}),
		anthropicEvent("ping", map[string]any{}),
		anthropicEvent("content_block_delta", map[string]any{"index": 0, "delta": map[string]any{"type": "text_delta", "text": "Let me look."}}),
		anthropicStop(0),
		anthropicToolStart(1, "toolu_a", "read_file"),
		anthropicJSON(1, ""),
		anthropicJSON(1, `{"path": `),
		anthropicJSON(1, `"a.txt"}`),
		anthropicStop(1),
		wait("read_file"),
		anthropicToolStart(2, "toolu_b", "write_file"),
		anthropicJSON(2, `{"path":"b.txt","text":"hi"}`),
		anthropicStop(2),
		wait("write_file"),
		anthropicEvent("message_delta", map[string]any{"delta": map[string]any{"stop_reason": "tool_use", "stop_sequence": nil},
			"usage": map[string]any{"output_tokens": 20}}),
		anthropicEvent("message_stop", map[string]any{}),
	}
}

const anthropicBody = `{"id":"msg_2","type":"message","role":"assistant","model":"claude-test","content":[` +
	`{"type":"text","text":"Let me look."},` +
	`{"type":"tool_use","id":"toolu_a","name":"read_file","input":{"path":"a.txt"}},` +
	`{"type":"tool_use","id":"toolu_b","name":"write_file","input":{"text":"hi","path":"b.txt"}}],` +
	`"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":1}}`

// wantCalls are the calls every fixture holds, canonical.
var wantCalls = []string{
	`read_file{"path":"a.txt"}`,
	`write_file{"path":"b.txt","text":"hi"}`,
}

func streamBytes(script []step) string {
	var b strings.Builder
	for _, s := range script {
		b.WriteString(s.write)
	}
	return b.String()
}

func (c toolCall) String() string { return fmt.Sprintf("%s%s", c.Name, c.Args) }
