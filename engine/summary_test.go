package engine

import (
	"testing"
	"time"
)

func TestStatsSummary(t *testing.T) {
	for _, tc := range []struct {
		st   Stats
		want string
	}{
		{Stats{}, "ahead: no tool calls; 0 speculative executions."},
		{Stats{
			Totals: Totals{Calls: 8, Executed: 5, Reused: 2, Promoted: 1, SpecStarted: 12, Saved: 1234567 * time.Microsecond, Wasted: 45 * time.Millisecond},
			Tools:  map[string]ToolStats{"a": {Wasted: 3}, "b": {Wasted: 6}},
		}, "ahead: 8 tool calls: 5 executed, 2 reused and 1 promoted (38% served ahead). " +
			"Saved 1.23s of tool time; wasted 45ms on 9 speculative executions nobody used. " +
			"1.50 speculative executions per call."},
	} {
		if got := tc.st.Summary(); got != tc.want {
			t.Errorf("Summary() =\n%s\nwant\n%s", got, tc.want)
		}
	}
}
