package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/ahead-dev/ahead/backend"
	"github.com/ahead-dev/ahead/engine"
	"github.com/ahead-dev/ahead/gateway"
	"github.com/ahead-dev/ahead/policy"
)

// A gateway between an agent and its model, in front of an engine. The
// model's answer reaches the agent unchanged; the gateway hears the
// conversation, and the call complete in the answer is offered to the
// engine (origin stream), which runs it ahead because the policy allows
// it. The agent's own call then finds it.
func ExampleNew() {
	// The model: an OpenAI-compatible API that asks for one tool call.
	model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m",`+
			`"choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,`+
			`"tool_calls":[{"id":"call_1","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"notes.md\"}"}}]}}]}`)
	}))
	defer model.Close()

	pol, err := policy.Parse([]byte("speculation_policy:\n  tools:\n    read_file: {allow: true, reads: {arg: path, as: path}}\n"), "policy.yaml")
	if err != nil {
		fmt.Println(err)
		return
	}
	eng := engine.New(&engine.Options{
		Backends: map[string]engine.Backend{"local": {Backend: backend.Funcs{
			"read_file": func(context.Context, json.RawMessage) (string, error) { return "my notes", nil },
		}}},
		Policy: pol,
	})
	defer eng.Close()
	gw, err := gateway.New(&gateway.Options{OpenAI: &gateway.Upstream{BaseURL: model.URL + "/v1"}, Engine: eng})
	if err != nil {
		fmt.Println(err)
		return
	}
	srv := httptest.NewServer(gw.Handler())
	defer srv.Close()

	// The agent asks its model through the gateway, naming its session.
	req, _ := http.NewRequest("POST", srv.URL+"/v1/chat/completions",
		strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"what do my notes say?"}]}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(gateway.SessionHeader, "session-1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	var answer struct {
		Choices []struct {
			Message struct {
				ToolCalls []struct {
					Function struct{ Name, Arguments string }
				} `json:"tool_calls"`
			}
		}
	}
	err = json.NewDecoder(resp.Body).Decode(&answer)
	resp.Body.Close()
	if err != nil {
		fmt.Println(err)
		return
	}
	call := answer.Choices[0].Message.ToolCalls[0].Function
	fmt.Println("model asks for", call.Name, call.Arguments)
	for _, m := range eng.Conversation("session-1") {
		fmt.Println("engine heard", m.Role+":", m.Content)
	}

	// Close waits until the gateway has parsed every answer it relayed
	// (it parses beside the agent's copy, never holding it back); here it
	// makes the example's output certain.
	gw.Close()
	res, err := eng.Call(context.Background(), "session-1", call.Name, json.RawMessage(call.Arguments))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Output, "served ahead:", res.Source != engine.Executed)
	// Output:
	// model asks for read_file {"path":"notes.md"}
	// engine heard user: what do my notes say?
	// my notes served ahead: true
}
