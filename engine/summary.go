package engine

import (
	"fmt"
	"time"
)

// Summary is one paragraph on what the engine did: the calls and how they
// were served, the tool time saved and wasted, and the speculative
// executions per call. ahead serve and ahead mcp print it at exit.
func (st Stats) Summary() string {
	if st.Calls == 0 {
		return fmt.Sprintf("ahead: no tool calls; %d speculative executions.", st.SpecStarted)
	}
	wasted := int64(0) // executions that ran and served nobody
	for _, ts := range st.Tools {
		wasted += ts.Wasted
	}
	hit := float64(st.Reused+st.Promoted) / float64(st.Calls)
	calls := "tool calls"
	if st.Calls == 1 {
		calls = "tool call"
	}
	return fmt.Sprintf("ahead: %d %s: %d executed, %d reused and %d promoted (%.0f%% served ahead). "+
		"Saved %s of tool time; wasted %s on %d speculative executions nobody used. "+
		"%.2f speculative executions per call.",
		st.Calls, calls, st.Executed, st.Reused, st.Promoted, 100*hit,
		roundDuration(st.Saved), roundDuration(st.Wasted), wasted,
		float64(st.SpecStarted)/float64(st.Calls))
}

// roundDuration keeps three significant figures or so: 1.23s, 45ms.
func roundDuration(d time.Duration) time.Duration {
	switch {
	case d >= time.Minute:
		return d.Round(time.Second)
	case d >= time.Second:
		return d.Round(10 * time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(time.Millisecond)
	}
	return d.Round(time.Microsecond)
}
