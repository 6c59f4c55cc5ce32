package learn

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ahead-dev/ahead/pattern"
	"github.com/ahead-dev/ahead/predict"
	"github.com/ahead-dev/ahead/trace"
)

// listThenRead plays one session in which list_directory is followed by
// read_text_file of the file it listed, and returns what was predicted
// after list_directory.
func listThenRead(p interface {
	Observe(ev trace.Event) []predict.Prediction
	Forget(string)
}, session string, i int) []predict.Prediction {
	dir := fmt.Sprintf("/home/me/project%d", i)
	file := "README.md"
	preds := p.Observe(ev(session, 0, "list_directory", fmt.Sprintf(`{"path":%q}`, dir), "[FILE] "+file+"\n[DIR] src"))
	p.Observe(ev(session, 1, "read_text_file", fmt.Sprintf(`{"path":%q}`, dir+"/"+file), "# notes"))
	p.Forget(session)
	return preds
}

// TestLearnerNewPool is issue 14's first use: a learner starting from no
// patterns predicts nothing, and after a few sessions where list_directory
// is followed by read_text_file, the pool it checkpoints predicts the
// second call exactly.
func TestLearnerNewPool(t *testing.T) {
	l, err := NewLearner(EmptyPool(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		if preds := listThenRead(l, fmt.Sprint("s", i), i); len(preds) != 0 {
			t.Fatalf("session %d: an empty pool predicted %v", i, briefs(preds))
		}
	}
	path := filepath.Join(t.TempDir(), "pool.json")
	if err := l.Checkpoint(path); err != nil {
		t.Fatal(err)
	}
	if l.Patterns() == 0 {
		t.Fatal("no patterns learnt")
	}
	// The running learner predicts now, and so does the written pool.
	want := brief{"read_text_file", `{"path":"/home/me/project9/README.md"}`}
	if got := briefs(listThenRead(l, "live", 9)); len(got) == 0 || got[0] != want {
		t.Errorf("learner after checkpoint predicted %v, want first %v", got, want)
	}
	pool, err := pattern.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	o, err := pattern.NewOnline(pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := briefs(listThenRead(o, "next", 9)); len(got) == 0 || got[0] != want {
		t.Errorf("written pool predicted %v, want first %v", got, want)
	}
}

// TestLearnerKeepsCounts checks that relearning adds patterns without
// counting twice those the pool has, and carries live sessions over.
func TestLearnerKeepsCounts(t *testing.T) {
	l, err := NewLearner(EmptyPool(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		listThenRead(l, fmt.Sprint("s", i), i)
	}
	if _, err := l.Relearn(); err != nil {
		t.Fatal(err)
	}
	before := l.Snapshot()
	// A session in progress across the relearn keeps its window.
	l.Observe(ev("live", 0, "list_directory", `{"path":"/x"}`, "[FILE] a.md"))
	for i := 4; i < 6; i++ {
		listThenRead(l, fmt.Sprint("s", i), i)
	}
	if _, err := l.Relearn(); err != nil {
		t.Fatal(err)
	}
	after := l.Snapshot()
	if len(after.Patterns) < len(before.Patterns) {
		t.Fatalf("patterns %d → %d", len(before.Patterns), len(after.Patterns))
	}
	for i, pt := range before.Patterns {
		got := after.Patterns[i]
		// Two more sessions: each pattern's support grows by what they
		// showed, online, not by a second count of the first four.
		if got.Support > pt.Support+3 {
			t.Errorf("pattern %d support %d → %d: counted twice", i, pt.Support, got.Support)
		}
	}
}

// TestServedCountsCheckpointFailures checks that a periodic checkpoint
// that fails is counted (and logged), not dropped.
func TestServedCountsCheckpointFailures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "gone")
		bad := filepath.Join(dir, "pool.json")
		s, err := Open(bad, &Options{Learn: true, Checkpoint: bad, CheckpointEvery: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		// Open made the folder; someone removes it while ahead runs.
		if err := os.Remove(dir); err != nil {
			t.Fatal(err)
		}
		time.Sleep(3*time.Minute + time.Second)
		synctest.Wait()
		if n := s.CheckpointFailures(); n != 3 {
			t.Errorf("%d failed checkpoints counted, want 3", n)
		}
		if err := s.Close(); err == nil {
			t.Error("Close reported no error for the final checkpoint to a missing directory")
		}
	})
}

func ev(session string, seq int, tool, args, out string) trace.Event {
	return trace.Event{Session: session, Seq: seq, Tool: tool, Args: json.RawMessage(args), Status: trace.StatusOK, Output: out}
}

type brief struct {
	Tool, Args string
}

func briefs(ps []predict.Prediction) []brief {
	var out []brief
	for _, p := range ps {
		out = append(out, brief{p.Tool, string(p.Args)})
	}
	return out
}

// TestPredictorCheckpoints checks that a pool that learns is saved every
// CheckpointEvery and once more at Close, with what was learnt since.
func TestPredictorCheckpoints(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "pool.json")
		p, err := New(EmptyPool(), &Options{Learn: true, Checkpoint: path, CheckpointEvery: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Minute + time.Second)
		synctest.Wait()
		first, err := pattern.Load(path)
		if err != nil {
			t.Fatalf("no checkpoint after one interval: %v", err)
		}
		if len(first.Patterns) != 0 {
			t.Fatalf("first checkpoint has %d patterns, want 0", len(first.Patterns))
		}
		for i := range 3 {
			listThenRead(p, fmt.Sprint("s", i), i)
			p.Forget(fmt.Sprint("s", i))
		}
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		last, err := pattern.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		if len(last.Patterns) == 0 {
			t.Error("the final checkpoint did not save what was learnt")
		}
	})
}

