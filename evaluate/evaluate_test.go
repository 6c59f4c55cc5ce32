package evaluate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ahead-dev/ahead/callkey"
	"github.com/ahead-dev/ahead/predict"
	"github.com/ahead-dev/ahead/trace"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func pred(tool, args string) predict.Prediction {
	p := predict.Prediction{Tool: tool, P: 0.5}
	if args != "" {
		p.Args = json.RawMessage(args)
	}
	return p
}

func TestScores(t *testing.T) {
	const tool, args = "read", `{"path": "a", "n": 1}`
	for _, tc := range []struct {
		name  string
		preds []predict.Prediction
		keyOK bool
		want  Metrics
	}{
		{"nothing predicted", nil, true, Metrics{}},
		{"exact first", []predict.Prediction{pred("read", `{"n":1,"path":"a"}`)}, true, Metrics{1, 1, 1, 1, 1}},
		{"tool only first", []predict.Prediction{pred("read", "")}, true, Metrics{ToolAt1: 1, ToolAt3: 1}},
		{"other arguments", []predict.Prediction{pred("read", `{"path":"b","n":1}`)}, true, Metrics{ToolAt1: 1, ToolAt3: 1}},
		{"exact second, same tool first", []predict.Prediction{pred("read", `{"path":"b"}`), pred("read", args)}, true,
			Metrics{ToolAt1: 1, ToolAt3: 1, ExactAt3: 1, ExactAt5: 1}},
		// A tool's rank counts distinct tools: the repeats of list do not push read back.
		{"tool third distinct", []predict.Prediction{pred("list", ""), pred("list", `{}`), pred("find", ""), pred("read", args)}, true,
			Metrics{ToolAt3: 1, ExactAt5: 1}},
		{"tool fourth distinct", []predict.Prediction{pred("a", ""), pred("b", ""), pred("c", ""), pred("read", "")}, true, Metrics{}},
		{"exact sixth", []predict.Prediction{pred("read", `{}`), pred("read", `{}`), pred("read", `{}`), pred("read", `{}`), pred("read", `{}`), pred("read", args)}, true,
			Metrics{ToolAt1: 1, ToolAt3: 1}},
		{"call without a key", []predict.Prediction{pred("read", args)}, false, Metrics{ToolAt1: 1, ToolAt3: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := callkey.Make(tool, json.RawMessage(args))
			if err != nil {
				t.Fatal(err)
			}
			var s scores
			s.add(tool, k, tc.keyOK, tc.preds)
			if diff := cmp.Diff(tc.want, s.metrics()); diff != "" {
				t.Errorf("metrics (-want +got):\n%s", diff)
			}
		})
	}
}

// script predicts from a table: after the call with a given tool (or at
// the session start, ""), the listed predictions.
type script map[string][]predict.Prediction

func (s script) Start(string) []predict.Prediction           { return s[""] }
func (s script) Observe(ev trace.Event) []predict.Prediction { return s[ev.Tool] }
func (s script) Forget(string)                               {}

var (
	_ predict.Predictor = script(nil)
	_ predict.Starter   = script(nil)
)

func sessions() []trace.Session {
	call := func(session string, seq int, tool, args string) trace.Event {
		return trace.Event{Session: session, Seq: seq, Tool: tool, Args: json.RawMessage(args)}
	}
	return []trace.Session{
		{ID: "s1", Events: []trace.Event{call("s1", 0, "list", `{}`), call("s1", 1, "read", `{"path":"a"}`), call("s1", 2, "read", `{"path":"b"}`)}},
		{ID: "s2", Events: []trace.Event{call("s2", 3, "list", `{}`), call("s2", 4, "write", `{"path":"a"}`)}},
	}
}

