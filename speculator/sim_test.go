package speculator

import (
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ahead-dev/ahead/trace"
)

// truths is the harness's knowledge for a Sim: each session's next step,
// set by the test.
type truths struct {
	mu   sync.Mutex // protects next
	next map[string][]trace.Event
}

func (tr *truths) set(session string, evs ...trace.Event) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.next == nil {
		tr.next = make(map[string][]trace.Event)
	}
	tr.next[session] = evs
}

func (tr *truths) get(session string) []trace.Event {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.next[session]
}

func newSim(t *testing.T, acc float64, lat time.Duration, tr *truths) (*Sim, *offers) {
	t.Helper()
	o := &offers{}
	s, err := NewSim(&SimOptions{Accuracy: acc, Latency: lat, Seed: 7, Truth: tr.get, Offer: o.offer, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s, o
}

// history makes a session read items a0..a3 (one per step) so that there
// are plausible wrong calls, and returns the next seq.
func history(s *Sim, session string) int {
	for i := range 4 {
		s.Observe(result(session, i, i+1, "read_item", fmt.Sprintf(`{"name":"a%d"}`, i), "x", 0))
	}
	return 4
}

// TestSimAccuracyOneAndZero: with ACC 1 the true next call is always among
// the guesses, with ACC 0 never, and the other guesses are calls the
// session made before; the guesses arrive LAT after the window opens.
func TestSimAccuracyOneAndZero(t *testing.T) {
	for _, acc := range []float64{1, 0} {
		t.Run(fmt.Sprint(acc), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tr := &truths{}
				s, o := newSim(t, acc, 300*time.Millisecond, tr)
				next := history(s, "s")
				truth := result("s", next+1, next+1, "read_item", `{"name":"new"}`, "", 0)
				tr.set("s", truth)
				s.Observe(result("s", next, next, "list_items", `{}`, "[]", 0))
				time.Sleep(299 * time.Millisecond)
				synctest.Wait()
				if len(o.all()) != 0 {
					t.Fatal("guesses arrived before LAT")
				}
				time.Sleep(time.Millisecond)
				synctest.Wait()
				got := o.all()
				if len(got) != 1 || len(got[0].preds) != DefaultMaxBreadth {
					t.Fatalf("offers %+v, want one of %d guesses", got, DefaultMaxBreadth)
				}
				found := false
				for _, p := range got[0].preds {
					switch string(p.Args) {
					case `{"name":"new"}`:
						found = true
					case `{"name":"a0"}`, `{"name":"a1"}`, `{"name":"a2"}`, `{"name":"a3"}`, `{}`:
					default:
						t.Errorf("guess %s %s is neither true nor seen in the session", p.Tool, p.Args)
					}
				}
				if found != (acc == 1) {
					t.Errorf("true call among the guesses: %v, want %v", found, acc == 1)
				}
				// The next call settles the window's guesses.
				s.Observe(truth)
				if got, want := s.Stats().Hits, int64(acc); got != want {
					t.Errorf("hits = %d, want %d", got, want)
				}
			})
		})
	}
}

// TestSimAccuracyRate: over many windows, the share holding the true call
// is ACC (within sampling noise), and the draws repeat with the seed.
func TestSimAccuracyRate(t *testing.T) {
	run := func() (hits int, guesses [][]string) {
		var found int
		synctest.Test(t, func(t *testing.T) {
			tr := &truths{}
			s, o := newSim(t, 0.55, 10*time.Millisecond, tr)
			for i := range 400 {
				id := fmt.Sprint("s", i)
				next := history(s, id)
				tr.set(id, result(id, next, next+1, "read_item", `{"name":"new"}`, "", 0))
				s.Observe(result(id, next, next, "list_items", `{}`, "[]", 0))
			}
			time.Sleep(10 * time.Millisecond)
			synctest.Wait()
			for _, of := range o.all() {
				var g []string
				for _, p := range of.preds {
					g = append(g, string(p.Args))
					if string(p.Args) == `{"name":"new"}` {
						found++
					}
				}
				guesses = append(guesses, g)
			}
		})
		return found, guesses
	}
	hits, first := run()
	if hits < 180 || hits > 260 { // 400 × 0.55 = 220, σ ≈ 10
		t.Errorf("%d of 400 windows held the true call, want about 220", hits)
	}
	_, second := run()
	if d := cmp.Diff(sorted(first), sorted(second)); d != "" {
		t.Errorf("draws differ with the same seed (-first +second):\n%s", d)
	}
}

