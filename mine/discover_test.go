package mine

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/ahead-dev/ahead/trace"
)

// sharedTraces returns the shared trace files (AHEAD_TRACES, or where the
// team's machines and CI keep them, as convo's and cmd/ahead's tests read
// them), or nil when they are absent (outside CI).
func sharedTraces(t testing.TB) []string {
	dir := os.Getenv("AHEAD_TRACES")
	if dir == "" {
		dir = "/work/shared/traces"
	}
	files := []string{filepath.Join(dir, "tau2-airline-retail-train.jsonl.gz"), filepath.Join(dir, "minisweagent-train.jsonl.gz")}
	for _, f := range files {
		if _, err := os.Stat(f); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("shared traces missing (set AHEAD_TRACES): %v", err)
			}
			return nil
		}
	}
	return files
}

// TestDiscoverWantedKeys checks that indexing only the keys a session's
// calls can look up (keys.go) finds the same raw candidates, in the same
// order, as indexing every key: on the hand-made traces and on the first
// sessions of each shared file. The reference also numbers bodies with
// every hash clashing (miner.body), which must number them alike.
func TestDiscoverWantedKeys(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.jsonl")
	var ss []trace.Session
	for _, f := range files {
		ss = append(ss, readSessions(t, f)...)
	}
	for _, f := range sharedTraces(t) {
		// The first events of each file: reading all of them takes
		// seconds under the race detector.
		s, err := trace.Collect(func(yield func(trace.Event, error) bool) {
			n := 0
			for ev, err := range trace.NewReader(nil).Events(f) {
				if n++; n > 500 || !yield(ev, err) {
					return
				}
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		ss = append(ss, s...)
	}
	o, err := Options{Workers: 1}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	discover := func(all bool) *miner {
		m := newMiner(ss, o)
		m.indexAll = all
		if all {
			m.bodyHash = func(bodyKey) uint64 { return 0 }
		}
		m.discover()
		return m
	}
	got, want := discover(false), discover(true)
	cands := 0
	for e := range want.cands {
		cands += len(want.cands[e])
		if !reflect.DeepEqual(got.cands[e], want.cands[e]) || !reflect.DeepEqual(got.candEnds[e], want.candEnds[e]) {
			t.Fatalf("event %d (session %d, call %d): candidates\n%v %v\nwant (every key indexed)\n%v %v",
				e, want.events[e].sess, want.events[e].pos, got.cands[e], got.candEnds[e], want.cands[e], want.candEnds[e])
		}
	}
	if !reflect.DeepEqual(got.shapes, want.shapes) {
		t.Fatalf("bodies differ: %d chunks, want %d", len(got.shapes), len(want.shapes))
	}
	if cands < 1000 {
		t.Errorf("%d candidates in all: too few to show anything", cands)
	}
}

// BenchmarkDiscoverShared finds the raw candidates of both shared trace
// files (Phase II's first half: discover), as Mine does.
func BenchmarkDiscoverShared(b *testing.B) {
	files := sharedTraces(b)
	if files == nil {
		b.Skip("shared traces missing (set AHEAD_TRACES)")
	}
	o, err := Options{}.withDefaults()
	if err != nil {
		b.Fatal(err)
	}
	m := newMiner(readSessions(b, files...), o)
	cpu0 := cpuSeconds()
	for b.Loop() {
		m.shapes = nil
		m.discover()
	}
	b.ReportMetric((cpuSeconds()-cpu0)/float64(b.N), "cpu-s/op")
	b.ReportMetric(float64(len(m.shapes)-1)*shapeChunk+float64(len(m.shapes[len(m.shapes)-1])), "bodies")
}
