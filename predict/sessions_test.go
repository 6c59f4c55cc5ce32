package predict

import "testing"

func TestLeastRecent(t *testing.T) {
	if got := LeastRecent(map[string]uint64{}, func(u uint64) uint64 { return u }); got != "" {
		t.Errorf("of none: %q, want \"\"", got)
	}
	m := map[string]uint64{"a": 7, "b": 3, "c": 9, "d": 4}
	if got := LeastRecent(m, func(u uint64) uint64 { return u }); got != "b" {
		t.Errorf("LeastRecent = %q, want b (used at 3)", got)
	}
}
