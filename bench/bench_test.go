package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ahead-dev/ahead/backend/replay"
	"github.com/ahead-dev/ahead/policy"
	"github.com/ahead-dev/ahead/predict"
	"github.com/ahead-dev/ahead/speculator"
	"github.com/ahead-dev/ahead/trace"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func msp(v float64) *float64 { return &v }

// call builds a recorded call; think < 0 leaves llm_ms out.
func call(sess string, seq, step int, tool, args, out string, think float64) trace.Event {
	ev := trace.Event{Session: sess, Seq: seq, Step: step, Tool: tool, Args: json.RawMessage(args), Status: trace.StatusOK, Output: out}
	if think >= 0 {
		ev.LLMMS = msp(think)
	}
	return ev
}

// latencies gives each tool a fixed latency.
func latencies(m map[string]time.Duration) replay.Latency {
	p := &replay.PerTool{Tools: make(map[string]replay.Latency), Spec: "test"}
	for tool, d := range m {
		p.Tools[tool] = replay.Const(d)
	}
	return p
}

// readPolicy allows full speculation of get_* (read-only); everything else
// is a write.
func readPolicy() *policy.Policy {
	return &policy.Policy{Globs: []policy.Glob{{Pattern: "get_*", Tool: policy.Tool{Allow: true}}}}
}

func TestSteps(t *testing.T) {
	s := trace.Session{ID: "s", Events: []trace.Event{
		call("s", 0, 1, "a", `{}`, "", 1000),
		call("s", 1, 2, "b", `{}`, "", 2000),
		call("s", 2, 2, "c", `{}`, "", 2000),
		call("s", 3, 3, "d", `{}`, "", -1),
	}}
	user := trace.Event{Kind: trace.KindMessage, Session: "s", Seq: 0, Role: "user", Content: "hi"}
	text := trace.Event{Kind: trace.KindMessage, Session: "s", Seq: 1, Step: 2, Role: "assistant", Content: "b and c"}
	again := trace.Event{Kind: trace.KindMessage, Session: "s", Seq: 3, Role: "user", Content: "now d"}
	s.Messages = []trace.Event{user, text, again}
	// The text of step 2 is heard only after its calls: with step 3.
	want := []step{
		{start: 0, end: 1, think: time.Second, heard: []trace.Event{user}},
		{start: 1, end: 3, think: 2 * time.Second},
		{start: 3, end: 4, think: 1800 * time.Millisecond, heard: []trace.Event{text, again}},
	}
	if diff := cmp.Diff(want, steps(s, 1800*time.Millisecond), cmp.AllowUnexported(step{})); diff != "" {
		t.Errorf("steps (-want +got):\n%s", diff)
	}
	// Without step numbers every call is its own step.
	for i := range s.Events {
		s.Events[i].Step = 0
	}
	if got := len(steps(s, 0)); got != 4 {
		t.Errorf("unnumbered: %d steps, want 4", got)
	}
}

// TestThinkAndStall replays one session serially: the agent thinks each
// step's llm_ms (or the default), issues a step's calls together, and
// stalls until the slowest returns.
func TestThinkAndStall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := trace.Session{ID: "s", Events: []trace.Event{
			call("s", 0, 1, "a", `{}`, "A", 1000),
			call("s", 1, 2, "b", `{}`, "B", 2000),
			call("s", 2, 2, "c", `{}`, "C", 2000),
			call("s", 3, 3, "d", `{}`, "D", -1),
		}}
		rep, err := Run(t.Context(), []trace.Session{s}, &Options{
			Latency: latencies(map[string]time.Duration{"a": 300 * time.Millisecond, "b": 500 * time.Millisecond, "c": 800 * time.Millisecond, "d": 100 * time.Millisecond}),
			Modes:   []Mode{Serial},
		})
		if err != nil {
			t.Fatal(err)
		}
		m := rep.Mode(Serial)
		got := struct{ Think, Stall, E2E, Tool, P50 float64 }{m.ThinkMS, m.StallMS, m.E2E.Mean, m.ToolMS, m.Auth.P50}
		want := struct{ Think, Stall, E2E, Tool, P50 float64 }{4800, 1200, 6000, 1700, 400}
		if got != want {
			t.Errorf("serial: got %+v, want %+v", got, want)
		}
		if m.Calls != 4 || m.Executed != 4 || m.Mismatches != 0 || !rep.Lossless {
			t.Errorf("serial: %d calls, %d executed, %d mismatches, lossless %v", m.Calls, m.Executed, m.Mismatches, rep.Lossless)
		}
	})
}

// oracleSession: get_a (think 1s, 300ms), get_b (think 2s, 500ms), put_x
// (think 1s, 400ms, a write), get_c (think 200ms, 1s).
func oracleSession() trace.Session {
	return trace.Session{ID: "o", Events: []trace.Event{
		call("o", 0, 1, "get_a", `{"id":1}`, "a", 1000),
		call("o", 1, 2, "get_b", `{"id":2}`, "b", 2000),
		call("o", 2, 3, "put_x", `{"id":3}`, "x", 1000),
		call("o", 3, 4, "get_c", `{"id":4}`, "c", 200),
	}}
}

