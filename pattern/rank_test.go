package pattern

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestRankConcreteBeforeToolOnly checks the order of the ranked list: the
// likeliest tool first, then by p, except that a concrete call of a tool
// already listed goes ahead of tool-only guesses, which leaves the order
// of first appearance of the tools as it was.
func TestRankConcreteBeforeToolOnly(t *testing.T) {
	call := func(tool string, h uint64, args string, p float64) scored {
		return scored{key: predKey{tool: tool, hash: h}, args: []byte(args), p: p}
	}
	guess := func(tool string, p float64) scored { return scored{key: predKey{tool: tool}, p: p} }
	in := []scored{
		guess("read", 0.85), // the tool's odds, dropped: it has concrete calls
		call("read", 1, `{"id":1}`, 0.8),
		call("read", 2, `{"id":2}`, 0.4),
		guess("search", 0.13),
		guess("status", 0.09),
		call("read", 3, `{"id":3}`, 0.05),
		call("write", 4, `{"id":4}`, 0.04),
	}
	var got [][2]string
	for _, p := range rank(in, 10) {
		got = append(got, [2]string{p.Tool, string(p.Args)})
	}
	want := [][2]string{
		{"read", `{"id":1}`}, {"read", `{"id":2}`}, {"read", `{"id":3}`},
		{"search", ""}, {"status", ""}, {"write", `{"id":4}`},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ranked (-want +got):\n%s", diff)
	}
}
