package main

import (
	"encoding/json"
	"testing"

	"github.com/ahead-dev/ahead/evaluate"
)

// TestEvalFresh: ahead eval without --patterns measures a fresh install:
// the built-in default reads the values of the tools it has seen called
// from what the users say, in a domain it never saw (a library's tools),
// from the second session on; without it nothing is predicted until a
// relearn.
func TestEvalFresh(t *testing.T) {
	const tr = "../../convo/testdata/library.jsonl"
	eval := func(args ...string) evaluate.Result {
		t.Helper()
		code, out, errOut := runCLI(t, append(append([]string{"eval", "--json"}, args...), tr)...)
		if code != 0 {
			t.Fatalf("eval %v: exit %d: %s", args, code, errOut)
		}
		var res evaluate.Result
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatal(err)
		}
		return res
	}
	fresh := eval()
	if got := fresh.Ahead.ExactAt3; got < 0.9 {
		t.Errorf("fresh install: exact_at_3 %.3f, want at least 0.9 (the ids the users said)", got)
	}
	if got := fresh.Curve[0].FirstExactAt3; got < 0.8 {
		t.Errorf("fresh install: first calls of sessions 1–10 exact_at_3 %.3f, want at least 0.8", got)
	}
	if got := eval("--no-default").Ahead.ExactAt3; got != 0 {
		t.Errorf("--no-default: exact_at_3 %.3f, want 0 (no pool, no default, no relearn)", got)
	}
}