func TestRun(t *testing.T) {
	ahead := script{
		"":     {pred("list", "")},
		"list": {pred("read", `{"path":"a"}`), pred("write", "")},
		"read": {pred("read", `{"path":"b"}`)},
	}
	baseline := script{"list": {pred("read", "")}}
	var lines bytes.Buffer
	res, err := Run(t.Context(), sessions(), ahead, baseline, &Options{Predictions: &lines})
	if err != nil {
		t.Fatal(err)
	}
	if res.Sessions != 2 || res.Calls != 5 || res.First != 2 || res.BaselineInSample {
		t.Errorf("counts: %+v", res)
	}
	// ahead: list ×2 (tool 1st), read a (exact 1st), read b (exact 1st),
	// write (tool 2nd).
	if diff := cmp.Diff(Metrics{ToolAt1: 4.0 / 5, ToolAt3: 1, ExactAt1: 2.0 / 5, ExactAt3: 2.0 / 5, ExactAt5: 2.0 / 5}, res.Ahead); diff != "" {
		t.Errorf("ahead (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(Metrics{ToolAt1: 1.0 / 5, ToolAt3: 1.0 / 5}, res.NGram); diff != "" {
		t.Errorf("baseline (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(Metrics{ToolAt1: 2.0 / 3, ToolAt3: 1, ExactAt1: 2.0 / 3, ExactAt3: 2.0 / 3, ExactAt5: 2.0 / 3}, res.AheadLater); diff != "" {
		t.Errorf("ahead after the first calls (-want +got):\n%s", diff)
	}
	var order []string
	for _, tr := range res.Tools {
		order = append(order, tr.Tool)
	}
	if diff := cmp.Diff([]string{"list", "read", "write"}, order); diff != "" {
		t.Errorf("tools by calls, then name (-want +got):\n%s", diff)
	}
	if got := strings.Count(lines.String(), "\n"); got != res.Calls {
		t.Errorf("%d prediction lines, want one per call (%d):\n%s", got, res.Calls, lines.String())
	}
	first, _, _ := strings.Cut(lines.String(), "\n")
	if want := `{"session":"s1","seq":0,"predictions":[{"tool":"list","p":0.5}]}`; first != want {
		t.Errorf("first prediction line %s, want %s", first, want)
	}
	if !strings.Contains(lines.String(), `{"session":"s2","seq":4,"predictions":[{"tool":"read","args":{"path":"a"},"p":0.5},{"tool":"write","p":0.5}]}`) {
		t.Errorf("prediction lines:\n%s", lines.String())
	}
}

// TestSpeculable: with the tools a policy may run, their calls are scored
// apart, ranked among the predictions of those tools alone.
func TestSpeculable(t *testing.T) {
	ahead := script{
		"":     {pred("list", "")},
		"list": {pred("write", `{"path":"a"}`), pred("write", `{"path":"b"}`), pred("list", `{}`), pred("read", `{"path":"a"}`)},
		"read": {pred("read", `{"path":"b"}`)},
	}
	reads := func(tool string) bool { return tool != "write" }
	res, err := Run(t.Context(), sessions(), ahead, script{}, &Options{Speculable: reads})
	if err != nil {
		t.Fatal(err)
	}
	if res.SpeculableCalls != 4 {
		t.Errorf("speculable calls %d, want 4 (all but the write)", res.SpeculableCalls)
	}
	// list ×2 (tool 1st, no arguments), read a (exact 2nd once the writes
	// are left out; 4th among all), read b (exact 1st).
	want := Metrics{ToolAt1: 3.0 / 4, ToolAt3: 1, ExactAt1: 1.0 / 4, ExactAt3: 2.0 / 4, ExactAt5: 2.0 / 4}
	if diff := cmp.Diff(&want, res.AheadSpeculable); diff != "" {
		t.Errorf("speculable (-want +got):\n%s", diff)
	}
	if res.Ahead.ExactAt3 != 2.0/5 {
		t.Errorf("exact_at_3 over all calls %.2f, want 2/5 (the write and read b; read a is 4th there)", res.Ahead.ExactAt3)
	}
	res, err = Run(t.Context(), sessions(), ahead, script{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.AheadSpeculable != nil {
		t.Errorf("without a policy: %+v, want no speculable figures", res.AheadSpeculable)
	}
}

func TestRunCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := Run(ctx, sessions(), script{}, script{}, nil); err == nil {
		t.Error("Run of a cancelled context succeeded")
	}
}

// TestWriteTable compares the text tables with testdata/*.golden (go
// test -update rewrites them).
func TestWriteTable(t *testing.T) {
	ahead := script{"": {pred("list", "")}, "list": {pred("read", `{"path":"a"}`)}}
	for _, tc := range []struct {
		name       string
		inSample   bool
		speculable func(string) bool
	}{
		{"table", false, nil},
		{"table_in_sample", true, nil},
		{"table_speculable", false, func(tool string) bool { return tool == "read" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Run(t.Context(), sessions(), ahead, script{}, &Options{BaselineInSample: tc.inSample, Speculable: tc.speculable})
			if err != nil {
				t.Fatal(err)
			}
			var got bytes.Buffer
			if err := res.WriteTable(&got); err != nil {
				t.Fatal(err)
			}
			golden(t, tc.name+".golden", got.Bytes())
		})
	}
}

func TestWriteJSON(t *testing.T) {
	ahead := script{"": {pred("list", "")}, "list": {pred("read", `{"path":"a"}`)}}
	res, err := Run(t.Context(), sessions(), ahead, script{"list": {pred("read", "")}}, &Options{BaselineInSample: true})
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	if err := res.WriteJSON(&got); err != nil {
		t.Fatal(err)
	}
	golden(t, "result.json", got.Bytes())
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	file := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(file, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s differs (-want +got):\n%s", file, diff)
	}
}

// cheater predicts, from each assistant message it hears, the call the
// message spells out ("CALL tool {args}"): the text of the turn that
// issues the call.
type cheater struct{}

func (cheater) Start(string) []predict.Prediction        { return nil }
func (cheater) Observe(trace.Event) []predict.Prediction { return nil }
func (cheater) Forget(string)                            {}
func (cheater) Hear(m trace.Event) []predict.Prediction {
	tool, args, ok := strings.Cut(strings.TrimPrefix(m.Content, "CALL "), " ")
	if !ok || !strings.HasPrefix(m.Content, "CALL ") {
		return nil
	}
	return []predict.Prediction{{Tool: tool, Args: json.RawMessage(args), P: 1}}
}

// fileOrder yields a session's messages and calls by seq, messages first:
// the order of the file, in which a turn's text comes before its calls.
func fileOrder(s trace.Session) iter.Seq[trace.Event] {
	return func(yield func(trace.Event) bool) {
		mi := 0
		for _, c := range s.Events {
			for ; mi < len(s.Messages) && s.Messages[mi].Seq <= c.Seq; mi++ {
				if !yield(s.Messages[mi]) {
					return
				}
			}
			if !yield(c) {
				return
			}
		}
	}
}

// TestKnownOrder: a predictor that reads the assistant text of the step
// it predicts gets nothing through Run (which replays through
// trace.Known), and the replay refuses an order that would let it.
func TestKnownOrder(t *testing.T) {
	in := `{"session":"k","kind":"message","role":"user","content":"hello","seq":0}
{"session":"k","kind":"message","role":"assistant","content":"CALL look {\"id\":\"x1\"}","seq":0,"step":1}
{"session":"k","seq":0,"step":1,"tool":"look","args":{"id":"x1"},"status":"ok","output":""}
{"session":"k","kind":"message","role":"assistant","content":"CALL fix {\"id\":\"x1\"}","seq":1,"step":2}
{"session":"k","seq":1,"step":2,"tool":"fix","args":{"id":"x1"},"status":"ok","output":""}
`
	sessions, err := trace.Collect(trace.NewReader(nil).Read("k.jsonl", strings.NewReader(in)))
	if err != nil {
		t.Fatal(err)
	}
	r, err := Run(t.Context(), sessions, cheater{}, cheater{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Ahead.ExactAt1; got != 0 {
		t.Errorf("through trace.Known the cheater scores exact_at_1 %.2f, want 0", got)
	}
	if _, err := run(t.Context(), sessions, fileOrder, cheater{}, cheater{}, nil); !errors.Is(err, ErrKnownOrder) {
		t.Errorf("replay in file order: err = %v, want ErrKnownOrder", err)
	}
}

// TestCurve: the learning curve counts each session's calls in its block
// (sessions 1–10, 11–25, 26–50, 51 on), and the table prints it.
func TestCurve(t *testing.T) {
	var ss []trace.Session
	for i := range 30 {
		id := fmt.Sprintf("s%d", i)
		ss = append(ss, trace.Session{ID: id, Events: []trace.Event{
			{Session: id, Seq: 0, Step: 1, Tool: "list", Args: json.RawMessage(`{}`), Status: trace.StatusOK},
			{Session: id, Seq: 1, Step: 2, Tool: "read", Args: json.RawMessage(`{"path":"a"}`), Status: trace.StatusOK},
		}})
	}
	// Predicts the read only: half the calls, none of the first ones.
	res, err := Run(t.Context(), ss, script{"list": {pred("read", `{"path":"a"}`)}}, script{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []Block{
		{From: 1, To: 10, Calls: 20, ExactAt3: 0.5, FirstCalls: 10},
		{From: 11, To: 25, Calls: 30, ExactAt3: 0.5, FirstCalls: 15},
		{From: 26, To: 50, Calls: 10, ExactAt3: 0.5, FirstCalls: 5},
	}
	if diff := cmp.Diff(want, res.Curve); diff != "" {
		t.Errorf("curve (-want +got):\n%s", diff)
	}
	var b bytes.Buffer
	if err := res.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "sessions 11–25      30 calls 0.500     15 first calls 0.000") {
		t.Errorf("the table has no learning curve:\n%s", b.String())
	}
}
