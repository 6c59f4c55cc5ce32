package fleet_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/ahead-dev/ahead/backend"
	"github.com/ahead-dev/ahead/engine"
	"github.com/ahead-dev/ahead/fleet"
	"github.com/ahead-dev/ahead/policy"
	"github.com/ahead-dev/ahead/predict"
	"github.com/ahead-dev/ahead/trace"
)

// slowTool is the 100 ms tool of the reuse target.
const slowTool = 100 * time.Millisecond

// nextSlow predicts, after a session's call of "a", its call of "slow"
// with the session's key.
type nextSlow struct{}

func (nextSlow) Observe(ev trace.Event) []predict.Prediction {
	if ev.Tool != "a" {
		return nil
	}
	return []predict.Prediction{{Tool: "slow", Args: args(ev.Session), P: 1}}
}

func (nextSlow) Forget(string) {}

// reuseReplica is a replica with a 100 ms read "slow" (shared: true when
// shared) and a fast "a"; ran receives a key each time slow has run.
func reuseReplica(b *testing.B, url string, dir string, predictor predict.Predictor, shared bool, ran chan<- string) (*fleet.Fleet, *engine.Engine) {
	b.Helper()
	o := &fleet.Options{Name: "bench", Backends: []string{"store"}, URL: url, FenceTimeout: time.Second, AnnounceTimeout: time.Second, ShareResults: shared,
		Logger: slog.New(slog.DiscardHandler)}
	if url == "" {
		o.Embedded = &fleet.Embedded{Listen: "127.0.0.1:0", Dir: dir}
	}
	f, err := fleet.Join(b.Context(), o)
	if err != nil {
		b.Fatal(err)
	}
	pol := &policy.Policy{Tools: map[string]policy.Tool{
		"a":    {Allow: true},
		"slow": {Allow: true, Reads: policy.Refs("key"), Shared: shared},
	}}
	eo := &engine.Options{
		Backends: map[string]engine.Backend{"store": {Backend: backend.Funcs{
			"a": func(context.Context, json.RawMessage) (string, error) { return "ok", nil },
			"slow": func(ctx context.Context, a json.RawMessage) (string, error) {
				select {
				case <-time.After(slowTool):
				case <-ctx.Done():
					return "", ctx.Err()
				}
				var k struct{ Key string }
				json.Unmarshal(a, &k)
				defer func() { ran <- k.Key }()
				return "value of " + k.Key, nil
			},
		}}},
		Policy: pol,
		Fleet:  f,
	}
	if predictor != nil {
		eo.Predictor = predictor
	}
	eng := engine.New(eo)
	f.Start(eng)
	b.Cleanup(func() { eng.Close(); f.Close() })
	if err := f.Ready(b.Context()); err != nil {
		b.Fatal(err)
	}
	return f, eng
}

// BenchmarkReuse: an agent's call of a 100 ms read whose speculative result
// is ready, with the fleet on: reused on its replica after a fence
// (fenced), or reused on another replica from the results bucket (shared:
// a fence and a lookup). The timer runs only for that call; it is checked
// to be reused, and the ratio to the tool's 100 ms is reported at p99.
func BenchmarkReuse(b *testing.B) {
	for _, shared := range []bool{false, true} {
		b.Run(map[bool]string{false: "fenced", true: "shared"}[shared], func(b *testing.B) {
			ctx := b.Context()
			ran := make(chan string, 1)
			f0, e0 := reuseReplica(b, "", b.TempDir(), nextSlow{}, shared, ran)
			reader, f1 := e0, f0
			if shared {
				f1, reader = reuseReplica(b, f0.URL(), "", nil, true, ran)
			}
			tl := newTail()
			i := 0
			for b.Loop() {
				b.StopTimer()
				i++
				s := fmt.Sprint("s", i)
				puts := f0.Stats().SharedPuts
				if _, err := e0.Call(ctx, s, "a", nil); err != nil {
					b.Fatal(err)
				}
				if got := <-ran; got != s {
					b.Fatalf("ran slow(%s), want slow(%s)", got, s)
				}
				for shared && f0.Stats().SharedPuts == puts {
					runtime.Gosched() // the put is sent in the background
				}
				if !shared {
					// The result is filed just after the tool returns.
					if err := e0.Predicted(ctx); err != nil {
						b.Fatal(err)
					}
				}
				rs := s
				if shared {
					rs = "r" + s // a session of the other replica
				}
				b.StartTimer()
				var res engine.Result
				tl.time(func() {
					var err error
					if res, err = reader.Call(ctx, rs, "slow", args(s)); err != nil {
						b.Fatal(err)
					}
				})
				if res.Source != engine.Reused && res.Source != engine.Promoted {
					b.Fatalf("call %d: %s, want reused", i, res.Source)
				}
			}
			tl.report(b)
			if len(tl.ds) > 0 {
				p99 := percentile(tl.ds, 99)
				b.ReportMetric(float64(slowTool)/float64(p99), "x-faster-p99")
			}
			_ = f1
		})
	}
}

func percentile(ds []time.Duration, p int) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)*p/100]
}

func startNATSB(b *testing.B) string { return startNATS(b, b.TempDir(), 0).url }

// BenchmarkReplicaCost: what one replica spends serving calls (3 reads
// and a write of one key per op, as agents of a shared store would), alone
// and in a fleet whose server runs in another process: CPU time per op
// (user + system, from getrusage) and the Go heap in use after.
func BenchmarkReplicaCost(b *testing.B) {
	for _, withFleet := range []bool{false, true} {
		b.Run(map[bool]string{false: "alone", true: "fleet"}[withFleet], func(b *testing.B) {
			st := &store{vers: map[string]int{}}
			eo := &engine.Options{
				Backends:  map[string]engine.Backend{"store": {Backend: st.backend()}},
				Policy:    testPolicy,
				Predictor: &repeatGets{},
			}
			if withFleet {
				nats := startNATSB(b)
				f, err := fleet.Join(b.Context(), &fleet.Options{Name: "cost", Backends: []string{"store"}, URL: nats,
					FenceTimeout: time.Second, AnnounceTimeout: time.Second, Logger: slog.New(slog.DiscardHandler)})
				if err != nil {
					b.Fatal(err)
				}
				eo.Fleet = f
				eng := engine.New(eo)
				f.Start(eng)
				b.Cleanup(func() { eng.Close(); f.Close() })
				if err := f.Ready(b.Context()); err != nil {
					b.Fatal(err)
				}
				benchCost(b, eng)
				return
			}
			eng := engine.New(eo)
			b.Cleanup(eng.Close)
			benchCost(b, eng)
		})
	}
}

func benchCost(b *testing.B, eng *engine.Engine) {
	ctx := b.Context()
	cpu0 := cpuTime()
	i := 0
	for b.Loop() {
		i++
		s := fmt.Sprint("s", i%64)
		k := fmt.Sprint("k", i%8)
		for range 3 {
			if _, err := eng.Call(ctx, s, "get", args(k)); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := eng.Call(ctx, s, "put", args(k)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "heap-MiB")
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// repeatGets predicts a session's next get of the key it just used.
type repeatGets struct{}

func (repeatGets) Observe(ev trace.Event) []predict.Prediction {
	return []predict.Prediction{{Tool: "get", Args: ev.Args, P: 1, Repeat: true}}
}

func (repeatGets) Forget(string) {}
