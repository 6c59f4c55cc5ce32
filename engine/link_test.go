package engine_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ahead-dev/ahead/callkey"
	"github.com/ahead-dev/ahead/engine"
	"github.com/ahead-dev/ahead/predict"
	"github.com/ahead-dev/ahead/trace"
)

// oneLink links the first call made in session to from, once.
type oneLink struct {
	mu      sync.Mutex
	from    string
	session string
	done    bool
}

func (l *oneLink) Link(session string, _ callkey.Key) (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done || session != l.session {
		return "", false
	}
	l.done = true
	return l.from, true
}

var _ engine.Linker = (*oneLink)(nil)

func streamRead(path string) []predict.Prediction {
	args, _ := json.Marshal(map[string]string{"path": path})
	return []predict.Prediction{{Tool: "read", Args: args, P: 1, Origin: predict.OriginStream, CallID: "call_" + path}}
}

// TestJoinServesTheLinkedCall: a read started in the gateway's session
// serves the agent's call in its tool session once the two are linked, and
// the conversation heard there moves with it.
func TestJoinServesTheLinkedCall(t *testing.T) {
	for _, tc := range []struct {
		name       string
		perSession bool
		want       engine.Source
		runs       int
	}{
		{"shared state: the stream's read serves the call", false, engine.Promoted, 1},
		// Run in another session's state: never handed over.
		{"per-session state: the call executes", true, engine.Executed, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				runs := map[string]int{}
				rec := &memRecorder{}
				eng := engine.New(&engine.Options{
					Backends: map[string]engine.Backend{"b": {Backend: slowTools(time.Second, runs), PerSession: tc.perSession}},
					Policy:   readsPolicy(),
					Recorder: rec,
					Linker:   &oneLink{from: "llm-1", session: "tools"},
				})
				defer eng.Close()
				ctx := t.Context()
				if err := eng.Message(ctx, "llm-1", "user", "read a"); err != nil {
					t.Fatal(err)
				}
				eng.Offer("llm-1", engine.NextCall, streamRead("a"))
				time.Sleep(500 * time.Millisecond) // the rest of the stream
				res, err := eng.Call(ctx, "tools", "read", json.RawMessage(`{"path":"a"}`))
				if err != nil {
					t.Fatal(err)
				}
				if res.Source != tc.want {
					t.Errorf("source = %s, want %s", res.Source, tc.want)
				}
				if n := runs[`read{"path":"a"}`]; n != tc.runs {
					t.Errorf("read ran %d times, want %d", n, tc.runs)
				}
				if got := eng.Conversation("tools"); len(got) != 1 || got[0].Content != "read a" || got[0].Session != "tools" {
					t.Errorf("the tool session's conversation = %+v, want the message heard before the link", got)
				}
				if got, want := engine.Sessions(eng), []string{"tools"}; !slices.Equal(got, want) {
					t.Errorf("sessions %v, want %v: the gateway's session folded away", got, want)
				}
				rec.mu.Lock()
				defer rec.mu.Unlock()
				var lines []string
				for _, ev := range rec.evs {
					lines = append(lines, ev.Session+" "+ev.Kind+" "+ev.Tool+ev.Role+" "+ev.CallID)
				}
				// The message and the emitted call once where they were
				// heard, the message again in the tool session (its trace
				// is one conversation), the call line once, there.
				for _, want := range []string{"llm-1 message user ", "llm-1 emitted read call_a", "tools message user ", "tools  read "} {
					if n := strings.Count(strings.Join(lines, "\n")+"\n", want+"\n"); n != 1 {
						t.Errorf("recorded %q %d times, want once; lines:\n%s", want, n, strings.Join(lines, "\n"))
					}
				}
			})
		})
	}
}