var oracleLatency = map[string]time.Duration{
	"get_a": 300 * time.Millisecond, "get_b": 500 * time.Millisecond,
	"put_x": 400 * time.Millisecond, "get_c": time.Second,
}

// TestOracle checks the ceiling: every allowed call of a step starts at the
// start of its think window, so a call hides min(think, latency) — the
// first step's too, whose think window starts when the session begins —
// and writes (the policy forbids them) hide nothing.
func TestOracle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rep, err := Run(t.Context(), []trace.Session{oracleSession()}, &Options{
			Latency: latencies(oracleLatency),
			Policy:  readPolicy(),
			Modes:   []Mode{Serial, Oracle},
		})
		if err != nil {
			t.Fatal(err)
		}
		s, o := rep.Mode(Serial), rep.Mode(Oracle)
		if s.StallMS != 2200 {
			t.Errorf("serial stall %v ms, want 2200", s.StallMS)
		}
		// 0 (get_a hidden, from the session start) + 0 (get_b hidden) +
		// 400 (write) + 800 (get_c promoted 200ms early).
		if o.StallMS != 1200 {
			t.Errorf("oracle stall %v ms, want 1200", o.StallMS)
		}
		if o.Reused != 2 || o.Promoted != 1 || o.SpecStarted != 3 || o.Wasted != 0 {
			t.Errorf("oracle: reused %d promoted %d started %d wasted %d, want 2 1 3 0", o.Reused, o.Promoted, o.SpecStarted, o.Wasted)
		}
		want := map[string]float64{"executed": 400, "promoted": 800}
		if diff := cmp.Diff(want, o.StallBy); diff != "" {
			t.Errorf("oracle stall by source (-want +got):\n%s", diff)
		}
		if *rep.OracleHiddenMS != 1000 || !rep.Lossless {
			t.Errorf("oracle hid %v ms (want 1000), lossless %v", *rep.OracleHiddenMS, rep.Lossless)
		}
	})
}

// TestAheadAndRatios runs the ahead mode with a predictor that knows only
// get_b, and checks the headline figures against serial and the oracle.
func TestAheadAndRatios(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pred := predict.Func(func(ev trace.Event) []predict.Prediction {
			if ev.Tool == "get_a" {
				return []predict.Prediction{
					{Tool: "get_b", Args: json.RawMessage(`{"id":2}`), P: 0.9},
					{Tool: "get_b", Args: json.RawMessage(`{"id":99}`), P: 0.5}, // wrong
				}
			}
			return nil
		})
		rep, err := Run(t.Context(), []trace.Session{oracleSession()}, &Options{
			Predictor: func() (predict.Predictor, error) { return pred, nil },
			Latency:   latencies(oracleLatency),
			Policy:    &policy.Policy{Globs: readPolicy().Globs, Dedup: policy.Dedup{MaxPerTool: 2}},
			Modes:     []Mode{Serial, Ahead, Oracle},
		})
		if err != nil {
			t.Fatal(err)
		}
		a := rep.Mode(Ahead)
		if a.StallMS != 1700 || a.Reused != 1 || a.SpecStarted != 2 || a.Wasted != 1 || a.Unmatched != 1 {
			t.Errorf("ahead: stall %v reused %d started %d wasted %d unmatched %d, want 1700 1 2 1 1",
				a.StallMS, a.Reused, a.SpecStarted, a.Wasted, a.Unmatched)
		}
		// ahead hid 500 of the oracle's 1000 ms (the predictor has no
		// Start, so ahead cannot hide the first step the oracle hides).
		if got := *rep.HiddenStallRatio; math.Abs(got-0.5) > 1e-9 {
			t.Errorf("hidden_stall_ratio %v, want 0.5", got)
		}
		// Session time: think 4200 + stall 2200 serial, + 1700 ahead.
		if got, want := *rep.E2EReduction, 1-5900.0/6400; math.Abs(got-want) > 1e-9 {
			t.Errorf("e2e_reduction %v, want %v", got, want)
		}
		if *rep.SpecPerCall != 0.5 || rep.Mismatches != 0 || !rep.Lossless {
			t.Errorf("spec/call %v, mismatches %d, lossless %v", *rep.SpecPerCall, rep.Mismatches, rep.Lossless)
		}
		// The calls ahead executed itself took as long as in serial.
		if *rep.AuthP99Ratio != 1 {
			t.Errorf("auth_p99_ratio %v, want 1", *rep.AuthP99Ratio)
		}
	})
}

