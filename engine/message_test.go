package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ahead-dev/ahead/backend"
	"github.com/ahead-dev/ahead/engine"
	"github.com/ahead-dev/ahead/policy"
	"github.com/ahead-dev/ahead/predict"
	"github.com/ahead-dev/ahead/sched"
	"github.com/ahead-dev/ahead/trace"
)

// listener predicts read{"path": X} when a user says "open X", and the
// pattern guess read{"path":"a"} after list.
type listener struct{ predict.Func }

func (listener) Hear(msg trace.Event) []predict.Prediction {
	if path, ok := strings.CutPrefix(msg.Content, "open "); ok && msg.Role == trace.RoleUser {
		args, _ := json.Marshal(map[string]string{"path": path})
		return []predict.Prediction{{Tool: "read", Args: args, P: 0.8, Origin: predict.OriginMessage}}
	}
	return nil
}

func TestMessageSpeculatesTheFirstCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		runs := map[string]int{}
		rec := &memRecorder{}
		eng := engine.New(&engine.Options{
			Backends:  map[string]engine.Backend{"b": {Backend: slowTools(time.Second, runs)}},
			Policy:    readsPolicy(),
			Predictor: listener{next},
			Recorder:  rec,
		})
		defer eng.Close()
		ctx := t.Context()
		if err := eng.Message(ctx, "s1", "user", "open b.txt"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second) // the model thinks
		res, err := eng.Call(ctx, "s1", "read", json.RawMessage(`{"path":"b.txt"}`))
		if err != nil {
			t.Fatal(err)
		}
		if res.Source != engine.Reused {
			t.Errorf("first call served by %s, want reused", res.Source)
		}
		st := eng.Stats()
		if got := st.Origins[predict.OriginMessage]; got.Reused != 1 || got.Started != 1 {
			t.Errorf("message origin stats = %+v, want 1 started, 1 reused", got)
		}
		if _, ok := st.Origins[predict.OriginPattern]; ok {
			t.Errorf("pattern origin counted %+v, want nothing", st.Origins[predict.OriginPattern])
		}
		rec.mu.Lock()
		defer rec.mu.Unlock()
		var kinds []string
		for _, ev := range rec.evs {
			kinds = append(kinds, ev.Kind+":"+ev.Role+ev.Tool+ev.Origin)
		}
		want := "message:user|speculative:readmessage|:read" // the message, the speculative run, the call
		if got := strings.Join(kinds, "|"); got != want {
			t.Errorf("recorded %s, want %s", got, want)
		}
	})
}

func TestOfferMergesOrigins(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		runs := map[string]int{}
		eng := engine.New(&engine.Options{
			Backends:  map[string]engine.Backend{"b": {Backend: slowTools(time.Second, runs)}},
			Policy:    readsPolicy(),
			Predictor: next,
		})
		defer eng.Close()
		ctx := t.Context()
		if _, err := eng.Call(ctx, "s1", "list", json.RawMessage(`{}`)); err != nil {
			t.Fatal(err)
		}
		// The model's stream shows the same call the pattern predicted,
		// arguments written differently: one execution, both credited.
		eng.Offer("s1", engine.NextCall, []predict.Prediction{{Tool: "read", Args: json.RawMessage(`{ "path" : "a" }`), P: 1, Origin: predict.OriginStream}})
		time.Sleep(1500 * time.Millisecond)
		if _, err := eng.Call(ctx, "s1", "read", json.RawMessage(`{"path":"a"}`)); err != nil {
			t.Fatal(err)
		}
		if n := runs[`read{"path":"a"}`]; n != 1 {
			t.Errorf("read ran %d times, want 1", n)
		}
		st := eng.Stats()
		for _, o := range []predict.Origin{predict.OriginPattern, predict.OriginStream} {
			if got := st.Origins[o]; got.Offered != 1 || got.Reused != 1 || got.Saved != time.Second {
				t.Errorf("%s origin stats = %+v, want 1 offered, 1 reused, 1s saved", o, got)
			}
		}
	})
}

func TestMessageErrors(t *testing.T) {
	eng := engine.New(&engine.Options{Backends: map[string]engine.Backend{"b": {Backend: slowTools(0, map[string]int{})}}})
	defer eng.Close()
	for _, tc := range []struct{ role, content string }{{"tool", "x"}, {"", "x"}, {"user", ""}} {
		if err := eng.Message(t.Context(), "s", tc.role, tc.content); !errors.Is(err, engine.ErrInvalidMessage) {
			t.Errorf("Message(%q, %q) = %v, want ErrInvalidMessage", tc.role, tc.content, err)
		}
	}
}

