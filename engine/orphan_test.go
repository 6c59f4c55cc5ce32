package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ahead-dev/ahead/backend"
	"github.com/ahead-dev/ahead/engine"
	"github.com/ahead-dev/ahead/policy"
	"github.com/ahead-dev/ahead/sched"
)

// counted is a backend whose every call takes a second (cut short by its
// context) and answers which run of its tool it was.
type counted struct {
	mu   sync.Mutex
	runs map[string]int
	cut  int // runs whose context ended before they did
}

func (c *counted) Call(ctx context.Context, req backend.Request) (backend.Response, error) {
	c.mu.Lock()
	if c.runs == nil {
		c.runs = make(map[string]int)
	}
	c.runs[req.Tool]++
	n := c.runs[req.Tool]
	c.mu.Unlock()
	select {
	case <-time.After(time.Second):
	case <-ctx.Done():
		c.mu.Lock()
		c.cut++
		c.mu.Unlock()
		return backend.Response{}, ctx.Err()
	}
	return backend.Response{Output: fmt.Sprintf("%s run %d", req.Tool, n)}, nil
}

func (c *counted) ran(tool string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.runs[tool]
}

func orphanPolicy() *policy.Policy {
	return &policy.Policy{Tools: map[string]policy.Tool{
		"read":  {Reads: policy.Refs("path")},
		"write": {Writes: policy.Refs("path")},
	}}
}

var argsA = json.RawMessage(`{"path":"a"}`)

// leave starts a call of tool in session whose requester leaves after
// 300 ms, while it runs, and checks that the call returned the requester's
// context error.
func leave(t *testing.T, eng *engine.Engine, session, tool string) {
	t.Helper()
	ctx, cancel := context.WithCancel(engine.KeepRunning(t.Context()))
	errc := make(chan error, 1)
	go func() {
		_, err := eng.Call(ctx, session, tool, argsA)
		errc <- err
	}()
	time.Sleep(300 * time.Millisecond)
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("call whose requester left: err = %v, want context.Canceled", err)
	}
}

// TestOrphanJoined (issue 26 item 4): a call whose requester left while it
// ran (a broken stream) keeps running, and the same call re-issued in its
// session gets its result instead of running again, reads and writes
// alike, while it runs and shortly after it finished.
func TestOrphanJoined(t *testing.T) {
	for _, tool := range []string{"read", "write"} {
		for _, tc := range []struct {
			name  string
			after time.Duration // from the first call's start to the re-issue
			saved time.Duration
			took  time.Duration // how long the re-issued call waited
		}{
			{"while it runs", 300 * time.Millisecond, 300 * time.Millisecond, 700 * time.Millisecond},
			{"after it finished", 1500 * time.Millisecond, time.Second, 0},
		} {
			t.Run(tool+" "+tc.name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					b := &counted{}
					eng := engine.New(&engine.Options{
						Backends: map[string]engine.Backend{"b": {Backend: b}},
						Policy:   orphanPolicy(),
					})
					defer eng.Close()
					leave(t, eng, "s1", tool)
					time.Sleep(tc.after - 300*time.Millisecond)
					t0 := time.Now()
					res, err := eng.Call(t.Context(), "s1", tool, argsA)
					if err != nil {
						t.Fatal(err)
					}
					if res.Source != engine.Joined || res.Output != tool+" run 1" {
						t.Errorf("re-issued call: %s %q, want joined %q", res.Source, res.Output, tool+" run 1")
					}
					if n := b.ran(tool); n != 1 {
						t.Errorf("the backend ran %s %d times, want once", tool, n)
					}
					if res.Saved != tc.saved {
						t.Errorf("saved %v, want %v", res.Saved, tc.saved)
					}
					if took := time.Since(t0); took != tc.took {
						t.Errorf("the re-issued call waited %v, want %v", took, tc.took)
					}
					st := eng.Stats()
					if st.Orphaned != 1 || st.Joined != 1 || st.Executed != 1 || st.Calls != 2 || st.Tools[tool].Joined != 1 {
						t.Errorf("stats: orphaned %d, joined %d (tool %d), executed %d, calls %d; want 1, 1 (1), 1, 2",
							st.Orphaned, st.Joined, st.Tools[tool].Joined, st.Executed, st.Calls)
					}
					// Joined once: a third identical call is a call of its own.
					res, err = eng.Call(t.Context(), "s1", tool, argsA)
					if err != nil {
						t.Fatal(err)
					}
					if res.Source != engine.Executed || b.ran(tool) != 2 {
						t.Errorf("third call: %s after %d runs, want executed after 2", res.Source, b.ran(tool))
					}
				})
			})
		}
	}
}

