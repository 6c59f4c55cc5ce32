package convo

import (
	"slices"
	"testing"
)

// TestObservedValues: the values of a call's arguments become tokens of
// its segment spelled as they were sent, whatever values before them
// (empty, with spaces, not strings) were left out. An empty value once
// shifted every later token by a byte ("#W2702727" read "\n#W270272").
func TestObservedValues(t *testing.T) {
	c := compile(mineTestdata(t))
	tests := []struct {
		args string
		want []string
	}{
		{`{"a":"","b":"#W2702727","c":"62701"}`, []string{"#W2702727", "62701"}},
		{`{"a":"x y","b":"","c":"IL","d":""}`, []string{"IL"}},
		{`{"a":true,"b":"","c":12,"d":"ola_nordmann_1"}`, []string{"12", "ola_nordmann_1"}},
		{`{"a":"","b":""}`, nil},
	}
	for _, tt := range tests {
		st := newState(c, DefaultMaxBytes, false)
		st.observe(call("s", "some_tool", tt.args))
		var got []string
		for _, seg := range st.segs {
			for i := range seg.toks {
				got = append(got, seg.str(int32(i)))
			}
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("observe(%s): tokens %q, want %q", tt.args, got, tt.want)
		}
	}
}