func TestConversationWindow(t *testing.T) {
	eng := engine.New(&engine.Options{
		Backends:        map[string]engine.Backend{"b": {Backend: slowTools(0, map[string]int{})}},
		MaxMessageBytes: 100,
	})
	defer eng.Close()
	say := func(role, content string) {
		if err := eng.Message(t.Context(), "s", role, content); err != nil {
			t.Fatal(err)
		}
	}
	say("system", strings.Repeat("s", 30))
	say("user", strings.Repeat("u", 30))
	say("assistant", strings.Repeat("a", 30))
	say("user", strings.Repeat("v", 30))
	say("assistant", strings.Repeat("b", 20))
	var got []string
	total := 0
	for _, m := range eng.Conversation("s") {
		got = append(got, m.Role+":"+m.Content[:1])
		total += len(m.Content)
	}
	// The middle went first: the system prompt and the latest user
	// message stay.
	if want := "system:s user:v assistant:b"; strings.Join(got, " ") != want || total > 100 {
		t.Errorf("window = %v (%d bytes), want %s within 100 bytes", got, total, want)
	}
	say("user", strings.Repeat("é", 80)) // 160 bytes: one message larger than the window
	w := eng.Conversation("s")
	if len(w) != 1 || len(w[0].Content) > 100 || !strings.HasPrefix(w[0].Content, "é") {
		t.Errorf("oversized message kept as %d messages, first %q...", len(w), w[0].Content[:4])
	}
}

// TestNoRerunOfWhatTheAgentHas checks that a call whose result the agent
// just received is not speculated again, not after another session's write
// either, until the session itself writes.
func TestNoRerunOfWhatTheAgentHas(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		runs := map[string]int{}
		always := predict.Func(func(ev trace.Event) []predict.Prediction {
			if ev.Session != "s" {
				return nil
			}
			return []predict.Prediction{{Tool: "read", Args: json.RawMessage(`{"path":"a"}`), P: 0.9}}
		})
		pol := readsPolicy()
		pol.Tools["write"] = policy.Tool{Writes: policy.Refs("path")}
		eng := engine.New(&engine.Options{
			Backends:  map[string]engine.Backend{"b": {Backend: slowTools(100*time.Millisecond, runs)}},
			Policy:    pol,
			Predictor: always,
		})
		defer eng.Close()
		call := func(tool, args string) engine.Result {
			t.Helper()
			time.Sleep(time.Second)
			r, err := eng.Call(t.Context(), "s", tool, json.RawMessage(args))
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
		call("list", `{}`)
		if r := call("read", `{"path":"a"}`); r.Source != engine.Reused {
			t.Fatalf("read served by %s, want reused", r.Source)
		}
		call("list", `{}`)
		call("list", `{"x":1}`)
		synctest.Wait()
		if n := runs[`read{"path":"a"}`]; n != 1 {
			t.Errorf("read ran %d times before any write, want 1", n)
		}
		// Another session writes what s read: s's next read (if any) is
		// kept fresh by invalidation, but s has no reason to ask again.
		time.Sleep(time.Second)
		if _, err := eng.Call(t.Context(), "other", "write", json.RawMessage(`{"path":"a"}`)); err != nil {
			t.Fatal(err)
		}
		call("list", `{"x":2}`)
		synctest.Wait()
		if n := runs[`read{"path":"a"}`]; n != 1 {
			t.Errorf("read ran %d times after another session's write, want 1", n)
		}
		call("write", `{"path":"a"}`)
		time.Sleep(time.Second)
		synctest.Wait()
		if n := runs[`read{"path":"a"}`]; n != 2 {
			t.Errorf("read ran %d times after a write, want 2", n)
		}
	})
}

// TestDebugLinePerSpeculation checks that a debug logger gets one line per
// speculative execution, saying what predicted it and what became of it,
// and one per authoritative call, with the arguments as a digest only.
func TestDebugLinePerSpeculation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf bytes.Buffer
		log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
		eng := engine.New(&engine.Options{
			Backends:  map[string]engine.Backend{"b": {Backend: slowTools(time.Second, map[string]int{})}},
			Policy:    readsPolicy(),
			Predictor: next,
			Logger:    log,
		})
		if _, err := eng.Call(t.Context(), "s1", "list", json.RawMessage(`{}`)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second)
		if _, err := eng.Call(t.Context(), "s1", "read", json.RawMessage(`{"path":"a"}`)); err != nil {
			t.Fatal(err)
		}
		eng.Close()
		var lines, calls []string
		for l := range strings.Lines(buf.String()) {
			if strings.Contains(l, "msg=call ") {
				calls = append(calls, l)
			} else {
				lines = append(lines, l)
			}
		}
		if len(lines) != 1 {
			t.Fatalf("%d speculation lines, want 1:\n%s", len(lines), buf.String())
		}
		// And one line per authoritative call (issue 27).
		if len(calls) != 2 {
			t.Fatalf("%d call lines, want 2:\n%s", len(calls), buf.String())
		}
		for i, wants := range [][]string{
			{"session=s1", "seq=0", "tool=list", "source=executed", "saved_ms=0", "duration_ms=1000", "args="},
			{"session=s1", "seq=1", "tool=read", "source=reused", "saved_ms=1000", "duration_ms=0", "args="},
		} {
			fields := strings.Fields(calls[i])
			for _, want := range wants {
				if !slices.ContainsFunc(fields, func(f string) bool { return f == want || strings.HasSuffix(want, "=") && strings.HasPrefix(f, want) }) {
					t.Errorf("call line %q lacks %q", calls[i], want)
				}
			}
		}
		for _, want := range []string{"msg=speculation", "session=s1", "tool=read", "origin=pattern", "p=0.9", "outcome=reused", "ran_ms=1000", "args="} {
			if !strings.Contains(lines[0], want) {
				t.Errorf("debug line %q lacks %q", lines[0], want)
			}
		}
		if strings.Contains(lines[0], `"a"`) {
			t.Errorf("debug line %q shows the arguments", lines[0])
		}
	})
}

