package replay

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ahead-dev/ahead/backend"
	"github.com/ahead-dev/ahead/trace"
)

func ms(v float64) *float64 { return &v }

func ev(seq int, tool, args, out string) trace.Event {
	return trace.Event{Session: "s", Seq: seq, Tool: tool, Args: json.RawMessage(args), Status: trace.StatusOK, Output: out}
}

// session s: get(a) get(b) write(a) get(a) get(b)
func testSessions() []trace.Session {
	evs := []trace.Event{
		ev(0, "get", `{"id":"a"}`, "a0"),
		ev(1, "get", `{"id":"b"}`, "b0"),
		ev(2, "put", `{"id":"a"}`, "ok"),
		ev(3, "get", `{"id":"a"}`, "a1"),
		ev(4, "get", `{"id":"b"}`, "b0"),
	}
	evs[1].Status = trace.StatusError
	evs[0].DurationMS = ms(120)
	evs[3].DurationMS = ms(80)
	return []trace.Session{{ID: "s", Events: evs}}
}

func call(t *testing.T, b *Backend, ctx context.Context, spec bool, tool, args string) backend.Response {
	t.Helper()
	resp, err := b.Call(ctx, backend.Request{Session: "s", Tool: tool, Args: json.RawMessage(args), Speculative: spec})
	if err != nil {
		t.Fatalf("Call(%s %s): %v", tool, args, err)
	}
	return resp
}

func TestMatching(t *testing.T) {
	ctx := t.Context()
	b := New(testSessions(), nil)

	// At position 0 the first get(a) answers; the error status is kept.
	if got := call(t, b, ctx, true, "get", `{ "id" : "a" }`); got.Output != "a0" || got.IsError {
		t.Errorf("get(a) at 0 = %+v, want a0 ok", got)
	}
	if got := call(t, b, ctx, true, "get", `{"id":"b"}`); got.Output != "b0" || !got.IsError {
		t.Errorf("get(b) at 0 = %+v, want b0 error", got)
	}
	// Past the first get(a), the next one answers.
	b.SetPosition("s", 1)
	if got := call(t, b, ctx, true, "get", `{"id":"a"}`); got.Output != "a1" {
		t.Errorf("get(a) at 1 = %q, want a1", got.Output)
	}
	// At overrides the session's position.
	if got := call(t, b, At(ctx, 0), false, "get", `{"id":"a"}`); got.Output != "a0" {
		t.Errorf("get(a) At 0 = %q, want a0", got.Output)
	}
	// Nothing recorded at or after 4 for get(a): an error result.
	b.SetPosition("s", 4)
	got := call(t, b, ctx, true, "get", `{"id":"a"}`)
	if !got.IsError || !strings.Contains(got.Output, "no recorded call") {
		t.Errorf("get(a) at 4 = %+v, want an unmatched error result", got)
	}
	if got := call(t, b, ctx, true, "get", `{"id":"zz"}`); !got.IsError {
		t.Errorf("get(zz) = %+v, want an error result", got)
	}
	if _, err := b.Call(ctx, backend.Request{Session: "nope", Tool: "get", Args: json.RawMessage(`{}`)}); !errors.Is(err, ErrUnknownSession) {
		t.Errorf("unknown session: err = %v, want ErrUnknownSession", err)
	}
	want := Stats{Calls: 6, Speculative: 5, Unmatched: 2}
	if diff := cmp.Diff(want, b.Stats()); diff != "" {
		t.Errorf("Stats (-want +got):\n%s", diff)
	}
}