// TestOracleFirstStep: the oracle knows a session's first step from the
// session's start, so a first call shorter than its think time stalls not
// at all, and a longer one only for the difference; serial, which has no
// predictor, is unaffected by the session's start.
func TestOracleFirstStep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := trace.Session{ID: "f", Events: []trace.Event{
			call("f", 0, 1, "get_a", `{"id":1}`, "a", 1000),
			call("f", 1, 1, "get_b", `{"id":2}`, "b", 1000),
		}}
		rep, err := Run(t.Context(), []trace.Session{s}, &Options{
			Latency: latencies(map[string]time.Duration{"get_a": 600 * time.Millisecond, "get_b": 1500 * time.Millisecond}),
			Policy:  readPolicy(),
			Modes:   []Mode{Serial, Oracle, AA},
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := rep.Mode(Serial).StallMS; got != 1500 {
			t.Errorf("serial stall %v ms, want 1500", got)
		}
		if got := rep.Mode(AA).StallMS; got != 1500 {
			t.Errorf("A/A stall %v ms, want 1500", got)
		}
		o := rep.Mode(Oracle)
		// get_a (600ms) is done when the 1s think ends; get_b (1.5s)
		// has 500ms to go.
		if o.StallMS != 500 || o.Reused != 1 || o.Promoted != 1 || o.SpecStarted != 2 || o.Wasted != 0 {
			t.Errorf("oracle: stall %v reused %d promoted %d started %d wasted %d, want 500 1 1 2 0",
				o.StallMS, o.Reused, o.Promoted, o.SpecStarted, o.Wasted)
		}
		if *rep.OracleHiddenMS != 1000 || !rep.Lossless {
			t.Errorf("oracle hid %v ms (want 1000), lossless %v", *rep.OracleHiddenMS, rep.Lossless)
		}
	})
}

// startPredictor is a predictor that also predicts sessions' first calls,
// as pattern.Online does.
type startPredictor struct {
	predict.Func
	start func(session string) []predict.Prediction
}

func (p startPredictor) Start(session string) []predict.Prediction { return p.start(session) }

// TestAheadStart: the ahead mode asks its predictor's Start when a session
// begins and speculates the first call during the first think window.
func TestAheadStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var (
			asked  []string
			served []string // how ahead served each authoritative get_a
		)
		pred := startPredictor{start: func(session string) []predict.Prediction {
			asked = append(asked, session)
			return []predict.Prediction{{Tool: "get_a", Args: json.RawMessage(`{"id":1}`), P: 0.7}}
		}}
		rep, err := Run(t.Context(), []trace.Session{oracleSession()}, &Options{
			Predictor: func() (predict.Predictor, error) { return pred, nil },
			Latency:   latencies(oracleLatency),
			Policy:    readPolicy(),
			Modes:     []Mode{Serial, Ahead, Oracle},
			Record: func(m Mode, ev trace.Event) {
				if m == Ahead && !ev.Speculative && ev.Tool == "get_a" {
					served = append(served, ev.Source)
				}
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"o"}, asked); diff != "" {
			t.Errorf("Start asked for (-want +got):\n%s", diff)
		}
		// get_a (300ms) hidden in its 1s think window; the rest as serial:
		// 0 + 500 + 400 + 1000.
		a := rep.Mode(Ahead)
		if a.StallMS != 1900 || a.Reused != 1 || a.SpecStarted != 1 || a.Wasted != 0 {
			t.Errorf("ahead: stall %v reused %d started %d wasted %d, want 1900 1 1 0", a.StallMS, a.Reused, a.SpecStarted, a.Wasted)
		}
		if diff := cmp.Diff([]string{"reused"}, served); diff != "" {
			t.Errorf("ahead served get_a (-want +got):\n%s", diff)
		}
		// 300 of the oracle's 1000 ms.
		if got := *rep.HiddenStallRatio; math.Abs(got-0.3) > 1e-9 {
			t.Errorf("hidden_stall_ratio %v, want 0.3", got)
		}
	})
}

// TestLosslessComparison: a policy that wrongly declares get_x a pure
// function shared across sessions lets one session's speculative result be
// handed to another whose recording says otherwise. The comparison with the
// recording must report it.
func TestLosslessComparison(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sess := func(id, out string, think float64) trace.Session {
			return trace.Session{ID: id, Events: []trace.Event{
				call(id, 0, 1, "get_a", `{}`, "a", think),
				call(id, 1, 2, "get_x", `{}`, out, 1000),
			}}
		}
		// u finishes get_a first, so its speculative get_x is the shared
		// one; v claims it.
		sessions := []trace.Session{sess("u", "x-of-u", 100), sess("v", "x-of-v", 300)}
		pol := &policy.Policy{Globs: []policy.Glob{{Pattern: "get_*", Tool: policy.Tool{Allow: true, Shared: true}}}}
		rep, err := Run(t.Context(), sessions, &Options{
			Latency:     latencies(map[string]time.Duration{"get_a": 100 * time.Millisecond, "get_x": 500 * time.Millisecond}),
			Policy:      pol,
			Concurrency: 2,
			Modes:       []Mode{Serial, Oracle},
		})
		if err != nil {
			t.Fatal(err)
		}
		o := rep.Mode(Oracle)
		if rep.Lossless || o.Mismatches != 1 || rep.Mode(Serial).Mismatches != 0 {
			t.Fatalf("lossless %v, oracle mismatches %d, want false and 1", rep.Lossless, o.Mismatches)
		}
		want := Mismatch{Session: "v", Index: 1, Tool: "get_x", Source: "reused", Want: "ok: x-of-v", Got: "ok: x-of-u"}
		if diff := cmp.Diff(want, o.Examples[0]); diff != "" {
			t.Errorf("mismatch (-want +got):\n%s", diff)
		}
		var buf bytes.Buffer
		rep.WriteTable(&buf)
		if !bytes.Contains(buf.Bytes(), []byte("lossless            NO")) {
			t.Errorf("the table does not say NO:\n%s", buf.String())
		}
	})
}