// TestOfferLate: guesses meant for a call the agent has begun are late:
// Offer refuses them and runs nothing, while guesses for the next call, for
// the rest of a step of parallel calls, or for whatever comes next
// (NextCall) are taken.
func TestOfferLate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// slowTools, counted under a lock: calls run in parallel here.
		var mu sync.Mutex
		runs := map[string]int{}
		counted := backend.Funcs{}
		for _, name := range []string{"list", "read"} {
			counted[name] = func(ctx context.Context, args json.RawMessage) (string, error) {
				mu.Lock()
				runs[name+string(args)]++
				mu.Unlock()
				select {
				case <-time.After(time.Second):
					return name + string(args), nil
				case <-ctx.Done():
					return "", ctx.Err()
				}
			}
		}
		eng := engine.New(&engine.Options{
			Backends: map[string]engine.Backend{"b": {Backend: counted, Limits: sched.Limits{Slots: 8}}},
			Policy:   readsPolicy(),
		})
		defer eng.Close()
		ctx := t.Context()
		guess := func(path string) []predict.Prediction {
			return []predict.Prediction{{Tool: "read", Args: json.RawMessage(`{"path":"` + path + `"}`), P: 0.9, Origin: predict.OriginSpeculator}}
		}
		if !eng.Offer("s", 0, guess("before")) {
			t.Error("a guess for a new session's first call was refused")
		}
		// Step 1: two calls in parallel (seq 0 and 1).
		done := make(chan struct{})
		for _, dir := range []string{"x", "y"} {
			go func() {
				eng.Call(ctx, "s", "list", json.RawMessage(`{"dir":"`+dir+`"}`))
				done <- struct{}{}
			}()
		}
		synctest.Wait()
		// A guess made after seq 0's result is meant for seq 1, which the
		// agent issued with it: the agent has not begun the next step.
		if !eng.Offer("s", 1, guess("sibling")) {
			t.Error("a guess for the rest of a parallel step was refused")
		}
		<-done
		<-done
		if !eng.Offer("s", 2, guess("next")) {
			t.Error("a guess for the next call, made while the agent thinks, was refused")
		}
		time.Sleep(2 * time.Second) // the agent thinks; the guesses run
		// Step 2 begins (seq 2): what comes now for seq 2 or earlier is late.
		go func() {
			eng.Call(ctx, "s", "list", json.RawMessage(`{"dir":"z"}`))
			done <- struct{}{}
		}()
		synctest.Wait()
		for _, seq := range []int{1, 2} {
			if eng.Offer("s", seq, guess("late"+strconv.Itoa(seq))) {
				t.Errorf("a guess for seq %d came after the call of seq 2 began, and was taken", seq)
			}
		}
		if !eng.Offer("s", engine.NextCall, guess("stream")) {
			t.Error("a guess for whatever comes next was refused")
		}
		if !eng.Offer("s", 3, guess("after")) {
			t.Error("a guess for the call after the running one was refused")
		}
		<-done
		time.Sleep(2 * time.Second)
		mu.Lock()
		defer mu.Unlock()
		for _, path := range []string{"before", "sibling", "next", "stream", "after"} {
			if n := runs[`read{"path":"`+path+`"}`]; n != 1 {
				t.Errorf("guess %s ran %d times, want 1", path, n)
			}
		}
		for _, path := range []string{"late1", "late2"} {
			if n := runs[`read{"path":"`+path+`"}`]; n != 0 {
				t.Errorf("late guess %s ran %d times", path, n)
			}
		}
		if got := eng.Stats().Origins[predict.OriginSpeculator].Offered; got != 5 {
			t.Errorf("speculator origin offered %d, want 5 (the late ones not counted)", got)
		}
	})
}
