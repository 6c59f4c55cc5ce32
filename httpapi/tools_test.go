package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/ahead-dev/ahead/backend"
	"github.com/ahead-dev/ahead/engine"
	"github.com/ahead-dev/ahead/httpapi"
	"github.com/ahead-dev/ahead/policy"
	"github.com/ahead-dev/ahead/tooldef"
)

// TestTools: a harness declares its agent's tools to the HTTP API; the
// user names an order; the first call of the tool, never called before,
// is served by the call ahead started from the tool's definition.
func TestTools(t *testing.T) {
	var mu sync.Mutex
	runs := 0
	eng := engine.New(&engine.Options{
		Backends: map[string]engine.Backend{"shop": {Backend: backend.Funcs{
			"get_order_details": func(context.Context, json.RawMessage) (string, error) {
				mu.Lock()
				runs++
				mu.Unlock()
				return "delivered", nil
			},
		}}},
		Policy:    &policy.Policy{Tools: map[string]policy.Tool{"get_order_details": {Allow: true}}},
		Predictor: tooldef.New(nil),
	})
	defer eng.Close()
	api := httptest.NewServer(httpapi.New(eng, &httpapi.Options{Logger: quiet, MaxBodyBytes: 4096}))
	defer api.Close()
	c := api.Client()
	const tools = `{"tools": [{"name": "get_order_details", "description": "Get an order.", "input_schema": {"type": "object", "properties": {"order_id": {"type": "string", "pattern": "^#W[0-9]{7}$"}}, "required": ["order_id"]}}]}`
	for _, tc := range []struct {
		body string
		code int
		err  string
	}{
		{tools, 204, ""},
		{tools, 204, ""}, // the same again: nothing new
		{`{}`, 400, `"tools" is missing`},
		{`{"tools": [{"description": "x"}]}`, 400, `tools[0]: "name" is missing`},
		{`{"tools": [{"name": "a", "input_schema": [1]}]}`, 400, `tools[0] (a): "input_schema" is not a JSON object`},
		{`{"tools": [], "extra": 1}`, 400, `unknown field "extra"`},
		{`not json`, 400, "decoding tools"},
		{`{"tools": [{"name": "` + strings.Repeat("x", 5000) + `"}]}`, 413, "larger than the limit"},
	} {
		resp, err := c.Post(api.URL+"/v1/sessions/agent-1/tools", "application/json", strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var e struct{ Error string }
		if tc.code != 204 && json.Unmarshal(body, &e) != nil {
			t.Errorf("%.60s: error body %q is not JSON", tc.body, body)
		}
		if resp.StatusCode != tc.code || !strings.Contains(e.Error, tc.err) {
			t.Errorf("%.60s: %d %s, want %d with %q", tc.body, resp.StatusCode, body, tc.code, tc.err)
		}
	}
	resp, err := c.Post(api.URL+"/v1/sessions/agent-1/messages", "application/json", strings.NewReader(`{"role": "user", "content": "Where is my order #W1234567?"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	code, a := post(t, c, api.URL+"/v1/sessions/agent-1/calls", `{"tool": "get_order_details", "args": {"order_id": "#W1234567"}}`)
	if code != 200 || (a.Source != "reused" && a.Source != "promoted") {
		t.Errorf("first call of the declared tool: %d %+v, want reused or promoted", code, a)
	}
	mu.Lock()
	defer mu.Unlock()
	if runs != 1 {
		t.Errorf("the tool ran %d times, want once", runs)
	}
}