// TestOrphanNotJoined: what is not joined runs again. Two identical calls
// of a live requester are two calls; another session's call is its own; a
// re-issue after the adoption window, or (for a read) after a write, runs
// again; so does a Continue.
func TestOrphanNotJoined(t *testing.T) {
	t.Run("live twin", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			b := &counted{}
			eng := engine.New(&engine.Options{Backends: map[string]engine.Backend{"b": {Backend: b}}, Policy: orphanPolicy()})
			defer eng.Close()
			var wg sync.WaitGroup
			srcs := make([]engine.Source, 2)
			for i := range srcs {
				wg.Go(func() {
					res, err := eng.Call(t.Context(), "s1", "write", argsA)
					if err != nil {
						t.Error(err)
					}
					srcs[i] = res.Source
				})
			}
			wg.Wait()
			if b.ran("write") != 2 || srcs[0] != engine.Executed || srcs[1] != engine.Executed {
				t.Errorf("two live twins: ran %d times, sources %v; want 2, both executed", b.ran("write"), srcs)
			}
		})
	})
	for _, tc := range []struct {
		name    string
		tool    string
		between func(eng *engine.Engine)
		session string
		window  time.Duration
		cont    bool
	}{
		{name: "window expired", tool: "write", between: func(*engine.Engine) { time.Sleep(11 * time.Second) }},
		{name: "window set shorter", tool: "write", window: time.Second, between: func(*engine.Engine) { time.Sleep(2 * time.Second) }},
		{name: "joining off", tool: "write", window: -1, between: func(*engine.Engine) {}},
		{name: "read past its lifetime", tool: "read", between: func(*engine.Engine) { time.Sleep(10 * time.Second) }},
		{name: "read after a write", tool: "read", between: func(eng *engine.Engine) {
			if _, err := eng.Call(context.Background(), "s2", "write", json.RawMessage(`{"path":"z"}`)); err != nil {
				panic(err)
			}
		}},
		{name: "another session", tool: "write", session: "s2", between: func(*engine.Engine) {}},
		{name: "a continued call", tool: "write", cont: true, between: func(*engine.Engine) {}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := &counted{}
				eng := engine.New(&engine.Options{
					Backends: map[string]engine.Backend{"b": {Backend: b}}, Policy: orphanPolicy(), AdoptWindow: tc.window,
				})
				defer eng.Close()
				leave(t, eng, "s1", tc.tool)
				tc.between(eng)
				session := "s1"
				if tc.session != "" {
					session = tc.session
				}
				call := eng.Call
				if tc.cont {
					call = eng.Continue
				}
				res, err := call(t.Context(), session, tc.tool, argsA)
				if err != nil {
					t.Fatal(err)
				}
				if res.Source != engine.Executed || b.ran(tc.tool) != 2 {
					t.Errorf("re-issued call: %s after %d runs, want executed after 2", res.Source, b.ran(tc.tool))
				}
			})
		})
	}
}

