package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ahead-dev/ahead/backend"
	"github.com/ahead-dev/ahead/engine"
	"github.com/ahead-dev/ahead/mine"
	"github.com/ahead-dev/ahead/pattern"
	"github.com/ahead-dev/ahead/policy"
	"github.com/ahead-dev/ahead/predict"
	"github.com/ahead-dev/ahead/sched"
	"github.com/ahead-dev/ahead/trace"
)

// listPool mines the list_items → read_item pool of pattern's test data:
// after a list, the predictor reads the items it names, so it keeps the
// list's output in its window.
func listPool(t testing.TB) *pattern.Pool {
	t.Helper()
	ss, err := trace.Collect(trace.NewReader(nil).Events(filepath.Join("..", "mine", "testdata", "list.jsonl")))
	if err != nil {
		t.Fatal(err)
	}
	pool, err := mine.Mine(ss, &mine.Options{MinSupport: 2})
	if err != nil {
		t.Fatal(err)
	}
	return pool
}

// bigLists serves list_items with a fresh output of size bytes per call
// (naming three items) and read_item with a small one.
func bigLists(size int) backend.Funcs {
	return backend.Funcs{
		"list_items": func(_ context.Context, a json.RawMessage) (string, error) {
			head := `{"items": [{"name": "a"}, {"name": "b"}, {"name": "c"}], "pad": "`
			return head + strings.Repeat("x", max(size-len(head)-2, 0)) + `"}`, nil
		},
		"read_item": func(_ context.Context, a json.RawMessage) (string, error) { return "content of " + string(a), nil },
	}
}

var listPolicy = &policy.Policy{Tools: map[string]policy.Tool{
	"list_items": {Allow: true},
	"read_item":  {Allow: true},
}}

// liveHeap is the live heap after a collection.
func liveHeap() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// resident approximates the process's resident memory: what the runtime
// has mapped and not returned to the OS.
func resident() int64 {
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64() - s[1].Value.Uint64())
}

// loadSessions makes n sessions each call list_items once (outputs of size
// bytes) and read_item once, concurrently from workers goroutines.
func loadSessions(t testing.TB, eng *engine.Engine, n, workers int, sample func()) {
	ctx := context.Background()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				s := fmt.Sprintf("s%d", i)
				if _, err := eng.Call(ctx, s, "list_items", json.RawMessage(`{"folder":"f"}`)); err != nil {
					t.Error(err)
					return
				}
				if _, err := eng.Call(ctx, s, "read_item", json.RawMessage(`{"name":"a"}`)); err != nil {
					t.Error(err)
					return
				}
				if sample != nil && i%64 == 0 {
					sample()
				}
			}
		})
	}
	wg.Wait()
}

// Issue 13: with a pool loaded and many sessions, the predictor kept every
// session's outputs outside max_bytes (702 MiB against 1 MiB). Everything a
// session holds now counts against MaxBytes, so the live heap stays within
// twice the limit and a fixed base however many sessions come.
func TestHeapWithinBudget(t *testing.T) {
	const (
		sessions = 1500
		output   = 64 << 10
		limit    = 4 << 20
		base     = 8 << 20 // the pool, the engine's tables, the scheduler
	)
	synctest.Test(t, func(t *testing.T) {
		pred, err := pattern.NewOnline(listPool(t), nil)
		if err != nil {
			t.Fatal(err)
		}
		before := liveHeap()
		eng := engine.New(&engine.Options{
			Backends:  map[string]engine.Backend{"b": {Backend: bigLists(output)}},
			Policy:    listPolicy,
			Predictor: pred,
			MaxBytes:  limit,
		})
		defer eng.Close()
		for i := range sessions {
			s := fmt.Sprintf("s%d", i)
			if _, err := eng.Call(t.Context(), s, "list_items", json.RawMessage(`{"folder":"f"}`)); err != nil {
				t.Fatal(err)
			}
			synctest.Wait() // its speculative reads are filed
			if _, err := eng.Call(t.Context(), s, "read_item", json.RawMessage(`{"name":"a"}`)); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		grew := liveHeap() - before
		st := eng.Stats()
		t.Logf("live heap grew %.1f MiB; engine: %d sessions, %d entries, %d+%d bytes, %d sessions evicted",
			float64(grew)/(1<<20), st.Sessions, st.Entries, st.Bytes, st.SessionBytes, st.SessionsEvicted)
		if grew > 2*limit+base {
			t.Errorf("live heap grew %d MiB with %d sessions of %d KiB outputs under MaxBytes %d MiB; want at most %d MiB (2× the limit + %d MiB)",
				grew>>20, sessions, output>>10, limit>>20, (2*limit+base)>>20, base>>20)
		}
		if st.Bytes+st.SessionBytes > limit {
			t.Errorf("accounted %d bytes, over MaxBytes %d", st.Bytes+st.SessionBytes, limit)
		}
		if pb := pred.SessionBytes(fmt.Sprintf("s%d", sessions-1)); pb < output {
			t.Errorf("the latest session's predictor state is %d bytes, want its %d-byte output kept", pb, output)
		}
	})
}

func TestMaxSessions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var forgot []string
		pred := &forgetting{Func: predict.Nop, forgot: func(s string) {
			mu.Lock()
			forgot = append(forgot, s)
			mu.Unlock()
		}}
		store := newStore(time.Second)
		eng := engine.New(&engine.Options{
			Backends:    map[string]engine.Backend{"store": {Backend: store}},
			Policy:      storePolicy,
			Predictor:   pred,
			MaxSessions: 2,
		})
		defer eng.Close()
		call := func(s string) { eng.Call(t.Context(), s, "list", json.RawMessage(`{}`)) }
		// a is busy (its call takes a second) when c arrives: the least
		// recently active idle session, b, goes; a stays.
		call("b")
		time.Sleep(time.Second)
		done := make(chan struct{})
		go func() { call("a"); close(done) }()
		time.Sleep(100 * time.Millisecond)
		call("c")
		<-done
		synctest.Wait()
		if st := eng.Stats(); st.Sessions != 2 || st.SessionsEvicted != 1 {
			t.Errorf("%d sessions, %d evicted; want 2 and 1", st.Sessions, st.SessionsEvicted)
		}
		mu.Lock()
		if !slices.Equal(forgot, []string{"b"}) {
			t.Errorf("predictor forgot %v, want [b]", forgot)
		}
		mu.Unlock()
		// d: a is now the least recently active (its call ended first).
		call("d")
		mu.Lock()
		defer mu.Unlock()
		if !slices.Equal(forgot, []string{"b", "a"}) {
			t.Errorf("predictor forgot %v, want [b a]", forgot)
		}
	})
}