func sorted(gs [][]string) map[string]int {
	m := make(map[string]int)
	for _, g := range gs {
		m[fmt.Sprint(g)]++
	}
	return m
}

// TestSimLateAndThinking: the simulation waits until the harness says the
// agent is thinking (the step's last result), and an answer that arrives
// after the next call is dropped as late.
func TestSimLateAndThinking(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := &truths{}
		s, o := newSim(t, 1, time.Second, tr)
		next := history(s, "s")
		// Two calls in one step: after the first result the agent still
		// waits for the second.
		s.Observe(result("s", next, next+1, "list_items", `{"folder":"a"}`, "[]", 0))
		if n := s.Stats().Requests; n != 0 {
			t.Errorf("%d answers scheduled before the agent thinks, want 0", n)
		}
		tr.set("s", result("s", next+2, next+2, "read_item", `{"name":"new"}`, "", 0))
		s.Observe(result("s", next+1, next+1, "list_items", `{"folder":"b"}`, "[]", 0))
		if n := s.Stats().Requests; n != 1 {
			t.Errorf("%d answers scheduled once the agent thinks, want 1", n)
		}
		time.Sleep(500 * time.Millisecond)
		tr.set("s")
		s.Observe(result("s", next+2, next+2, "read_item", `{"name":"new"}`, "", 0)) // before LAT
		time.Sleep(time.Second)
		synctest.Wait()
		if len(o.all()) != 0 {
			t.Errorf("late guesses offered: %+v", o.all())
		}
		if got := testutil.ToFloat64(s.m.late); got != 1 {
			t.Errorf("late = %v, want 1", got)
		}
	})
}

// TestSimLateOnceCallBegun: an answer that arrives after the agent began
// the call it was meant for (the engine refuses it) counts late, not as
// guesses.
func TestSimLateOnceCallBegun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := &truths{}
		s, o := newSim(t, 1, time.Second, tr)
		next := history(s, "s")
		tr.set("s", result("s", next+1, next+2, "read_item", `{"name":"new"}`, "", 0))
		s.Observe(result("s", next, next+1, "list_items", `{"folder":"a"}`, "[]", 0))
		time.Sleep(500 * time.Millisecond)
		o.begin("s", next+1)
		time.Sleep(time.Second)
		synctest.Wait()
		if got := o.all(); len(got) != 0 {
			t.Errorf("late guesses offered: %+v", got)
		}
		if st := s.Stats(); st.Late != 1 || st.Guesses != 0 || st.Requests != 1 || st.Answers != 1 {
			t.Errorf("late %d, guesses %d, requests %d, answers %d; want 1, 0, 1, 1", st.Late, st.Guesses, st.Requests, st.Answers)
		}
	})
}

func TestParseSim(t *testing.T) {
	for _, tt := range []struct {
		spec string
		acc  float64
		lat  time.Duration
		ok   bool
	}{
		{"sim:0.55:300ms", 0.55, 300 * time.Millisecond, true},
		{"sim:1:0s", 1, 0, true},
		{"sim:1.5:300ms", 0, 0, false},
		{"sim:0.5", 0, 0, false},
		{"sim:x:300ms", 0, 0, false},
		{"sim:0.5:-1s", 0, 0, false},
		{"http://localhost:11434/v1", 0, 0, false},
	} {
		acc, lat, err := ParseSim(tt.spec)
		if (err == nil) != tt.ok || acc != tt.acc || lat != tt.lat {
			t.Errorf("ParseSim(%q) = %v, %v, %v; want %v, %v, ok %v", tt.spec, acc, lat, err, tt.acc, tt.lat, tt.ok)
		}
	}
}