// TestThinkTimeCountsOnce: a step whose think time the model side measured
// adds one sample to the think times, not two.
func TestThinkTimeCountsOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		runs := map[string]int{}
		eng := engine.New(&engine.Options{
			Backends: map[string]engine.Backend{"b": {Backend: slowTools(time.Millisecond, runs)}},
			Policy:   readsPolicy(),
		})
		defer eng.Close()
		ctx := t.Context()
		call := func(session string) {
			t.Helper()
			if _, err := eng.Call(ctx, session, "list", json.RawMessage(`{}`)); err != nil {
				t.Fatal(err)
			}
		}
		call("s1") // the first call has no think time before it
		if n := engine.ThinkSamples(eng); n != 0 {
			t.Fatalf("%d samples after a first call, want 0", n)
		}
		time.Sleep(time.Second)
		eng.ThinkTime("s1", 800*time.Millisecond) // the gateway saw the model think
		eng.ThinkTime("s2", 800*time.Millisecond) // another session's step
		call("s1")
		if n := engine.ThinkSamples(eng); n != 2 {
			t.Errorf("%d samples after two steps seen by the gateway, want 2 (each once)", n)
		}
		time.Sleep(time.Second)
		call("s1") // a step the gateway did not see: the engine's own sample
		if n := engine.ThinkSamples(eng); n != 3 {
			t.Errorf("%d samples after a step only the engine saw, want 3", n)
		}
	})
}

func TestOfferRecordsEmittedCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &memRecorder{}
		// No policy: nothing runs, but what the model emitted is recorded.
		eng := engine.New(&engine.Options{
			Backends: map[string]engine.Backend{"b": {Backend: slowTools(time.Second, map[string]int{})}},
			Recorder: rec,
		})
		defer eng.Close()
		eng.Offer("s", engine.NextCall, append(streamRead("a"),
			predict.Prediction{Tool: "read", Args: json.RawMessage(`not json`), P: 1, Origin: predict.OriginStream},
			predict.Prediction{Tool: "read", Args: json.RawMessage(`{"path":"b"}`), P: 0.5, Origin: predict.OriginSpeculator}))
		rec.mu.Lock()
		defer rec.mu.Unlock()
		if len(rec.evs) != 1 {
			t.Fatalf("recorded %+v, want the one valid call from the stream", rec.evs)
		}
		ev := rec.evs[0]
		if ev.Kind != trace.KindEmitted || ev.Tool != "read" || string(ev.Args) != `{"path":"a"}` || ev.CallID != "call_a" || ev.Step != 1 {
			t.Errorf("recorded %+v", ev)
		}
	})
}

// TestOfferFoldedRecordsWhereEmitted: a response's calls are emitted
// lines of the session its request was sent in, however late its parser
// offers them: one offered after the agent's call folded that session
// into the tool side's is recorded as the name stood then, not at the
// tool session's next seq (the gateway test's flake under load); it is
// still speculated for the tool session.
func TestOfferFoldedRecordsWhereEmitted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		runs := map[string]int{}
		rec := &memRecorder{}
		eng := engine.New(&engine.Options{
			Backends: map[string]engine.Backend{"b": {Backend: slowTools(time.Second, runs)}},
			Policy:   readsPolicy(),
			Recorder: rec,
		})
		defer eng.Close()
		ctx := t.Context()
		for range 2 {
			if _, err := eng.Call(ctx, "tools", "list", json.RawMessage(`{}`)); err != nil {
				t.Fatal(err)
			}
		}
		eng.Offer("llm-1", 0, streamRead("a"))
		time.Sleep(2 * time.Second) // read a has run (slowTools counts unlocked)
		eng.Join("llm-1", "tools")
		eng.Offer("llm-1", 1, streamRead("b")) // the same response, parsed late
		time.Sleep(2 * time.Second)
		if res, err := eng.Call(ctx, "tools", "read", json.RawMessage(`{"path":"b"}`)); err != nil || res.Source != engine.Reused {
			t.Errorf("the late offer's read: %v, %v; want reused in the tool session", res.Source, err)
		}
		rec.mu.Lock()
		defer rec.mu.Unlock()
		var got []string
		for _, ev := range rec.evs {
			if ev.Kind == trace.KindEmitted {
				got = append(got, fmt.Sprintf("%s %d/%d %s", ev.Session, ev.Seq, ev.Step, ev.Args))
			}
		}
		want := []string{`llm-1 0/1 {"path":"a"}`, `llm-1 0/1 {"path":"b"}`}
		if !slices.Equal(got, want) {
			t.Errorf("emitted lines %q, want %q", got, want)
		}
	})
}