// BenchmarkSessionMemory loads sessions whose list calls return 64 KiB
// outputs into an engine with the online predictor, and reports the live
// heap growth and the peak resident memory against MaxBytes. Issue 13:
// 50,000 sessions under 64 MiB stay below 2× the limit plus a fixed base;
// 4,000 sessions under 8 MiB stay below 160 MiB resident.
func BenchmarkSessionMemory(b *testing.B) {
	for _, bc := range []struct {
		sessions int
		limit    int64
	}{{4000, 8 << 20}, {50000, 64 << 20}} {
		b.Run(fmt.Sprintf("sessions=%d/max_bytes=%dMiB", bc.sessions, bc.limit>>20), func(b *testing.B) {
			var grew, peak int64
			for b.Loop() {
				pred, err := pattern.NewOnline(listPool(b), &pattern.OnlineOptions{MaxSessions: 50000})
				if err != nil {
					b.Fatal(err)
				}
				before := liveHeap()
				eng := engine.New(&engine.Options{
					Backends:    map[string]engine.Backend{"b": {Backend: bigLists(64 << 10), Limits: sched.Limits{Slots: 8}}},
					Policy:      listPolicy,
					Predictor:   pred,
					MaxBytes:    bc.limit,
					MaxSessions: 50000,
				})
				var mu sync.Mutex
				sample := func() {
					r := resident()
					mu.Lock()
					peak = max(peak, r)
					mu.Unlock()
				}
				loadSessions(b, eng, bc.sessions, 4, sample)
				time.Sleep(10 * time.Millisecond) // the last speculative results are filed
				grew = max(grew, liveHeap()-before)
				sample()
				eng.Close()
			}
			b.ReportMetric(float64(grew)/(1<<20), "live-MiB")
			b.ReportMetric(float64(grew)/float64(bc.limit), "live/limit")
			b.ReportMetric(float64(peak)/(1<<20), "peak-resident-MiB")
		})
	}
}

// BenchmarkManySessions measures authoritative calls per second with 100
// live sessions and with 50,000, side by side: finding what to evict must
// not cost in proportion to the sessions (issue 13: above 10k sessions
// throughput halved). Every call speculates (MaxEntries is far below the
// sessions, so every new entry evicts one), on an instant backend.
func BenchmarkManySessions(b *testing.B) {
	const calls = 20000
	setup := func(sessions int) (*engine.Engine, []string) {
		pred, err := pattern.NewOnline(listPool(b), &pattern.OnlineOptions{MaxSessions: 50000})
		if err != nil {
			b.Fatal(err)
		}
		eng := engine.New(&engine.Options{
			Backends:    map[string]engine.Backend{"b": {Backend: bigLists(256), Limits: sched.Limits{Slots: 64}}},
			Policy:      listPolicy,
			Predictor:   pred,
			MaxSessions: 50000,
			MaxBytes:    4 << 30, // every session stays live
		})
		ids := make([]string, sessions)
		for i := range ids {
			ids[i] = fmt.Sprintf("s%d", i)
		}
		loadSessions(b, eng, sessions, 4, nil)
		if st := eng.Stats(); st.Sessions != sessions {
			b.Fatalf("%d live sessions after setup, want %d", st.Sessions, sessions)
		}
		return eng, ids
	}
	run := func(eng *engine.Engine, ids []string) time.Duration {
		ctx := context.Background()
		t0 := time.Now()
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Go(func() {
				// Each worker its own sessions, one call in flight in
				// each, visited round robin.
				for i := range calls / 4 {
					s := ids[(w+4*(i/2))%len(ids)]
					tool, args := "list_items", `{"folder":"f"}`
					if i%2 == 1 {
						tool, args = "read_item", `{"name":"b"}`
					}
					if _, err := eng.Call(ctx, s, tool, json.RawMessage(args)); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		return time.Since(t0)
	}
	few, fewIDs := setup(100)
	defer few.Close()
	many, manyIDs := setup(50000)
	defer many.Close()
	var tFew, tMany time.Duration
	for b.Loop() {
		// Alternate, so that machine noise hits both alike.
		tFew += run(few, fewIDs)
		tMany += run(many, manyIDs)
	}
	n := float64(b.N * calls)
	b.ReportMetric(n/tFew.Seconds(), "calls/s-100")
	b.ReportMetric(n/tMany.Seconds(), "calls/s-50k")
	b.ReportMetric(tFew.Seconds()/tMany.Seconds(), "ratio-50k/100")
	if st := many.Stats(); st.Sessions != 50000 {
		b.Errorf("%d live sessions at the end, want 50000", st.Sessions)
	}
}