// TestStaleNeverReused: a speculation that crosses a recorded write is
// answered as stale by the replay backend; the engine invalidates it when
// the write arrives, so nobody receives it.
func TestStaleNeverReused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := trace.Session{ID: "w", Events: []trace.Event{
			call("w", 0, 1, "get_a", `{}`, "a0", 100),
			call("w", 1, 2, "put_a", `{}`, "ok", 1000),
			call("w", 2, 3, "get_a", `{}`, "a1", 1000),
		}}
		// Predict get_a again right after the first get_a (a repeat): it
		// can only match position 2, beyond the write.
		pred := predict.Func(func(ev trace.Event) []predict.Prediction {
			return []predict.Prediction{{Tool: "get_a", Args: json.RawMessage(`{}`), P: 1, Repeat: true}}
		})
		rep, err := Run(t.Context(), []trace.Session{s}, &Options{
			Predictor: func() (predict.Predictor, error) { return pred, nil },
			Latency:   latencies(map[string]time.Duration{"get_a": 200 * time.Millisecond, "put_a": 200 * time.Millisecond}),
			Policy:    readPolicy(),
			Modes:     []Mode{Ahead},
		})
		if err != nil {
			t.Fatal(err)
		}
		a := rep.Mode(Ahead)
		if a.Stale != 1 || a.Outcomes["invalidated"] != 1 || a.Mismatches != 0 || a.Reused != 1 {
			t.Errorf("stale %d invalidated %d mismatches %d reused %d, want 1 1 0 1", a.Stale, a.Outcomes["invalidated"], a.Mismatches, a.Reused)
		}
	})
}

// TestAllWrongNeverSlower: predictions that never match run and are
// wasted, but authoritative calls do not wait for them, even with one slot.
func TestAllWrongNeverSlower(t *testing.T) {
	for _, slots := range []int{0, 1} {
		synctest.Test(t, func(t *testing.T) {
			mine := []trace.Session{oracleSession()}
			// Nothing but the session start precedes get_a in the mined
			// session, so a speculative get_a is a Start prediction.
			var firsts []string
			rep, err := Run(t.Context(), []trace.Session{oracleSession()}, &Options{
				Mine:    mine,
				Latency: latencies(oracleLatency),
				Policy:  readPolicy(),
				Slots:   slots,
				Modes:   []Mode{Serial, AllWrong, AA},
				Record: func(m Mode, ev trace.Event) {
					if m == AllWrong && ev.Speculative && ev.Tool == "get_a" {
						firsts = append(firsts, ev.Outcome)
					}
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			// It matches nothing recorded, so the replay backend fails it.
			if diff := cmp.Diff([]string{"failed"}, firsts); diff != "" {
				t.Errorf("slots %d: all_wrong's speculative first calls (-want +got):\n%s", slots, diff)
			}
			s, w := rep.Mode(Serial), rep.Mode(AllWrong)
			if w.SpecStarted == 0 || w.Wasted != w.SpecStarted {
				t.Errorf("slots %d: all_wrong started %d, wasted %d: want some, all wasted", slots, w.SpecStarted, w.Wasted)
			}
			if w.StallMS != s.StallMS || *rep.AllWrongSlowdown != 0 || *rep.AANoise != 0 {
				t.Errorf("slots %d: all_wrong stall %v vs serial %v, slowdown %v, A/A %v: want equal, 0, 0",
					slots, w.StallMS, s.StallMS, *rep.AllWrongSlowdown, *rep.AANoise)
			}
		})
	}
}

func TestBaselines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// get_b always follows get_a; with the same args as last time in
		// the second session.
		mk := func(id string) trace.Session {
			return trace.Session{ID: id, Events: []trace.Event{
				call(id, 0, 1, "get_a", `{}`, "a", 1000),
				call(id, 1, 2, "get_b", `{"k":1}`, "b", 1000),
				call(id, 2, 3, "get_a", `{}`, "a", 1000),
				call(id, 3, 4, "get_b", `{"k":1}`, "b", 1000),
			}}
		}
		rep, err := Run(t.Context(), []trace.Session{mk("s")}, &Options{
			Mine:      []trace.Session{mk("m")},
			Latency:   latencies(map[string]time.Duration{"get_a": 300 * time.Millisecond, "get_b": 300 * time.Millisecond}),
			Policy:    readPolicy(),
			ColdStart: time.Second,
			Modes:     []Mode{Serial, Orion, SpecFaaS},
		})
		if err != nil {
			t.Fatal(err)
		}
		s, o, f := rep.Mode(Serial), rep.Mode(Orion), rep.Mode(SpecFaaS)
		// Serial pays two cold starts: 1300 + 1300 + 300 + 300.
		if s.StallMS != 3200 {
			t.Errorf("serial stall %v, want 3200", s.StallMS)
		}
		// ORION warms get_a at the session start (the mined sessions
		// start with it) and get_b after get_a: nothing is cold.
		if o.StallMS != 1200 || o.Warmups == 0 || o.SpecStarted != 0 {
			t.Errorf("orion stall %v (want 1200), warmups %d, spec started %d", o.StallMS, o.Warmups, o.SpecStarted)
		}
		// SpecFaaS knows a tool's args only once the session called it
		// (so nothing at the start): it hides the second get_a and get_b,
		// 1300 + 1300 + 0 + 0.
		if f.StallMS != 2600 || f.Reused != 2 {
			t.Errorf("specfaas stall %v (want 2600), reused %d (want 2)", f.StallMS, f.Reused)
		}
	})
}

