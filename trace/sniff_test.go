package trace

import "testing"

func TestSniff(t *testing.T) {
	for _, tc := range []struct{ data, want string }{
		{`[{"role":"assistant","content":[{"type": "tool_use","id":"a","name":"ls","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":"x"}]}]`, FormatAnthropic},
		{`[{"role":"assistant","tool_calls":[{"id":"a","type":"function","function":{"name":"ls","arguments":"{}"}}]},{"role":"tool","tool_call_id":"a","content":"x"}]`, FormatOpenAI},
		{`[{"type":"function_call","call_id":"a","name":"ls","arguments":"{}"},{"type":"function_call_output","call_id":"a","output":"x"}]`, FormatResponses},
		{`[{"role":"user","content":"hello"}]`, ""},
		{``, ""},
	} {
		if got := Sniff([]byte(tc.data)); got != tc.want {
			t.Errorf("Sniff(%s) = %q, want %q", tc.data, got, tc.want)
		}
	}
}