// TestFoldedNameReachesTheSession: the gateway may pick up its own name for
// a conversation just before the link folds it into the tool session, and
// reach the engine just after. What it then offers, says and measures under
// the old name reaches the tool session: nothing recreates the gateway's
// session, the late stream call serves the agent, the message is heard.
func TestFoldedNameReachesTheSession(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		runs := map[string]int{}
		eng := engine.New(&engine.Options{
			Backends: map[string]engine.Backend{"b": {Backend: slowTools(time.Second, runs)}},
			Policy:   readsPolicy(),
			Linker:   &oneLink{from: "llm-1", session: "tools"},
		})
		defer eng.Close()
		ctx := t.Context()
		call := func(tool, args string) engine.Result {
			t.Helper()
			res, err := eng.Call(ctx, "tools", tool, json.RawMessage(args))
			if err != nil {
				t.Fatal(err)
			}
			return res
		}
		// Before the link the session has made calls of its own: seqs
		// counted in the gateway's session mean nothing here.
		call("list", `{}`)
		call("list", `{"all":true}`)
		eng.Offer("llm-1", engine.NextCall, streamRead("a"))
		time.Sleep(200 * time.Millisecond)
		if res := call("read", `{"path":"a"}`); res.Source != engine.Promoted {
			t.Fatalf("the first read was %s, want promoted (the link folds llm-1 into tools)", res.Source)
		}
		// The gateway read its name before the fold and speaks only now.
		if !eng.Offer("llm-1", 0, streamRead("b")) {
			t.Errorf("an offer under the folded name was refused as late; its seq counted another session's calls")
		}
		if err := eng.Message(ctx, "llm-1", "assistant", "read b next"); err != nil {
			t.Fatal(err)
		}
		eng.ThinkTime("llm-1", 300*time.Millisecond)
		if got, want := engine.Sessions(eng), []string{"tools"}; !slices.Equal(got, want) {
			t.Errorf("sessions %v, want %v: the folded name recreated its session", got, want)
		}
		time.Sleep(2 * time.Second)
		if res := call("read", `{"path":"b"}`); res.Source != engine.Reused {
			t.Errorf("the read offered under the folded name was %s, want reused", res.Source)
		}
		if n := runs[`read{"path":"b"}`]; n != 1 {
			t.Errorf("read b ran %d times, want once", n)
		}
		if got := eng.Conversation("tools"); len(got) != 1 || got[0].Content != "read b next" || got[0].Session != "tools" {
			t.Errorf("the tool session's conversation = %+v, want the message said under the folded name", got)
		}
		if got := eng.Conversation("llm-1"); len(got) != 1 {
			t.Errorf("Conversation(llm-1) = %+v, want the tool session's", got)
		}
		if n := engine.ThinkSamples(eng); n != 2 {
			// The first read's think time (engine-measured), then the
			// gateway's sample under the folded name; read b's own is
			// not added again.
			t.Errorf("%d think samples, want 2", n)
		}
	})
}