// TestTimeScale: figures are trace time whatever the scale.
func TestTimeScale(t *testing.T) {
	run := func(scale float64) *Report {
		var rep *Report
		synctest.Test(t, func(t *testing.T) {
			var err error
			rep, err = Run(t.Context(), []trace.Session{oracleSession()}, &Options{
				Latency:   latencies(oracleLatency),
				Policy:    readPolicy(),
				TimeScale: scale,
				Modes:     []Mode{Serial, Oracle},
			})
			if err != nil {
				t.Fatal(err)
			}
		})
		return rep
	}
	a, b := run(1), run(0.01)
	for _, m := range []Mode{Serial, Oracle} {
		x, y := a.Mode(m), b.Mode(m)
		if math.Abs(x.StallMS-y.StallMS) > 0.01 || math.Abs(x.E2E.Mean-y.E2E.Mean) > 0.01 || math.Abs(x.WallMS-y.WallMS) > 0.01 {
			t.Errorf("%s: scale 1 stall %v e2e %v wall %v; scale 0.01 stall %v e2e %v wall %v",
				m, x.StallMS, x.E2E.Mean, x.WallMS, y.StallMS, y.E2E.Mean, y.WallMS)
		}
	}
}

func TestOpenArrival(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var sessions []trace.Session
		for i := range 3 {
			s := oracleSession()
			s.ID = string(rune('p' + i))
			for j := range s.Events {
				s.Events[j].Session = s.ID
			}
			sessions = append(sessions, s)
		}
		a, err := ParseArrival("bursty:0.5:3")
		if err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		rep, err := Run(t.Context(), sessions, &Options{Latency: latencies(oracleLatency), Arrival: a, Modes: []Mode{Serial}})
		if err != nil {
			t.Fatal(err)
		}
		// One burst: all three run at once, so the run takes one session
		// (and the drain).
		if got, want := time.Since(t0), 6400*time.Millisecond+drain; got != want {
			t.Errorf("three sessions in one burst took %v, want %v", got, want)
		}
		if rep.Mode(Serial).Sessions != 3 {
			t.Errorf("%d sessions", rep.Mode(Serial).Sessions)
		}
	})
}

func TestArrivalOffsets(t *testing.T) {
	a := Arrival{Kind: "poisson", Rate: 2, Burst: 1}
	off := a.offsets(2001, 7)
	if diff := cmp.Diff(off, a.offsets(2001, 7)); diff != "" {
		t.Errorf("offsets not deterministic:\n%s", diff)
	}
	// 2000 gaps of mean 0.5 s.
	if got := off[2000].Seconds() / 2000; math.Abs(got-0.5) > 0.05 {
		t.Errorf("mean gap %v s, want about 0.5", got)
	}
	b := Arrival{Kind: "bursty", Rate: 2, Burst: 4}.offsets(8, 7)
	if b[0] != b[3] || b[4] != b[7] || b[4] <= b[3] {
		t.Errorf("bursts of 4: %v", b)
	}
}

func TestParseArrival(t *testing.T) {
	good := map[string]Arrival{
		"closed":        {},
		"poisson:0.5":   {Kind: "poisson", Rate: 0.5, Burst: 1},
		"bursty:2:10":   {Kind: "bursty", Rate: 2, Burst: 10},
		"poisson:1e-3":  {Kind: "poisson", Rate: 0.001, Burst: 1},
		"bursty:0.25:1": {Kind: "bursty", Rate: 0.25, Burst: 1},
	}
	for s, want := range good {
		got, err := ParseArrival(s)
		if err != nil || got != want {
			t.Errorf("ParseArrival(%q) = %+v, %v; want %+v", s, got, err, want)
		}
		if again, _ := ParseArrival(got.String()); again != got {
			t.Errorf("%q does not round-trip via %q", s, got.String())
		}
	}
	for _, s := range []string{"poisson", "poisson:0", "poisson:-1", "poisson:x", "poisson:NaN", "poisson:Inf", "bursty:1", "bursty:1:0", "bursty:1:x", "closed:4", "uniform:1"} {
		if _, err := ParseArrival(s); !errors.Is(err, ErrBadArrival) {
			t.Errorf("ParseArrival(%q): err = %v, want ErrBadArrival", s, err)
		}
	}
}

