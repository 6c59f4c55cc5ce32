package learn

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/ahead-dev/ahead/trace"
)

// BenchmarkCheckpoint is the relearning a checkpoint runs (issue 24: 20,000
// calls with their messages in at most 10 s on 2 cores): a Learner that
// kept every call and message of both shared -conv files (17,181 calls,
// 20,418 messages) mines the patterns and the conversation model, merges
// them into the pool it serves, and saves it. The traces are AHEAD_TRACES,
// or the team's checkout; skipped when absent, except in CI.
//
//	AHEAD_TRACES=/work/shared/traces go test -run '^$' -bench Checkpoint -benchtime 3x ./learn/
func BenchmarkCheckpoint(b *testing.B) {
	dir := os.Getenv("AHEAD_TRACES")
	if dir == "" {
		dir = filepath.Join("..", "..", "shared", "traces")
	}
	var sessions []trace.Session
	for _, name := range []string{"tau2-airline-retail-train-conv.jsonl.gz", "minisweagent-train-conv.jsonl.gz"} {
		path := filepath.Join(dir, name)
		if _, err := os.Stat(path); err != nil {
			if os.Getenv("CI") == "true" {
				b.Fatalf("shared traces missing (set AHEAD_TRACES): %v", err)
			}
			b.Skipf("shared traces missing (set AHEAD_TRACES): %v", err)
		}
		ss, err := trace.Collect(trace.NewReader(nil).Events(path))
		if err != nil {
			b.Fatal(err)
		}
		sessions = append(sessions, ss...)
	}
	calls, msgs := 0, 0
	for _, s := range sessions {
		calls += len(s.Events)
		msgs += len(s.Messages)
	}
	// Bounds that keep all of it: what a checkpoint mines at most is the
	// point here, not which sessions the default bounds would drop.
	l, err := NewLearner(EmptyPool(), &LearnerOptions{MaxCalls: calls + msgs, MaxBytes: 1 << 40, MaxSessionBytes: 1 << 40, NoDefault: true})
	if err != nil {
		b.Fatal(err)
	}
	for _, s := range sessions {
		for ev := range trace.Known(s) {
			if ev.IsMessage() {
				l.Hear(ev)
			} else {
				l.Observe(ev)
			}
		}
		l.Forget(s.ID)
	}
	if l.calls != calls+msgs {
		b.Fatalf("kept %d calls and messages, want %d", l.calls, calls+msgs)
	}
	path := filepath.Join(b.TempDir(), "pool.json")
	cpu0 := cpuSeconds()
	for b.Loop() {
		l.mu.Lock()
		l.dirty = true // calls arrived since the last checkpoint
		l.mu.Unlock()
		if err := l.Checkpoint(path); err != nil {
			b.Fatal(err)
		}
	}
	cpu := (cpuSeconds() - cpu0) / float64(b.N)
	perCall := float64(b.Elapsed().Nanoseconds()) / float64(b.N*calls)
	b.ReportMetric(perCall, "ns/call")
	b.ReportMetric(1e9/perCall, "calls/s")
	b.ReportMetric(cpu, "cpu-s/op")
	b.ReportMetric(float64(l.KeptBytes())/(1<<20), "kept-MiB")
	b.ReportMetric(float64(l.Patterns()), "patterns")
}
