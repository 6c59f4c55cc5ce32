package sched

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// Issue 23: ten concurrent 2 s calls took 2, 4 and 6 s through ahead,
// because a backend without slots configured had 4.
func TestUnsetSlotsDoNotLimitAuthoritative(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSched(Limits{}, 0)
		defer s.Close()
		start := time.Now()
		var wg sync.WaitGroup
		took := make([]time.Duration, 10)
		for i := range took {
			wg.Go(func() {
				if err := s.Do(t.Context(), "b", "s", func(context.Context) { time.Sleep(2 * time.Second) }); err != nil {
					t.Error(err)
				}
				took[i] = time.Since(start)
			})
		}
		wg.Wait()
		for i, d := range took {
			if d != 2*time.Second {
				t.Errorf("call %d took %v, want 2s (as without ahead)", i, d)
			}
		}
	})
}

// Without slots, speculation runs inside its own budget, and real calls
// neither wait for it nor preempt it.
func TestUnsetSlotsSpeculationBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(&Options{Backends: map[string]Limits{"b": {}, "c": {SpecBudget: 6}}, SpecBudget: 32})
		defer s.Close()
		var r recorder
		for range DefaultSpecBudget + 2 {
			s.Submit(Spec{Backend: "b", Utility: 1, NotCancellable: true, Run: r.work("spec", time.Hour)})
		}
		synctest.Wait()
		if l := s.Load()["b"]; l.SpecRunning != DefaultSpecBudget || l.SpecQueued != 2 {
			t.Errorf("load = %+v, want %d speculative running and 2 queued", l, DefaultSpecBudget)
		}
		for range 8 {
			start := time.Now()
			if err := s.Do(t.Context(), "b", "s", func(context.Context) {}); err != nil || time.Since(start) != 0 {
				t.Fatalf("Do = %v after %v, want at once", err, time.Since(start))
			}
		}
		if n := s.Stats().Preempted; n != 0 {
			t.Errorf("%d jobs preempted; with no slots to free, none should be", n)
		}
		// A per-backend budget can be set without slots.
		for range 7 {
			s.Submit(Spec{Backend: "c", Utility: 1, Run: r.work("c", time.Hour)})
		}
		synctest.Wait()
		if l := s.Load()["c"]; l.SpecRunning != 6 {
			t.Errorf("backend c runs %d speculative jobs, want its spec_budget 6", l.SpecRunning)
		}
	})
}

// Issue 23: one session with 100 calls in flight made another session's
// 1 ms call wait 49.6 s behind a FIFO. With slots, the other session's
// call now waits for the next free slot at most: one tool execution.
func TestFairBetweenSessions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const exec = 2 * time.Second
		s := newSched(Limits{Slots: 4}, 0)
		defer s.Close()
		var greedy sync.WaitGroup
		defer greedy.Wait()
		for range 100 {
			greedy.Go(func() { s.Do(t.Context(), "b", "greedy", func(context.Context) { time.Sleep(exec) }) })
		}
		time.Sleep(500 * time.Millisecond)
		synctest.Wait()
		if l := s.Load()["b"]; l.AuthRunning != 4 || l.AuthQueued != 96 {
			t.Fatalf("load = %+v, want 4 running and 96 queued", l)
		}
		var waits []time.Duration
		for range 5 {
			start := time.Now()
			if err := s.Do(t.Context(), "b", "light", func(context.Context) {
				waits = append(waits, time.Since(start))
				time.Sleep(time.Millisecond)
			}); err != nil {
				t.Fatal(err)
			}
		}
		for i, w := range waits {
			if w > exec {
				t.Errorf("light call %d waited %v, want at most one execution (%v)", i, w, exec)
			}
		}
	})
}

// With several sessions waiting, each gets its turn: round robin.
func TestFairOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSched(Limits{Slots: 1}, 0)
		defer s.Close()
		release := make(chan struct{})
		go s.Do(t.Context(), "b", "x", func(context.Context) { <-release })
		synctest.Wait()
		var mu sync.Mutex
		var order []string
		for _, sess := range []string{"a", "a", "a", "b", "b", "c"} {
			go s.Do(t.Context(), "b", sess, func(context.Context) {
				mu.Lock()
				order = append(order, sess)
				mu.Unlock()
			})
			synctest.Wait() // arrivals in this order
		}
		close(release)
		synctest.Wait()
		if want := []string{"a", "b", "c", "a", "b", "a"}; !slices.Equal(order, want) {
			t.Errorf("served %v, want %v", order, want)
		}
	})
}

