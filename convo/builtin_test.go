package convo

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode"

	"github.com/ahead-dev/ahead/callkey"
	"github.com/ahead-dev/ahead/predict"
	"github.com/ahead-dev/ahead/trace"
)

// sharedToolNames returns the tool names of the shared traces, as the
// models mined from them in testdata name them.
func sharedToolNames(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("testdata/*.model.json.gz")
	if err != nil || len(files) == 0 {
		t.Fatalf("no models of the shared traces in testdata: %v", err)
	}
	var names []string
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		var m Model
		if err := json.NewDecoder(zr).Decode(&m); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, tm := range m.Tools {
			names = append(names, tm.Name)
		}
	}
	if len(names) < 10 {
		t.Fatalf("found %d tool names in testdata's models, want the shared traces' (at least 10)", len(names))
	}
	return names
}

// eachString calls f with every string of a JSON document: object keys
// and string values.
func eachString(x any, f func(string)) {
	switch x := x.(type) {
	case string:
		f(x)
	case []any:
		for _, e := range x {
			eachString(e, f)
		}
	case map[string]any:
		for k, e := range x {
			f(k)
			eachString(e, f)
		}
	}
}

// TestBuiltinNamesNothing reads the default embedded in the binary and
// fails on any tool name of the shared traces and any string with a
// digit (issue 24: the default names no tool and holds no value).
func TestBuiltinNamesNothing(t *testing.T) {
	if n := len(builtinJSON); n > 1<<20 {
		t.Errorf("the built-in default is %d bytes, want at most 1 MiB", n)
	}
	var doc any
	if err := json.Unmarshal(builtinJSON, &doc); err != nil {
		t.Fatal(err)
	}
	tools := sharedToolNames(t)
	n := 0
	eachString(doc, func(s string) {
		n++
		if strings.ContainsFunc(s, unicode.IsDigit) {
			t.Errorf("the built-in default holds %q, a string with a digit", s)
		}
		for _, tool := range tools {
			if strings.Contains(s, tool) {
				t.Errorf("the built-in default holds %q, which names the tool %q", s, tool)
			}
		}
	})
	if n == 0 {
		t.Fatal("no strings read from the built-in default: the walk is broken")
	}
	d := Builtin()
	if d.Calls == 0 || d.Tools < 10 || len(d.Calibration) != nStrata {
		t.Errorf("the built-in default was fitted on %d calls of %d tools with %d calibration maps: not the shared traces' (go generate ./convo)", d.Calls, d.Tools, len(d.Calibration))
	}
}

// TestBuiltinCheckNames checks that the walk above would catch a tool
// name and a value (a test that cannot fail proves nothing).
func TestBuiltinCheckNames(t *testing.T) {
	var doc any
	if err := json.Unmarshal([]byte(`{"a": [{"get_user_details": 1}], "b": "W123"}`), &doc); err != nil {
		t.Fatal(err)
	}
	var got []string
	eachString(doc, func(s string) { got = append(got, s) })
	for _, want := range []string{"get_user_details", "W123"} {
		found := false
		for _, s := range got {
			found = found || s == want
		}
		if !found {
			t.Errorf("eachString missed %q (got %q)", want, got)
		}
	}
}

// inTop reports whether one of the first k predictions is the call
// (tool, args), by call key.
func inTop(preds []predict.Prediction, k int, tool string, args json.RawMessage) bool {
	want, err := callkey.Make(tool, args)
	if err != nil {
		return false
	}
	for i, p := range preds {
		if i == k {
			break
		}
		if got, err := callkey.Make(p.Tool, p.Args); err == nil && got == want {
			return true
		}
	}
	return false
}

// TestFreshToolSeenOnce: with the built-in default, the tools seen called
// in one session (their argument names, their values' looks) get their
// values from what the user says in the next session, in a domain the
// default never saw.
func TestFreshToolSeenOnce(t *testing.T) {
	sessions, err := trace.Collect(trace.NewReader(nil).Events("testdata/library.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	f := NewFresh(nil, nil)
	for ev := range trace.Known(sessions[0]) {
		f.Observe(ev)
	}
	f.Forget(sessions[0].ID)
	s := sessions[1]
	preds := f.Start(s.ID)
	hits := map[string]bool{}
	for ev := range trace.Known(s) {
		if ev.IsMessage() {
			preds = predict.Merge(preds, f.Hear(ev))
			continue
		}
		// The member id the user said first, the loan number said as
		// "#L961168": both read from the conversation.
		if inTop(preds, 3, ev.Tool, ev.Args) {
			hits[ev.Tool] = true
		} else {
			t.Logf("%s %s not in the top 3 of %v", ev.Tool, ev.Args, preds)
		}
		preds = f.Observe(ev)
	}
	for _, tool := range []string{"lookup_member", "get_loan"} {
		if !hits[tool] {
			t.Errorf("the second session's %s call was not in the top 3 predicted", tool)
		}
	}
}

// TestFitDefaultNamesNothing fits a default on a domain of its own and
// checks it is deterministic and holds no tool name nor value.
func TestFitDefaultNamesNothing(t *testing.T) {
	sessions, err := trace.Collect(trace.NewReader(nil).Events("testdata/library.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var out [2][]byte
	for i := range out {
		d, err := FitDefault(sessions, nil)
		if err != nil {
			t.Fatal(err)
		}
		if out[i], err = json.Marshal(d); err != nil {
			t.Fatal(err)
		}
		if _, err := ParseDefault(out[i]); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(out[0], out[1]) {
		t.Errorf("two fits of the same sessions differ:\n%s\n%s", out[0], out[1])
	}
	for _, s := range []string{"lookup_member", "get_loan", "renew_loan", "member_id", "loan_id", "L961168"} {
		if bytes.Contains(out[0], []byte(s)) {
			t.Errorf("the default fitted holds %q", s)
		}
	}
}

func TestParseDefaultErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{`, "reading the default"},
		{`{"version": 9}`, "version 9"},
		{`{"version": 1, "weights": [1, 2]}`, "2 weights"},
	} {
		_, err := ParseDefault([]byte(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseDefault(%s) = %v, want an error saying %q", tc.in, err, tc.want)
		}
	}
}
