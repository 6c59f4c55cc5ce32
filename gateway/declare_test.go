package gateway

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ahead-dev/ahead/trace"
)

func TestRequestTools(t *testing.T) {
	schema := json.RawMessage(`{"type":"object","properties":{"order_id":{"type":"string","pattern":"^#W[0-9]{7}$"}},"required":["order_id"]}`)
	want := []trace.ToolDef{{Name: "get_order", Description: "Get an order.", InputSchema: schema}}
	for _, tc := range []struct {
		name string
		a    api
		body string
		from string
		want []trace.ToolDef
	}{
		{"chat", apiChat, `{"model":"m","messages":[],"tools":[{"type":"function","function":{"name":"get_order","description":"Get an order.","parameters":` + string(schema) + `}}]}`, trace.FromOpenAI, want},
		{"chat functions", apiChat, `{"model":"m","messages":[],"functions":[{"name":"get_order","description":"Get an order.","parameters":` + string(schema) + `}]}`, trace.FromOpenAI, want},
		{"responses", apiResponses, `{"model":"m","input":"hi","tools":[{"type":"web_search"},{"type":"function","name":"get_order","description":"Get an order.","parameters":` + string(schema) + `}]}`, trace.FromOpenAI, want},
		{"anthropic", apiMessages, `{"model":"m","messages":[],"tools":[{"type":"web_search_20250305","name":"web_search"},{"name":"get_order","description":"Get an order.","input_schema":` + string(schema) + `}]}`, trace.FromAnthropic, want},
		{"none", apiChat, `{"model":"m","messages":[]}`, trace.FromOpenAI, nil},
		{"not json", apiMessages, `{`, "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, from := requestTools(tc.a, []byte(tc.body))
			if from != tc.from {
				t.Errorf("from %q, want %q", from, tc.from)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("tools (-want +got):\n%s", diff)
			}
		})
	}
}