// A full queue refuses the session holding most of it, even when another
// session's call arrives last.
func TestQueueBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSched(Limits{Slots: 1, Queue: 3}, 0)
		defer s.Close()
		release := make(chan struct{})
		go s.Do(t.Context(), "b", "a", func(context.Context) { <-release })
		synctest.Wait()
		errs := make([]error, 3)
		for i := range errs {
			go func() { errs[i] = s.Do(t.Context(), "b", "a", func(context.Context) {}) }()
			synctest.Wait()
		}
		err := s.Do(t.Context(), "b", "a", func(context.Context) { t.Error("ran beyond the queue bound") })
		qf, ok := errors.AsType[*QueueFullError](err)
		if !ok || !errors.Is(err, ErrQueueFull) || qf.Queue != 3 || qf.RetryAfter < time.Second {
			t.Fatalf("Do on a full queue = %v, want a QueueFullError of bound 3, retry after at least 1s", err)
		}
		var other error
		go func() { other = s.Do(t.Context(), "b", "b", func(context.Context) {}) }()
		synctest.Wait()
		// b's call took the place of a's newest.
		if !errors.Is(errs[2], ErrQueueFull) || errs[0] != nil || errs[1] != nil {
			t.Errorf("a's waiting calls: %v; want the newest pushed out with ErrQueueFull", errs)
		}
		close(release)
		synctest.Wait()
		if other != nil || errs[0] != nil || errs[1] != nil {
			t.Errorf("after the slot freed: b %v, a %v", other, errs[:2])
		}
		if n, l := s.Stats().Refused, s.Load()["b"].Refused; n != 2 || l != 2 {
			t.Errorf("Refused = %d, Load's %d; want 2", n, l)
		}
	})
}

// Rate tokens go to sessions fairly too: a session's backlog does not
// reserve the bucket's future.
func TestRateFairBetweenSessions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSched(Limits{Rate: 1, Burst: 1}, 0)
		defer s.Close()
		var greedy sync.WaitGroup
		defer greedy.Wait()
		for range 20 {
			greedy.Go(func() { s.Do(t.Context(), "b", "greedy", func(context.Context) {}) })
		}
		time.Sleep(2500 * time.Millisecond)
		start := time.Now()
		if err := s.Do(t.Context(), "b", "light", func(context.Context) {}); err != nil {
			t.Fatal(err)
		}
		if w := time.Since(start); w > time.Second {
			t.Errorf("light call waited %v for a token, want at most one token's time (1s)", w)
		}
		if l := s.Load()["b"]; l.AuthQueued == 0 {
			t.Errorf("greedy's backlog drained already (%+v); the test no longer shows fairness", l)
		}
	})
}

func TestCloseRefusesQueuedCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSched(Limits{Slots: 1}, 0)
		release := make(chan struct{})
		go s.Do(t.Context(), "b", "s", func(context.Context) { <-release })
		synctest.Wait()
		var err error
		done := make(chan struct{})
		go func() {
			defer close(done)
			err = s.Do(t.Context(), "b", "s", func(context.Context) { t.Error("ran after Close") })
		}()
		synctest.Wait()
		s.Close()
		<-done
		if err != ErrClosed {
			t.Errorf("queued call after Close = %v, want ErrClosed", err)
		}
		close(release)
	})
}

func TestNewNilOptions(t *testing.T) {
	s := New(nil)
	defer s.Close()
	s.AddBackend("b", Limits{})
	if err := s.Do(t.Context(), "b", "s", func(context.Context) {}); err != nil {
		t.Fatal(err)
	}
}

// A promoted job waits as a call of the session that claimed it: another
// session's backlog does not hold it back.
func TestPromotedJoinsItsSessionsTurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSched(Limits{Slots: 1}, 0)
		defer s.Close()
		var r recorder
		release := make(chan struct{})
		go s.Do(t.Context(), "b", "greedy", func(context.Context) { <-release })
		synctest.Wait()
		j := s.Submit(Spec{Backend: "b", Utility: 1, Run: r.work("promoted", time.Second)})
		var greedy sync.WaitGroup
		defer greedy.Wait()
		for range 3 {
			greedy.Go(func() { s.Do(t.Context(), "b", "greedy", func(context.Context) { r.add("greedy") }) })
			synctest.Wait()
		}
		if !j.Promote("light") {
			t.Fatal("Promote of a queued job = false")
		}
		close(release)
		synctest.Wait()
		if got := r.get(); len(got) == 0 || got[0] != "start promoted" {
			t.Errorf("log = %v, want the promoted job first, before greedy's backlog", got)
		}
	})
}
