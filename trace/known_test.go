package trace

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestKnown(t *testing.T) {
	in := `{"session":"s","kind":"message","role":"system","content":"sys","seq":0}
{"session":"s","kind":"message","role":"user","content":"u1","seq":0}
{"session":"s","kind":"message","role":"assistant","content":"a1","seq":0,"step":1}
{"session":"s","seq":0,"step":1,"tool":"t0","args":{},"status":"ok","output":""}
{"session":"s","seq":1,"step":1,"tool":"t1","args":{},"status":"ok","output":""}
{"session":"s","kind":"message","role":"assistant","content":"a2","seq":2,"step":2}
{"session":"s","seq":2,"step":2,"tool":"t2","args":{},"status":"ok","output":""}
{"session":"s","kind":"message","role":"assistant","content":"a3","seq":3}
{"session":"s","kind":"message","role":"user","content":"u2","seq":3}
{"session":"s","kind":"message","role":"assistant","content":"a4","seq":3,"step":3}
{"session":"s","seq":3,"step":3,"tool":"t3","args":{},"status":"ok","output":""}
{"session":"s","kind":"message","role":"assistant","content":"bye","seq":4}
`
	sessions, err := Collect(NewReader(nil).Read("k.jsonl", strings.NewReader(in)))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for ev := range Known(sessions[0]) {
		if ev.IsMessage() {
			got = append(got, ev.Content)
		} else {
			got = append(got, ev.Tool)
		}
	}
	// a1 is the text of step 1: known only after both calls of step 1;
	// a2 after t2; a4 after t3.
	want := []string{"sys", "u1", "t0", "t1", "a1", "t2", "a2", "a3", "u2", "t3", "a4", "bye"}
	if !slices.Equal(got, want) {
		t.Errorf("Known order = %v, want %v", got, want)
	}
}

// TestKnownNeverShowsAStepsOwnText checks the what-is-known-when rule on
// the shared traces: before any call of step K, the assistant text of
// step K has not been yielded.
func TestKnownNeverShowsAStepsOwnText(t *testing.T) {
	path := "testdata/conv-sample.jsonl.gz" // 36 tau2 and 4 mini-swe-agent sessions of ../shared/traces
	sessions, err := Collect(NewReader(nil).Events(path))
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, s := range sessions {
		seen := map[int]bool{} // steps whose assistant text was yielded
		for ev := range Known(s) {
			if ev.IsMessage() && ev.Role == RoleAssistant && ev.Step > 0 {
				seen[ev.Step] = true
			}
			if ev.IsCall() && seen[ev.Step] {
				t.Fatalf("%s: the text of step %d was known before its call %d", s.ID, ev.Step, ev.Seq)
			}
			checked++
		}
	}
	if checked == 0 {
		t.Fatal(fmt.Sprint("no events"))
	}
}