// TestPredictorRelearnEvery checks that with RelearnEvery the patterns
// are mined in Forget every so many ended sessions, not before.
func TestPredictorRelearnEvery(t *testing.T) {
	p, err := New(EmptyPool(), &Options{Learn: true, RelearnEvery: 3})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if n := p.Patterns(); n != 0 {
			t.Fatalf("%d patterns after %d ended sessions, want 0 before the third", n, i)
		}
		listThenRead(p, fmt.Sprint("s", i), i)
		p.Forget(fmt.Sprint("s", i))
	}
	if p.Patterns() == 0 {
		t.Error("no patterns after the third ended session")
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestLearnerKeptBounded checks the bounds of the calls a Learner keeps
// for mining (issue 23): one session of 400 calls with 1 MiB outputs, and
// 4,000 sessions of 64 KiB answers, keep at most MaxBytes, one session at
// most MaxSessionBytes, and what the engine is told the session holds
// (SessionBytes) counts the session's kept calls. The old Learner never
// trimmed the only session in progress: 400 MiB kept.
func TestLearnerKeptBounded(t *testing.T) {
	const maxBytes = 8 << 20
	for _, tc := range []struct {
		name           string
		sessions, each int
		size           int
	}{
		{"one session of 1 MiB outputs", 1, 400, 1 << 20},
		{"4000 sessions of 64 KiB answers", 4000, 1, 64 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := NewLearner(EmptyPool(), &LearnerOptions{MaxBytes: maxBytes})
			if err != nil {
				t.Fatal(err)
			}
			out := strings.Repeat("x", tc.size)
			var peak int64
			for s := range tc.sessions {
				id := fmt.Sprint("s", s)
				for i := range tc.each {
					l.Observe(ev(id, i, "read", fmt.Sprintf(`{"i":%d}`, i), out))
					if n := l.KeptBytes(); n > peak {
						peak = n
					}
					if n := l.SessionBytes(id); n > maxBytes/4+int64(tc.size)*8 {
						t.Fatalf("SessionBytes(%s) = %d after %d calls, want at most the session's share %d and the window", id, n, i+1, maxBytes/4)
					}
				}
			}
			if peak > maxBytes {
				t.Errorf("kept up to %d bytes, want at most MaxBytes %d", peak, maxBytes)
			}
			last := fmt.Sprint("s", tc.sessions-1)
			if l.SessionBytes(last) < int64(tc.size) {
				t.Errorf("SessionBytes(%s) = %d, want its kept calls (at least %d) counted", last, l.SessionBytes(last), tc.size)
			}
		})
	}
}

// TestLearnerKeptHeap checks the bound where it matters, in the heap: 400
// distinct 1 MiB outputs through a Learner with MaxBytes 8 MiB leave at
// most 2 × MaxBytes and a few outputs of the predictor's window in use
// (the old Learner held all 400 MiB).
func TestLearnerKeptHeap(t *testing.T) {
	const maxBytes = 8 << 20
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	before := heap()
	l, err := NewLearner(EmptyPool(), &LearnerOptions{MaxBytes: maxBytes})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 400 {
		out := make([]byte, 1<<20)
		out[0] = byte(i)
		l.Observe(ev("s", i, "read", fmt.Sprintf(`{"i":%d}`, i), string(out)))
	}
	grown := int64(heap()) - int64(before)
	if limit := int64(2*maxBytes + 16<<20); grown > limit {
		t.Errorf("heap grew %d MiB with the Learner's calls kept, want at most %d MiB", grown>>20, limit>>20)
	}
	runtime.KeepAlive(l)
}

// TestServedMakesCheckpointFolder is issue 27's pool in a new folder: the
// folder is made at start, so what is learnt is written at Close; a
// folder that cannot be made (its parent is a file) fails the start.
func TestServedMakesCheckpointFolder(t *testing.T) {
	root := t.TempDir()
	path := filepath.Join(root, "some", "new", "dir", "pool.json")
	s, err := Open(path, &Options{Learn: true, Checkpoint: path, CheckpointEvery: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		listThenRead(s, fmt.Sprint("s", i), i)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close (the final checkpoint): %v", err)
	}
	if _, err := pattern.Load(path); err != nil {
		t.Errorf("the pool learnt into a new folder: %v", err)
	}

	file := filepath.Join(root, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	under := filepath.Join(file, "pool.json")
	if _, err := Open(under, &Options{Learn: true, Checkpoint: under}); err == nil || !strings.Contains(err.Error(), file) {
		t.Errorf("Open with a pool under a file: %v, want an error naming it", err)
	}
}

// TestLearnerHeaderAfterMerges is issue 27's stale header: ahead mcp
// learns one session per run into the same pool file; after eleven runs
// the pool says it was learnt from eleven sessions, not from the first
// run's one (merging used to keep the first mining's header).
func TestLearnerHeaderAfterMerges(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pool.json")
	for i := range 11 {
		pool := EmptyPool()
		if i > 0 {
			var err error
			if pool, err = pattern.Load(path); err != nil {
				t.Fatal(err)
			}
		}
		l, err := NewLearner(pool, nil)
		if err != nil {
			t.Fatal(err)
		}
		listThenRead(l, fmt.Sprint("run", i), i)
		if err := l.Checkpoint(path); err != nil {
			t.Fatal(err)
		}
	}
	pool, err := pattern.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if pool.Mined.Sessions != 11 || pool.Mined.Calls != 22 {
		t.Errorf("after 11 runs of one session: header says %d sessions, %d calls, want 11, 22", pool.Mined.Sessions, pool.Mined.Calls)
	}
}