// TestOrphanHandedBack: a call that joined an orphan and left in turn
// hands it back; the next re-issue joins it.
func TestOrphanHandedBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &counted{}
		eng := engine.New(&engine.Options{Backends: map[string]engine.Backend{"b": {Backend: b}}, Policy: orphanPolicy()})
		defer eng.Close()
		leave(t, eng, "s1", "write") // t = 300 ms
		leave(t, eng, "s1", "write") // joins, leaves at 600 ms
		res, err := eng.Call(t.Context(), "s1", "write", argsA)
		if err != nil {
			t.Fatal(err)
		}
		if res.Source != engine.Joined || b.ran("write") != 1 {
			t.Errorf("third attempt: %s after %d runs, want joined after 1", res.Source, b.ran("write"))
		}
		if st := eng.Stats(); st.Orphaned != 1 || st.Joined != 1 {
			t.Errorf("orphaned %d, joined %d; want 1, 1", st.Orphaned, st.Joined)
		}
	})
}

// TestOrphanNotStarted: a call whose requester leaves while it waits for a
// slot is dropped (nothing was sent), as before: no orphan, no run.
func TestOrphanNotStarted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &counted{}
		eng := engine.New(&engine.Options{
			Backends: map[string]engine.Backend{"b": {Backend: b, Limits: sched.Limits{Slots: 1}}},
			Policy:   orphanPolicy(),
		})
		defer eng.Close()
		var wg sync.WaitGroup
		wg.Go(func() {
			if _, err := eng.Call(t.Context(), "s1", "read", argsA); err != nil {
				t.Error(err)
			}
		})
		synctest.Wait()
		leave(t, eng, "s2", "write") // queued behind the read
		wg.Wait()
		synctest.Wait()
		if n := b.ran("write"); n != 0 {
			t.Errorf("the write whose requester left while queued ran %d times, want 0", n)
		}
		if st := eng.Stats(); st.Orphaned != 0 {
			t.Errorf("orphaned %d, want 0", st.Orphaned)
		}
		res, err := eng.Call(t.Context(), "s2", "write", argsA)
		if err != nil {
			t.Fatal(err)
		}
		if res.Source != engine.Executed {
			t.Errorf("re-issued: %s, want executed", res.Source)
		}
	})
}

// TestCloseCutsOrphans: Close cuts the orphans and waits for them.
func TestCloseCutsOrphans(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &counted{}
		eng := engine.New(&engine.Options{Backends: map[string]engine.Backend{"b": {Backend: b}}, Policy: orphanPolicy()})
		leave(t, eng, "s1", "write")
		t0 := time.Now()
		eng.Close()
		if d := time.Since(t0); d != 0 {
			t.Errorf("Close took %v, want no wait for the orphan's second", d)
		}
		b.mu.Lock()
		cut := b.cut
		b.mu.Unlock()
		if cut != 1 {
			t.Errorf("%d runs cut, want the orphan's", cut)
		}
	})
}

// TestUnmarkedCallCut: a call whose context is not marked KeepRunning (its
// agent can cancel it explicitly) is cut when its requester leaves, as
// before: its backend sees the cancellation, nothing is orphaned, and the
// same call made again executes.
func TestUnmarkedCallCut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &counted{}
		eng := engine.New(&engine.Options{Backends: map[string]engine.Backend{"b": {Backend: b}}, Policy: orphanPolicy()})
		defer eng.Close()
		ctx, cancel := context.WithCancel(t.Context())
		errc := make(chan error, 1)
		go func() {
			_, err := eng.Call(ctx, "s1", "write", argsA)
			errc <- err
		}()
		time.Sleep(300 * time.Millisecond)
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
		b.mu.Lock()
		cut := b.cut
		b.mu.Unlock()
		if cut != 1 || eng.Stats().Orphaned != 0 {
			t.Errorf("%d runs cut, %d orphaned; want 1, 0", cut, eng.Stats().Orphaned)
		}
		res, err := eng.Call(t.Context(), "s1", "write", argsA)
		if err != nil {
			t.Fatal(err)
		}
		if res.Source != engine.Executed || b.ran("write") != 2 {
			t.Errorf("made again: %s after %d runs, want executed after 2", res.Source, b.ran("write"))
		}
	})
}