func TestStale(t *testing.T) {
	ctx := t.Context()
	hazard := func(w trace.Event, r backend.Request) bool { return w.Tool == "put" }
	b := New(testSessions(), &Options{Hazard: hazard})
	b.SetPosition("s", 1)
	// get(a) at 1 matches position 3, beyond the write at 2: stale.
	got := call(t, b, ctx, true, "get", `{"id":"a"}`)
	if got.IsError || !strings.Contains(got.Output, "stale") {
		t.Errorf("get(a) across a write = %+v, want a stale ok result", got)
	}
	// get(b) at 1 matches position 1 itself: nothing in between.
	if got := call(t, b, ctx, true, "get", `{"id":"b"}`); got.Output != "b0" {
		t.Errorf("get(b) = %q, want b0", got.Output)
	}
	// Once the write is behind the position, the later result is served.
	b.SetPosition("s", 3)
	if got := call(t, b, ctx, true, "get", `{"id":"a"}`); got.Output != "a1" {
		t.Errorf("get(a) after the write = %q, want a1", got.Output)
	}
	// The authoritative call at its own position is never stale.
	b.SetPosition("s", 0)
	if got := call(t, b, At(ctx, 3), false, "get", `{"id":"a"}`); got.Output != "a1" {
		t.Errorf("get(a) At 3 = %q, want a1", got.Output)
	}
	if got := b.Stats().Stale; got != 1 {
		t.Errorf("Stale = %d, want 1", got)
	}
}

func TestLatencyAndScale(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New(testSessions(), &Options{Latency: Trace{}, TimeScale: 0.5})
		t0 := time.Now()
		call(t, b, At(t.Context(), 0), false, "get", `{"id":"a"}`)
		if got, want := time.Since(t0), 60*time.Millisecond; got != want {
			t.Errorf("recorded 120ms at scale 0.5 took %v, want %v", got, want)
		}
		// Unmatched: the tool's median recorded duration (of 80, 120).
		t0 = time.Now()
		call(t, b, t.Context(), true, "get", `{"id":"zz"}`)
		if got, want := time.Since(t0), 60*time.Millisecond; got != want {
			t.Errorf("unmatched call took %v, want %v", got, want)
		}
		if got, want := b.Stats().Busy, 240*time.Millisecond; got != want {
			t.Errorf("Busy = %v, want %v (trace time)", got, want)
		}
	})
}

func TestCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New(testSessions(), &Options{Latency: Const(time.Second)})
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(300*time.Millisecond, cancel)
		t0 := time.Now()
		_, err := b.Call(ctx, backend.Request{Session: "s", Tool: "get", Args: json.RawMessage(`{"id":"a"}`), Speculative: true})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
		if got := time.Since(t0); got != 300*time.Millisecond {
			t.Errorf("cancelled call returned after %v, want 300ms", got)
		}
		st := b.Stats()
		if st.Cancelled != 1 || st.Busy != 300*time.Millisecond || st.SpecBusy != 300*time.Millisecond {
			t.Errorf("Stats = %+v, want 1 cancelled and 300ms busy", st)
		}
	})
}

func TestColdStartAndWarmup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New(testSessions(), &Options{Latency: Const(100 * time.Millisecond), ColdStart: time.Second, WarmTTL: 10 * time.Second})
		ctx := t.Context()
		took := func(tool, args string) time.Duration {
			t0 := time.Now()
			call(t, b, ctx, false, tool, args)
			return time.Since(t0)
		}
		if got := took("get", `{"id":"a"}`); got != 1100*time.Millisecond {
			t.Errorf("cold call took %v, want 1.1s", got)
		}
		if got := took("get", `{"id":"b"}`); got != 100*time.Millisecond {
			t.Errorf("warm call took %v, want 100ms", got)
		}
		// A warm-up halfway done leaves half the cold start to wait.
		go b.Warmup(ctx, backend.Request{Tool: "put"})
		time.Sleep(500 * time.Millisecond)
		if got := took("put", `{"id":"a"}`); got != 600*time.Millisecond {
			t.Errorf("call during warm-up took %v, want 600ms", got)
		}
		// A warm tool's warm-up costs nothing.
		t0 := time.Now()
		if err := b.Warmup(ctx, backend.Request{Tool: "get"}); err != nil || time.Since(t0) != 0 {
			t.Errorf("warm-up of a warm tool: %v after %v", err, time.Since(t0))
		}
		// Past the TTL the tool is cold again.
		time.Sleep(11 * time.Second)
		if got := took("get", `{"id":"a"}`); got != 1100*time.Millisecond {
			t.Errorf("call after the TTL took %v, want 1.1s", got)
		}
		synctest.Wait()
		if st := b.Stats(); st.Warmups != 2 || st.ColdStarts != 3 {
			t.Errorf("Stats = %+v, want 2 warm-ups, 3 cold starts", st)
		}
	})
}