func FuzzParseArrival(f *testing.F) {
	for _, s := range []string{"closed", "poisson:0.5", "bursty:2:10", "bursty:1e300:3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ParseArrival(s)
		if err != nil {
			if !errors.Is(err, ErrBadArrival) {
				t.Fatalf("error %v does not wrap ErrBadArrival", err)
			}
			return
		}
		off := a.offsets(5, 1)
		for i := 1; i < len(off); i++ {
			if off[i] < off[i-1] {
				t.Fatalf("%q: offsets go back in time: %v", s, off)
			}
		}
	})
}

func TestOptionErrors(t *testing.T) {
	s := []trace.Session{oracleSession()}
	tests := []struct {
		name     string
		sessions []trace.Session
		opts     Options
	}{
		{"no sessions", nil, Options{}},
		{"ahead without predictor", s, Options{Modes: []Mode{Ahead}}},
		{"unknown mode", s, Options{Modes: []Mode{"fast"}}},
		{"mode twice", s, Options{Modes: []Mode{Serial, Serial}}},
		{"session twice", append(s, s...), Options{}},
	}
	for _, tt := range tests {
		if _, err := Run(t.Context(), tt.sessions, &tt.opts); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: err = %v, want ErrConfig", tt.name, err)
		}
	}
}

func TestCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 1500*time.Millisecond)
		defer cancel()
		_, err := Run(ctx, []trace.Session{oracleSession()}, &Options{Latency: latencies(oracleLatency), Modes: []Mode{Serial}})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("err = %v, want the deadline", err)
		}
	})
}

// goldenPredictor is a fixed stand-in for ahead's predictor in the golden
// test, so the golden output depends only on the harness: it predicts the
// flight statuses of a reservation it has seen, and the user's first
// reservation.
func goldenPredictor() (predict.Predictor, error) {
	return predict.Func(func(ev trace.Event) []predict.Prediction {
		var out struct {
			Reservations []string `json:"reservations"`
			Flights      []struct {
				Number string `json:"flight_number"`
				Date   string `json:"date"`
			} `json:"flights"`
		}
		if json.Unmarshal([]byte(ev.Output), &out) != nil {
			return nil
		}
		var preds []predict.Prediction
		for i, f := range out.Flights {
			args, _ := json.Marshal(map[string]string{"flight_number": f.Number, "date": f.Date})
			preds = append(preds, predict.Prediction{Tool: "get_flight_status", Args: args, P: 0.8 - 0.1*float64(i)})
		}
		if len(out.Reservations) > 0 {
			args, _ := json.Marshal(map[string]string{"reservation_id": out.Reservations[0]})
			preds = append(preds, predict.Prediction{Tool: "get_reservation_details", Args: args, P: 0.6})
		}
		return preds
	}), nil
}

func readTestdata(t *testing.T, name string) []trace.Session {
	t.Helper()
	ss, err := trace.Collect(trace.NewReader(nil).Events(filepath.Join("testdata", name)))
	if err != nil {
		t.Fatal(err)
	}
	return ss
}