// TestOrphansBounded: at most 16 orphans run at once; a call whose
// requester leaves beyond is cut, as an unmarked one.
func TestOrphansBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &counted{}
		eng := engine.New(&engine.Options{Backends: map[string]engine.Backend{"b": {Backend: b}}, Policy: orphanPolicy()})
		defer eng.Close()
		ctx, cancel := context.WithCancel(engine.KeepRunning(t.Context()))
		var wg sync.WaitGroup
		for i := range 17 {
			wg.Go(func() {
				if _, err := eng.Call(ctx, fmt.Sprintf("s%d", i), "write", argsA); !errors.Is(err, context.Canceled) {
					t.Errorf("err = %v, want context.Canceled", err)
				}
			})
		}
		time.Sleep(300 * time.Millisecond)
		cancel()
		wg.Wait()
		b.mu.Lock()
		cut := b.cut
		b.mu.Unlock()
		if st := eng.Stats(); st.Orphaned != 16 || cut != 1 {
			t.Errorf("orphaned %d, cut %d; want 16, 1", st.Orphaned, cut)
		}
	})
}

// reader is a backend whose call counts its output in the budget its
// context carries as it reads it: 1 MiB, then, once more is closed,
// 2 MiB more, answering once finish is closed.
type reader struct {
	grew1, grew2 chan struct{}
	more, finish chan struct{}
}

func (r *reader) Call(ctx context.Context, req backend.Request) (backend.Response, error) {
	b := backend.BudgetOf(ctx)
	if b == nil {
		return backend.Response{}, errors.New("no budget in the call's context")
	}
	b.Grow(ctx, 1<<20)
	close(r.grew1)
	<-r.more
	b.Grow(ctx, 2<<20)
	close(r.grew2)
	<-r.finish
	return backend.Response{Output: string(make([]byte, 3<<20))}, nil
}

// budgetCount counts what is grown in it.
type budgetCount struct {
	mu sync.Mutex
	n  int64
}

func (c *budgetCount) Grow(_ context.Context, n int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n += n
	return nil
}

func (c *budgetCount) count() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// Issue 23: an orphan's output was counted in its requester's budget
// (ahead serve's answer budget), which ends with the request: what it read
// after its requester left was counted nowhere (16 orphans, each up to
// 16 MiB). It is counted in the engine's memory (MaxBytes, SessionBytes
// of /v1/stats), what it read before included, until it finishes; then its
// result is, as the session's, until it is joined or expires.
func TestOrphanOutputCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &reader{grew1: make(chan struct{}), grew2: make(chan struct{}), more: make(chan struct{}), finish: make(chan struct{})}
		eng := engine.New(&engine.Options{
			Backends: map[string]engine.Backend{"b": {Backend: r}},
			Policy:   orphanPolicy(),
		})
		defer eng.Close()
		var front budgetCount
		ctx, cancel := context.WithCancel(engine.KeepRunning(backend.WithBudget(t.Context(), &front)))
		errc := make(chan error, 1)
		go func() {
			_, err := eng.Call(ctx, "s1", "read", argsA)
			errc <- err
		}()
		<-r.grew1
		base := eng.Stats().SessionBytes
		if front.count() != 1<<20 || base >= 1<<20 {
			t.Fatalf("while its requester waits: %d bytes in the front's budget, %d in the engine's; want 1 MiB and less than 1 MiB", front.count(), base)
		}
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Fatalf("the requester left: %v, want context.Canceled", err)
		}
		if got := eng.Stats().SessionBytes - base; got != 1<<20 {
			t.Errorf("once orphaned: %d bytes more in the engine's memory, want what it read (1 MiB)", got)
		}
		close(r.more)
		<-r.grew2
		if got := eng.Stats().SessionBytes - base; got != 3<<20 || front.count() != 1<<20 {
			t.Errorf("read on as an orphan: %d bytes more in the engine's memory, %d in the front's budget; want 3 MiB and 1 MiB", got, front.count())
		}
		close(r.finish)
		synctest.Wait()
		if got := eng.Stats().SessionBytes - base; got < 3<<20 || got > 3<<20+4<<10 {
			t.Errorf("finished, kept to be joined: %d bytes more in the engine's memory, want its 3 MiB result", got)
		}
	})
}