// TestFoldsAreBounded: the folded names go with the session they stand for,
// at most MaxSessions of them are kept (the oldest forgotten first), and a
// name folded into a session that is folded in turn follows it.
func TestFoldsAreBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := engine.New(&engine.Options{
			Backends:    map[string]engine.Backend{"b": {Backend: slowTools(time.Millisecond, map[string]int{})}},
			MaxSessions: 3,
		})
		defer eng.Close()
		ctx := t.Context()
		say := func(session, text string) {
			t.Helper()
			if err := eng.Message(ctx, session, "user", text); err != nil {
				t.Fatal(err)
			}
		}
		sessions := func(want ...string) {
			t.Helper()
			if got := engine.Sessions(eng); !slices.Equal(got, want) {
				t.Errorf("sessions %v, want %v", got, want)
			}
		}
		// Folded before the engine heard of them: still folded.
		for _, g := range []string{"g1", "g2", "g3"} {
			eng.Join(g, "t")
		}
		say("g2", "two")
		sessions("t")
		eng.Join("g4", "t") // past MaxSessions: g1, the oldest, is forgotten
		say("g4", "four")
		say("g1", "one")
		sessions("g1", "t")
		if got := eng.Conversation("t"); len(got) != 2 || got[0].Content != "two" || got[1].Content != "four" {
			t.Errorf("Conversation(t) = %+v, want two, four", got)
		}

		// t is folded into u: its names follow it (and g2, now the
		// oldest of four, is forgotten).
		eng.Join("t", "u")
		say("g3", "three")
		sessions("g1", "u")
		if got := eng.Conversation("u"); len(got) != 3 || got[2].Content != "three" {
			t.Errorf("Conversation(u) = %+v, want t's two messages and three", got)
		}
		// Joining a name into the session it stands for does nothing.
		eng.Join("u", "g3")
		sessions("g1", "u")

		// Dropped with their session: the names are free again.
		eng.EndSession("u")
		say("g3", "again")
		sessions("g1", "g3")
		if got := eng.Conversation("g3"); len(got) != 1 || got[0].Content != "again" {
			t.Errorf("Conversation(g3) = %+v, want its own session's", got)
		}
	})
}

// gateRecorder holds the first emitted line it is asked to record until
// release is closed: an Offer paused between its look-up of the session
// and its speculation.
type gateRecorder struct {
	memRecorder
	once      sync.Once
	recording chan struct{}
	release   chan struct{}
}

func (r *gateRecorder) Record(ev trace.Event) error {
	if ev.Kind == trace.KindEmitted {
		r.once.Do(func() {
			close(r.recording)
			<-r.release
		})
	}
	return r.memRecorder.Record(ev)
}

// TestOfferFoldedWhileRecording: a Join that lands while an Offer for the
// folded session is recording its emitted calls does not lose the offer;
// it is speculated in the session the name was folded into.
func TestOfferFoldedWhileRecording(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		runs := map[string]int{}
		rec := &gateRecorder{recording: make(chan struct{}), release: make(chan struct{})}
		eng := engine.New(&engine.Options{
			Backends: map[string]engine.Backend{"b": {Backend: slowTools(time.Second, runs)}},
			Policy:   readsPolicy(),
			Recorder: rec,
			Linker:   &oneLink{from: "llm-1", session: "tools"},
		})
		defer eng.Close()
		ctx := t.Context()
		if err := eng.Message(ctx, "llm-1", "user", "read a"); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		wg.Go(func() { eng.Offer("llm-1", engine.NextCall, streamRead("a")) })
		<-rec.recording
		// The link folds llm-1 into tools while the offer records.
		if _, err := eng.Call(ctx, "tools", "list", json.RawMessage(`{}`)); err != nil {
			t.Fatal(err)
		}
		close(rec.release)
		wg.Wait()
		time.Sleep(2 * time.Second)
		res, err := eng.Call(ctx, "tools", "read", json.RawMessage(`{"path":"a"}`))
		if err != nil {
			t.Fatal(err)
		}
		if res.Source != engine.Reused {
			t.Errorf("the read offered while its session was folded was %s, want reused", res.Source)
		}
		if n := runs[`read{"path":"a"}`]; n != 1 {
			t.Errorf("read a ran %d times, want once", n)
		}
	})
}

// TestResolve: the engine keeps the links between sessions, once; the
// gateway asks for them. A name folded away stands for its session until
// that session ends; a second fold of the name is ignored.
func TestResolve(t *testing.T) {
	eng := engine.New(nil)
	defer eng.Close()
	eng.Join("llm-1", "tools-1")
	eng.Join("llm-1", "tools-2") // a later link cannot overrule the first
	for _, tc := range []struct{ name, want string }{
		{"llm-1", "tools-1"}, {"tools-1", "tools-1"}, {"llm-2", "llm-2"},
	} {
		if got := eng.Resolve(tc.name); got != tc.want {
			t.Errorf("Resolve(%q) = %q, want %q", tc.name, got, tc.want)
		}
	}
	eng.EndSession("tools-1")
	if got := eng.Resolve("llm-1"); got != "llm-1" {
		t.Errorf("Resolve(llm-1) after its session ended = %q, want the name itself", got)
	}
}
