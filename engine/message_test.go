package engine_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ahead-dev/ahead/engine"
	"github.com/ahead-dev/ahead/policy"
	"github.com/ahead-dev/ahead/predict"
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
		eng := engine.New(engine.Options{
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
		eng := engine.New(engine.Options{
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
		eng.Offer("s1", []predict.Prediction{{Tool: "read", Args: json.RawMessage(`{ "path" : "a" }`), P: 1, Origin: predict.OriginStream}})
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
	eng := engine.New(engine.Options{Backends: map[string]engine.Backend{"b": {Backend: slowTools(0, map[string]int{})}}})
	defer eng.Close()
	for _, tc := range []struct{ role, content string }{{"tool", "x"}, {"", "x"}, {"user", ""}} {
		if err := eng.Message(t.Context(), "s", tc.role, tc.content); !errors.Is(err, engine.ErrInvalidMessage) {
			t.Errorf("Message(%q, %q) = %v, want ErrInvalidMessage", tc.role, tc.content, err)
		}
	}
}

func TestConversationWindow(t *testing.T) {
	eng := engine.New(engine.Options{
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
// just received is not speculated again, until a write may have changed
// it.
func TestNoRerunOfWhatTheAgentHas(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		runs := map[string]int{}
		always := predict.Func(func(ev trace.Event) []predict.Prediction {
			return []predict.Prediction{{Tool: "read", Args: json.RawMessage(`{"path":"a"}`), P: 0.9}}
		})
		pol := readsPolicy()
		pol.Tools["write"] = policy.Tool{Writes: "path"}
		eng := engine.New(engine.Options{
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
		// The speculative runs write runs from their own goroutines: Wait
		// until they are blocked, which orders those writes before the read
		// (the race detector saw none without it).
		synctest.Wait()
		if n := runs[`read{"path":"a"}`]; n != 1 {
			t.Errorf("read ran %d times before any write, want 1", n)
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
// with the arguments as a digest only.
func TestDebugLinePerSpeculation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf bytes.Buffer
		log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
		eng := engine.New(engine.Options{
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
		lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
		if len(lines) != 1 {
			t.Fatalf("%d debug lines, want 1:\n%s", len(lines), buf.String())
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