// TestGolden replays the tiny trace in every mode and compares the table
// and the JSON with testdata (go test -update rewrites them).
func TestGolden(t *testing.T) {
	sessions := readTestdata(t, "tiny.jsonl")
	pol, err := policy.Load("testdata/policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	lat, err := replay.ParseLatency("lognormal:600ms:1500ms", 1)
	if err != nil {
		t.Fatal(err)
	}
	var table, js, svg bytes.Buffer
	synctest.Test(t, func(t *testing.T) {
		rep, err := Run(t.Context(), sessions, &Options{
			Predictor: goldenPredictor,
			Mine:      sessions[:2],
			Policy:    pol,
			Latency:   lat,
			ColdStart: 200 * time.Millisecond,
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := rep.WriteTable(&table); err != nil {
			t.Fatal(err)
		}
		table.WriteString("verdict: " + rep.Verdict() + "\n")
		if err := rep.WriteJSON(&js); err != nil {
			t.Fatal(err)
		}
		if err := rep.WritePlot(&svg); err != nil {
			t.Fatal(err)
		}
	})
	golden(t, "tiny.table.golden", table.Bytes())
	golden(t, "tiny.json.golden", js.Bytes())
	golden(t, "tiny.svg.golden", svg.Bytes())

	// The JSON has the documented fields.
	var doc map[string]any
	if err := json.Unmarshal(js.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"hidden_stall_ratio", "e2e_reduction", "speculative_executions_per_call", "lossless", "mismatches"} {
		if _, ok := doc[k]; !ok {
			t.Errorf("JSON has no %s", k)
		}
	}
	modes, _ := doc["modes"].(map[string]any)
	for _, m := range Modes {
		mm, ok := modes[string(m)].(map[string]any)
		if !ok {
			t.Errorf("JSON has no modes.%s", m)
			continue
		}
		for _, k := range []string{"e2e_mean_ms", "e2e_p50_ms", "e2e_p95_ms", "e2e_p99_ms", "stall_ms_total"} {
			if _, ok := mm[k].(float64); !ok {
				t.Errorf("JSON has no modes.%s.%s", m, k)
			}
		}
	}
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s differs (-want +got; go test -update rewrites it):\n%s", name, diff)
	}
}

// TestSimulatedSpeculator runs the ahead mode with sim:ACC:LAT: a perfect
// simulated speculator's guesses are claimed and counted under their own
// origin, a lying one's are wasted, and both stay lossless.
func TestSimulatedSpeculator(t *testing.T) {
	sessions := readTestdata(t, "tiny.jsonl")
	pol, err := policy.Load("testdata/policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		acc      float64
		wantHits bool
	}{{1, true}, {0, false}} {
		synctest.Test(t, func(t *testing.T) {
			rep, err := Run(t.Context(), sessions, &Options{
				Predictor: func() (predict.Predictor, error) { return predict.Func(nil), nil },
				Policy:    pol,
				Latency:   latencies(map[string]time.Duration{}),
				Modes:     []Mode{Serial, Ahead},
				Speculator: func(offer func(string, int, []predict.Prediction) bool, truth func(string) []trace.Event) (predict.Predictor, func(), error) {
					s, err := speculator.NewSim(&speculator.SimOptions{Accuracy: tc.acc, Latency: 100 * time.Millisecond, Seed: 1, Truth: truth, Offer: offer})
					if err != nil {
						return nil, nil, err
					}
					return s, s.Close, nil
				},
				SpeculatorName: "sim (test)",
			})
			if err != nil {
				t.Fatal(err)
			}
			a := rep.Mode(Ahead)
			got := a.Origins[string(predict.OriginSpeculator)]
			// A lying speculator's guesses may not even start: they name
			// calls the agents already made, which the engine does not rerun.
			if hits := got.Reused+got.Promoted > 0; hits != tc.wantHits || (tc.wantHits && got.Started == 0) {
				t.Errorf("accuracy %v: speculator origin %+v, want hits %v", tc.acc, got, tc.wantHits)
			}
			if !rep.Lossless {
				t.Errorf("accuracy %v: not lossless", tc.acc)
			}
			// The speculator's own figures, beside its origin's: every
			// request answered (a simulation never fails), hits only
			// when it is right, and both in the table and the JSON.
			st := a.Speculator
			if st == nil {
				t.Fatalf("accuracy %v: no speculator figures in the ahead mode", tc.acc)
			}
			if st.Requests == 0 || st.Answers != st.Requests || st.Failures != 0 || (st.Hits > 0) != tc.wantHits || st.Hits > st.Guesses {
				t.Errorf("accuracy %v: speculator figures %+v", tc.acc, *st)
			}
			if s := rep.Mode(Serial).Speculator; s != nil {
				t.Errorf("the serial mode has speculator figures %+v, want none", *s)
			}
			var table, js strings.Builder
			if err := rep.WriteTable(&table); err != nil {
				t.Fatal(err)
			}
			want := fmt.Sprintf("speculator (ahead)  %d requests, %d answers (%d late), %d guesses offered, %d hits; 0 failures; %d windows skipped",
				st.Requests, st.Answers, st.Late, st.Guesses, st.Hits, st.Skipped)
			if !strings.Contains(table.String(), want) {
				t.Errorf("accuracy %v: the table lacks %q:\n%s", tc.acc, want, table.String())
			}
			if err := rep.WriteJSON(&js); err != nil {
				t.Fatal(err)
			}
			var back struct {
				Modes map[Mode]struct {
					Speculator *speculator.Stats `json:"speculator"`
				} `json:"modes"`
			}
			if err := json.Unmarshal([]byte(js.String()), &back); err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(st, back.Modes[Ahead].Speculator); d != "" {
				t.Errorf("accuracy %v: the JSON's speculator figures (-want +got):\n%s", tc.acc, d)
			}
			if s := back.Modes[Serial].Speculator; s != nil {
				t.Errorf("the JSON's serial mode has speculator figures %+v", *s)
			}
		})
	}
}

// TestSavedIsTraceTime: saved_ms and wasted_ms, of the mode and of every
// origin, are trace time like every other figure: the same run at a tenth
// of the time scale reports the same times, not a tenth of them.
func TestSavedIsTraceTime(t *testing.T) {
	sessions := readTestdata(t, "tiny.jsonl")
	pol, err := policy.Load("testdata/policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	run := func(scale float64) *ModeResult {
		var a *ModeResult
		synctest.Test(t, func(t *testing.T) {
			rep, err := Run(t.Context(), sessions, &Options{
				Predictor: func() (predict.Predictor, error) { return predict.Func(nil), nil },
				Policy:    pol,
				Latency:   latencies(map[string]time.Duration{"get_user_details": 800 * time.Millisecond, "get_reservation_details": 1200 * time.Millisecond}),
				Modes:     []Mode{Ahead},
				TimeScale: scale,
				// Two origins: calls seen in the modelled stream, and a
				// simulated speculator that is right half of the time.
				Model: Model{TTFT: 300 * time.Millisecond, TPS: 200},
				Speculator: func(offer func(string, int, []predict.Prediction) bool, truth func(string) []trace.Event) (predict.Predictor, func(), error) {
					s, err := speculator.NewSim(&speculator.SimOptions{Accuracy: 0.5, Latency: scaled(200*time.Millisecond, scale), Seed: 1, Truth: truth, Offer: offer})
					if err != nil {
						return nil, nil, err
					}
					return s, s.Close, nil
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			a = rep.Mode(Ahead)
		})
		return a
	}
	one, tenth := run(1), run(0.1)
	near := func(a, b float64) bool { return math.Abs(a-b) <= 0.02*max(a, b)+1 }
	if one.SavedMS == 0 || !near(one.SavedMS, tenth.SavedMS) || !near(one.WastedMS, tenth.WastedMS) {
		t.Errorf("mode saved/wasted %.1f/%.1f ms at scale 1, %.1f/%.1f ms at scale 0.1; want the same trace time",
			one.SavedMS, one.WastedMS, tenth.SavedMS, tenth.WastedMS)
	}
	for _, o := range []predict.Origin{predict.OriginStream, predict.OriginSpeculator} {
		a, b := one.Origins[string(o)], tenth.Origins[string(o)]
		if a.SavedMS == 0 || !near(a.SavedMS, b.SavedMS) || !near(a.WastedMS, b.WastedMS) {
			t.Errorf("origin %s saved/wasted %.1f/%.1f ms at scale 1, %.1f/%.1f ms at scale 0.1; want the same trace time",
				o, a.SavedMS, a.WastedMS, b.SavedMS, b.WastedMS)
		}
	}
}

// TestStreamTimeDispatch replays a turn whose first call, a safe read, is
// complete in the model's stream long before the turn ends, and whose
// second is an unsafe write: the read is speculated from the stream and
// the agent waits for it at most max(0, latency − (stream end − call
// complete)) + 10 ms; the write never runs before the agent calls it.
func TestStreamTimeDispatch(t *testing.T) {
	long := `{"text":"` + strings.Repeat("x", 3990) + `"}` // 1,000 tokens: 10 s at 100 tokens/s
	s := trace.Session{ID: "s", Events: []trace.Event{
		call("s", 0, 1, "get_a", `{"id":1}`, "a", -1),
		call("s", 1, 1, "put_b", long, "ok", -1),
	}}
	for _, stream := range []bool{true, false} {
		synctest.Test(t, func(t *testing.T) {
			var mu sync.Mutex
			var specPuts int
			rep, err := Run(t.Context(), []trace.Session{s}, &Options{
				Predictor: func() (predict.Predictor, error) { return predict.Func(nil), nil },
				// The write names what it changes, which the read does not
				// read: issued together, it must not invalidate the read.
				Policy: &policy.Policy{Tools: map[string]policy.Tool{
					"get_a": {Allow: true, Reads: policy.Refs("id")},
					"put_b": {Writes: policy.Refs("text")},
				}},
				Latency:  latencies(map[string]time.Duration{"get_a": 2 * time.Second, "put_b": time.Second}),
				Modes:    []Mode{Ahead},
				Model:    Model{TTFT: 500 * time.Millisecond, TPS: 100},
				NoStream: !stream,
				Record: func(_ Mode, ev trace.Event) {
					if ev.Speculative && ev.Tool == "put_b" {
						mu.Lock()
						specPuts++
						mu.Unlock()
					}
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			a := rep.Mode(Ahead)
			// get_a is complete ~10 s before the stream ends: its wait is
			// max(0, 2 s − 10 s) + at most 10 ms.
			got := time.Duration(a.callMS[0][0] * float64(time.Millisecond))
			if stream && got > 10*time.Millisecond {
				t.Errorf("the streamed read waited %v, want at most 10ms", got)
			}
			if !stream && got < 2*time.Second {
				t.Errorf("without the stream the read waited %v, want its full 2s", got)
			}
			if o := a.Origins[string(predict.OriginStream)]; stream && o.Reused+o.Promoted != 1 {
				t.Errorf("stream origin %+v, want the read claimed", o)
			}
			if specPuts > 0 {
				t.Errorf("the unsafe write ran speculatively %d times", specPuts)
			}
			if !rep.Lossless {
				t.Error("not lossless")
			}
		})
	}
}

// TestParseModes checks the --modes list: "" is every mode, names are
// trimmed, an unknown one is a configuration error.
func TestParseModes(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []Mode
		err  error
	}{
		{"", nil, nil},
		{"serial, ahead", []Mode{Serial, Ahead}, nil},
		{"serial,nope", nil, ErrConfig},
	} {
		got, err := ParseModes(tc.in)
		if !errors.Is(err, tc.err) || !slices.Equal(got, tc.want) {
			t.Errorf("ParseModes(%q) = %v, %v; want %v, %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}
