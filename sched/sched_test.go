package sched

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// work returns a Run function that takes d unless cancelled, and logs its
// name when it starts and how it ended.
type recorder struct {
	mu  sync.Mutex
	log []string
}

func (r *recorder) add(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.log = append(r.log, s)
}

func (r *recorder) get() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.log)
}

func (r *recorder) work(name string, d time.Duration) func(ctx context.Context) {
	return func(ctx context.Context) {
		r.add("start " + name)
		select {
		case <-time.After(d):
			r.add("done " + name)
		case <-ctx.Done():
			r.add("cancelled " + name)
		}
	}
}

func sorted(s []string) []string {
	slices.Sort(s)
	return s
}

func newSched(lim Limits, budget int) *Scheduler {
	return New(&Options{Backends: map[string]Limits{"b": lim}, SpecBudget: budget})
}

func TestAuthoritativePreemptsSpeculative(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSched(Limits{Slots: 1}, 0)
		defer s.Close()
		var r recorder
		j := s.Submit(Spec{Backend: "b", Utility: 1, Run: r.work("spec", time.Hour)})
		synctest.Wait()
		if j.State() != Running {
			t.Fatalf("spec state = %v, want running", j.State())
		}
		start := time.Now()
		if err := s.Do(t.Context(), "b", "s", func(ctx context.Context) { r.work("auth", time.Second)(ctx) }); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took != time.Second {
			t.Errorf("authoritative call took %v, want 1s (no wait for speculation)", took)
		}
		<-j.Done()
		if j.State() != Preempted {
			t.Errorf("spec state = %v, want preempted", j.State())
		}
		if got := s.Stats().Preempted; got != 1 {
			t.Errorf("Preempted = %d, want 1", got)
		}
	})
}

func TestPreemptsLowestUtility(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSched(Limits{Slots: 3}, 0)
		defer s.Close()
		var r recorder
		jobs := map[string]*Job{}
		for name, u := range map[string]float64{"hi": 0.9, "lo": 0.1, "mid": 0.5} {
			jobs[name] = s.Submit(Spec{Backend: "b", Utility: u, Run: r.work(name, time.Hour)})
		}
		synctest.Wait()
		done := make(chan struct{})
		go func() {
			defer close(done)
			s.Do(t.Context(), "b", "s", func(context.Context) {})
		}()
		<-done
		synctest.Wait()
		for name, want := range map[string]State{"hi": Running, "mid": Running, "lo": Preempted} {
			if got := jobs[name].State(); got != want {
				t.Errorf("%s: state %v, want %v", name, got, want)
			}
		}
	})
}

func TestSpeculativeOrderAndBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSched(Limits{Slots: 4, SpecBudget: 2}, 0)
		defer s.Close()
		var r recorder
		// Fill the backend with authoritative work so the jobs queue.
		release := make(chan struct{})
		for range 4 {
			go s.Do(t.Context(), "b", "s", func(context.Context) { <-release })
		}
		synctest.Wait()
		for _, x := range []struct {
			name string
			u    float64
		}{{"a", 0.2}, {"b", 0.8}, {"c", 0.5}, {"d", 0.9}} {
			s.Submit(Spec{Backend: "b", Utility: x.u, Run: r.work(x.name, time.Second)})
		}
		synctest.Wait()
		if got := r.get(); len(got) != 0 {
			t.Fatalf("speculation ran with no free slot: %v", got)
		}
		close(release)
		synctest.Wait()
		// Both start in one dispatch; their goroutines log in any order.
		if got, want := sorted(r.get()), []string{"start b", "start d"}; !slices.Equal(got, want) {
			t.Errorf("started %v, want %v (highest utility first, budget 2)", got, want)
		}
		if l := s.Load()["b"]; l.SpecRunning != 2 || l.SpecQueued != 2 {
			t.Errorf("load = %+v, want 2 running 2 queued", l)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		var starts []string
		for _, l := range r.get() {
			if strings.HasPrefix(l, "start") {
				starts = append(starts, l)
			}
		}
		if got, want := sorted(starts[2:]), []string{"start a", "start c"}; len(starts) != 4 || !slices.Equal(got, want) {
			t.Errorf("after d and b finished, started %v, want %v", got, want)
		}
	})
}

func TestGlobalBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(&Options{Backends: map[string]Limits{"x": {Slots: 4}, "y": {Slots: 4}}, SpecBudget: 3})
		defer s.Close()
		var r recorder
		for _, b := range []string{"x", "y", "x", "y", "x", "y"} {
			s.Submit(Spec{Backend: b, Utility: 1, Run: r.work(b, time.Hour)})
		}
		synctest.Wait()
		load := s.Load()
		if n := load["x"].SpecRunning + load["y"].SpecRunning; n != 3 {
			t.Errorf("running %d speculative jobs, want the global budget 3", n)
		}
	})
}

func TestStartDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSched(Limits{Slots: 1}, 0)
		defer s.Close()
		var r recorder
		release := make(chan struct{})
		go s.Do(t.Context(), "b", "s", func(context.Context) { <-release })
		synctest.Wait()
		j := s.Submit(Spec{Backend: "b", Utility: 1, Deadline: time.Now().Add(time.Second), Run: r.work("late", time.Second)})
		time.Sleep(time.Second)
		synctest.Wait()
		if j.State() != Dropped {
			t.Errorf("state = %v, want dropped at its deadline", j.State())
		}
		select {
		case <-j.Done():
		default:
			t.Error("Done not closed for a dropped job")
		}
		close(release)
		synctest.Wait()
		if got := r.get(); len(got) != 0 {
			t.Errorf("dropped job ran: %v", got)
		}
	})
}

func TestPromoteQueued(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSched(Limits{Slots: 1}, 0)
		defer s.Close()
		var r recorder
		release := make(chan struct{})
		go s.Do(t.Context(), "b", "s", func(context.Context) { <-release; r.add("auth1 done") })
		synctest.Wait()
		j := s.Submit(Spec{Backend: "b", Utility: 0.1, Run: r.work("spec", time.Second)})
		other := s.Submit(Spec{Backend: "b", Utility: 0.9, Run: r.work("other spec", time.Second)})
		// auth2 waits from before the promotion, auth3 from after: the
		// promoted job is authoritative from its promotion on, served
		// FIFO among them and before any speculative work (even of
		// higher utility), regardless of the budget.
		go s.Do(t.Context(), "b", "s", func(context.Context) { r.add("auth2") })
		synctest.Wait()
		if !j.Promote("s") {
			t.Fatal("Promote of a queued job = false")
		}
		go s.Do(t.Context(), "b", "s", func(context.Context) { r.add("auth3") })
		synctest.Wait()
		close(release)
		<-j.Done()
		synctest.Wait()
		want := []string{"auth1 done", "auth2", "start spec", "done spec", "auth3", "start other spec"}
		if got := r.get(); !slices.Equal(got, want) {
			t.Errorf("log = %v, want %v", got, want)
		}
		if j.State() != Finished || other.State() != Running {
			t.Errorf("states = %v, %v; want finished, running", j.State(), other.State())
		}
	})
}

func TestPromotedRunningIsNotPreempted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSched(Limits{Slots: 1}, 0)
		defer s.Close()
		var r recorder
		j := s.Submit(Spec{Backend: "b", Utility: 1, Run: r.work("spec", time.Second)})
		synctest.Wait()
		if !j.Promote("s") {
			t.Fatal("Promote of a running job = false")
		}
		start := time.Now()
		s.Do(t.Context(), "b", "s", func(context.Context) {})
		if waited := time.Since(start); waited != time.Second {
			t.Errorf("authoritative call waited %v, want 1s behind the promoted job", waited)
		}
		if j.State() != Finished {
			t.Errorf("promoted job state = %v, want finished", j.State())
		}
	})
}

func TestNotCancellableKeepsReserve(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSched(Limits{Slots: 2}, 0)
		defer s.Close()
		var r recorder
		a := s.Submit(Spec{Backend: "b", Utility: 1, NotCancellable: true, Run: r.work("a", time.Hour)})
		b := s.Submit(Spec{Backend: "b", Utility: 1, NotCancellable: true, Run: r.work("b", time.Hour)})
		synctest.Wait()
		if a.State() != Running || b.State() != Queued {
			t.Fatalf("states = %v, %v; want one running and one kept out of the last slot", a.State(), b.State())
		}
		start := time.Now()
		s.Do(t.Context(), "b", "s", func(context.Context) {})
		if waited := time.Since(start); waited != 0 {
			t.Errorf("authoritative call waited %v behind non-cancellable speculation", waited)
		}
	})
}

func TestBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSched(Limits{Slots: 2}, 0)
		defer s.Close()
		var r recorder
		s.Backoff("b", 5*time.Second)
		j := s.Submit(Spec{Backend: "b", Utility: 1, Run: r.work("spec", time.Second)})
		time.Sleep(4 * time.Second)
		synctest.Wait()
		if j.State() != Queued {
			t.Errorf("state during backoff = %v, want queued", j.State())
		}
		if err := s.Do(t.Context(), "b", "s", func(context.Context) {}); err != nil {
			t.Errorf("authoritative call during backoff: %v", err)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if j.State() != Running {
			t.Errorf("state after backoff = %v, want running", j.State())
		}
	})
}

func TestRateReserve(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// 1 token per second, bucket of 2, 1 token reserved: speculation
		// may take only tokens above the reserve.
		s := newSched(Limits{Slots: 4, Rate: 1, Burst: 2}, 0)
		defer s.Close()
		var r recorder
		j1 := s.Submit(Spec{Backend: "b", Utility: 1, Run: r.work("1", time.Millisecond)})
		j2 := s.Submit(Spec{Backend: "b", Utility: 1, Run: r.work("2", time.Millisecond)})
		synctest.Wait()
		if j1.State() == Queued || j2.State() != Queued {
			t.Fatalf("states = %v, %v; want the first to take the surplus token and the second to wait", j1.State(), j2.State())
		}
		start := time.Now()
		if err := s.Do(t.Context(), "b", "s", func(context.Context) {}); err != nil {
			t.Fatal(err)
		}
		if waited := time.Since(start); waited != 0 {
			t.Errorf("authoritative call waited %v for a token; the reserve should have kept one", waited)
		}
		// The bucket holds 2 tokens again at t=2s; j2 then runs for 1ms.
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if j2.State() != Finished {
			t.Errorf("second job = %v after the bucket refilled, want finished", j2.State())
		}
	})
}

func TestDoContextCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSched(Limits{Slots: 1}, 0)
		defer s.Close()
		release := make(chan struct{})
		go s.Do(t.Context(), "b", "s", func(context.Context) { <-release })
		synctest.Wait()
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		ran := false
		err := s.Do(ctx, "b", "s", func(context.Context) { ran = true })
		if err != context.DeadlineExceeded || ran {
			t.Errorf("Do = %v, ran %v; want deadline exceeded without running", err, ran)
		}
		close(release)
		synctest.Wait()
		if l := s.Load()["b"]; l.AuthRunning != 0 || l.AuthQueued != 0 {
			t.Errorf("load after cancel = %+v, want empty", l)
		}
	})
}

func TestCloseCancelsAndWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSched(Limits{Slots: 1}, 0)
		var r recorder
		running := s.Submit(Spec{Backend: "b", Utility: 1, Run: r.work("a", time.Hour)})
		queued := s.Submit(Spec{Backend: "b", Utility: 1, Run: r.work("b", time.Hour)})
		synctest.Wait()
		s.Close()
		if running.State() != Cancelled || queued.State() != Cancelled {
			t.Errorf("states after Close = %v, %v; want cancelled", running.State(), queued.State())
		}
		if got, want := r.get(), []string{"start a", "cancelled a"}; !slices.Equal(got, want) {
			t.Errorf("log = %v, want %v", got, want)
		}
		if err := s.Do(t.Context(), "b", "s", func(context.Context) {}); err != ErrClosed {
			t.Errorf("Do after Close = %v, want ErrClosed", err)
		}
		if j := s.Submit(Spec{Backend: "b", Run: r.work("c", 0)}); j.State() != Dropped {
			t.Errorf("Submit after Close: state %v, want dropped", j.State())
		}
	})
}

func TestUnknownBackend(t *testing.T) {
	s := newSched(Limits{}, 0)
	defer s.Close()
	if err := s.Do(t.Context(), "nope", "s", func(context.Context) {}); err == nil {
		t.Error("Do on an unknown backend succeeded")
	}
}
