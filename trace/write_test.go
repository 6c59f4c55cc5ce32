package trace

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestWriterRoundTrip(t *testing.T) {
	dir := t.TempDir()
	w, err := NewWriter(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	d := 1.5
	in := []Event{
		{Session: "s", Seq: 0, Tool: "a", Args: json.RawMessage("{\n  \"x\": \"<b>\"\n}"), Status: StatusOK, Output: "line1\nline2", DurationMS: &d},
		{Session: "s", Seq: 1, Tool: "b", Status: StatusError, Speculative: true, Outcome: "wasted"},
	}
	for _, ev := range in {
		if err := w.Record(ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Record(in[0]); !errors.Is(err, ErrClosed) {
		t.Errorf("Record after Close = %v, want ErrClosed", err)
	}
	got, err := readAll(t, NewReader(nil), dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || string(got[0].Args) != `{"x":"<b>"}` || got[0].Output != in[0].Output || !got[1].Speculative || got[1].Outcome != "wasted" {
		t.Errorf("round trip: %+v", got)
	}
}

func TestWriterRotates(t *testing.T) {
	dir := t.TempDir()
	clock := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	w, err := NewWriter(dir, &WriterOptions{Prefix: "t", MaxBytes: 300, Now: func() time.Time { return clock }})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if err := w.Record(Event{Session: "s", Seq: i, Tool: "tool", Status: StatusOK, Output: strings.Repeat("o", 50)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	files, err := Files(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 5 {
		t.Fatalf("%d files, want rotation into several", len(files))
	}
	for _, f := range files {
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() > 300 {
			t.Errorf("%s has %d bytes, over MaxBytes", f, fi.Size())
		}
		if !strings.HasPrefix(filepath.Base(f), "t-20260102T030405.000000000Z-") {
			t.Errorf("unexpected file name %s", f)
		}
	}
	got, err := readAll(t, NewReader(nil), dir)
	if err != nil {
		t.Fatal(err)
	}
	for i, ev := range got {
		if ev.Seq != i {
			t.Fatalf("event %d has seq %d: files do not read back in order", i, ev.Seq)
		}
	}
}

func TestWriterConcurrent(t *testing.T) {
	dir := t.TempDir()
	w, err := NewWriter(dir, &WriterOptions{MaxBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				if err := w.Record(Event{Session: fmt.Sprint("s", g), Seq: i, Tool: "t", Status: StatusOK, Output: "x"}); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r := NewReader(nil)
	sessions, err := Collect(r.Events(dir))
	if err != nil {
		t.Fatal(err)
	}
	if len(sessions) != 8 || r.Stats().Events != 400 {
		t.Fatalf("%d sessions, %d events; want 8 and 400", len(sessions), r.Stats().Events)
	}
	for _, s := range sessions {
		seqs := make([]int, len(s.Events))
		for i, ev := range s.Events {
			seqs[i] = ev.Seq
		}
		if !slices.IsSorted(seqs) || len(seqs) != 50 {
			t.Errorf("session %s: seqs %v", s.ID, seqs)
		}
	}
}

func TestWriterNeverAppendsToOldFiles(t *testing.T) {
	dir := t.TempDir()
	// A file left by a crash, with a torn last line.
	writeFile(t, dir, "ahead-20200101T000000.000000000Z-000001.jsonl", line0+"\n"+line1[:20])
	w, err := NewWriter(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Record(Event{Session: "n", Seq: 0, Tool: "t", Status: StatusOK}); err != nil {
		t.Fatal(err)
	}
	w.Close()
	r := NewReader(nil)
	got, err := readAll(t, r, dir)
	if err != nil {
		t.Fatalf("the torn line must stay last in its own file: %v", err)
	}
	if len(got) != 2 || r.Stats().Torn != 1 {
		t.Errorf("%d events, %d torn; want 2 and 1", len(got), r.Stats().Torn)
	}
}

// TestWriterKeepsMaxFilesPrivate checks that traces are readable by their
// owner only and that at most MaxFiles of them are kept, the newest.
func TestWriterKeepsMaxFilesPrivate(t *testing.T) {
	dir := t.TempDir()
	other := filepath.Join(dir, "notes.txt") // not ours: never touched
	if err := os.WriteFile(other, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	w, err := NewWriter(dir, &WriterOptions{Prefix: "t", MaxBytes: 100, MaxFiles: 3})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if err := w.Record(Event{Session: "s", Seq: i, Tool: "tool", Status: StatusOK, Output: strings.Repeat("o", 60)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	files, err := Files(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 3 {
		t.Fatalf("%d trace files kept, want 3", len(files))
	}
	for _, f := range files {
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", f, fi.Mode().Perm())
		}
	}
	got, err := readAll(t, NewReader(nil), dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) == 0 || got[len(got)-1].Seq != 9 {
		t.Errorf("kept events %d..., want the newest (last seq 9)", len(got))
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("a file that is not a trace was removed: %v", err)
	}
}

// TestUnknownFieldsRoundTrip checks that a line keeps the fields ahead
// does not know, whatever its kind, when read and written back.
func TestUnknownFieldsRoundTrip(t *testing.T) {
	for _, tt := range []struct{ name, in, out string }{
		{
			name: "call",
			in:   `{"session":"s","seq":0,"step":1,"tool":"get","args":{"id": 1},"status":"ok","output":"x","note":"retried <twice>","z":{"a":[1, 2]},"a":null}`,
			out:  `{"session":"s","seq":0,"step":1,"tool":"get","args":{"id":1},"status":"ok","output":"x","a":null,"note":"retried <twice>","z":{"a":[1,2]}}`,
		},
		{
			name: "call with a message's field",
			in:   `{"session":"s","seq":0,"tool":"get","status":"ok","role":"assistant"}`,
			out:  `{"session":"s","seq":0,"step":0,"tool":"get","args":null,"status":"ok","output":"","role":"assistant"}`,
		},
		{
			name: "message",
			in:   `{"session":"s","kind":"message","role":"user","content":"hi","seq":0,"note":"first","tool":"t"}`,
			out:  `{"kind":"message","session":"s","seq":0,"role":"user","content":"hi","note":"first","tool":"t"}`,
		},
		{
			name: "unknown kind",
			in:   `{"session":"s","kind":"stream_call","seq":2,"step":3,"tool":"put","args":{"k":"v"},"origin":"stream"}`,
			out:  `{"kind":"stream_call","session":"s","seq":2,"step":3,"args":{"k":"v"},"origin":"stream","tool":"put"}`,
		},
		{
			name: "defined fields in another case are not extra",
			in:   `{"session":"s","seq":0,"tool":"get","status":"ok","Output":"o","x":1}`,
			out:  `{"session":"s","seq":0,"step":0,"tool":"get","args":null,"status":"ok","output":"o","x":1}`,
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var evs []Event
			for ev, err := range NewReader(nil).Read("in", strings.NewReader(tt.in+"\n")) {
				if err != nil {
					t.Fatal(err)
				}
				evs = append(evs, ev)
			}
			var buf bytes.Buffer
			for _, ev := range evs {
				if err := EncodeLine(&buf, ev); err != nil {
					t.Fatal(err)
				}
			}
			if got := strings.TrimSuffix(buf.String(), "\n"); got != tt.out {
				t.Errorf("written:\n%s\nwant:\n%s", got, tt.out)
			}
			// What was written reads back to the same event (Args and
			// Extra values compacted, as written).
			again := roundTrip(t, evs)
			if evs[0].Args != nil {
				evs[0].Args = compactJSON(evs[0].Args)
			}
			for k, v := range evs[0].Extra {
				evs[0].Extra[k] = compactJSON(v)
			}
			if diff := cmp.Diff(evs, again); diff != "" {
				t.Errorf("read back (-first +again):\n%s", diff)
			}
		})
	}
}

// compactJSON lets tests compare JSON values as the writer writes them.
func compactJSON(v json.RawMessage) json.RawMessage {
	var b bytes.Buffer
	if json.Compact(&b, v) != nil {
		return v
	}
	return b.Bytes()
}

// TestEncodeLineExtraNeverOverrides checks that Extra cannot replace or
// repeat a field the line's kind defines.
func TestEncodeLineExtraNeverOverrides(t *testing.T) {
	ev := Event{Session: "s", Tool: "t", Status: StatusOK, Extra: map[string]json.RawMessage{"tool": json.RawMessage(`"evil"`), "SESSION": json.RawMessage(`"x"`)}}
	var buf bytes.Buffer
	if err := EncodeLine(&buf, ev); err != nil {
		t.Fatal(err)
	}
	want := `{"session":"s","seq":0,"step":0,"tool":"t","args":null,"status":"ok","output":""}` + "\n"
	if buf.String() != want {
		t.Errorf("got %s want %s", buf.String(), want)
	}
	ev.Extra = map[string]json.RawMessage{"bad": json.RawMessage(`{`)}
	if err := EncodeLine(&buf, ev); err == nil {
		t.Error("EncodeLine wrote an invalid Extra value")
	}
}

// fullDisk makes the files a Writer creates fail their writes while full
// is set, after writing half of what they were given, as a disk that fills
// up in the middle of a line.
type fullDisk struct{ full atomic.Bool }

type diskFile struct {
	*os.File
	d *fullDisk
}

func (f diskFile) Write(p []byte) (int, error) {
	if f.d.full.Load() {
		n, _ := f.File.Write(p[:len(p)/2])
		return n, syscall.ENOSPC
	}
	return f.File.Write(p)
}

func (d *fullDisk) create(name string) (traceFile, error) {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	return diskFile{f, d}, nil
}

// Issue 23: after a full disk the writer resumes once space is freed,
// says so once per outage, counts what it lost and reports it at Close.
func TestWriterRecoversFromFullDisk(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var logs bytes.Buffer
	w, err := NewWriter(dir, &WriterOptions{
		Now: func() time.Time { return now }, RetryEvery: time.Second, FailOnLoss: true,
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	d := &fullDisk{}
	w.create = d.create
	rec := func(seq int) error {
		now = now.Add(100 * time.Millisecond)
		return w.Record(Event{Session: "s", Seq: seq, Tool: "t", Args: json.RawMessage(`{}`), Status: StatusOK, Output: strings.Repeat("x", 100)})
	}
	seq := 0
	for range 3 {
		if err := rec(seq); err != nil {
			t.Fatal(err)
		}
		seq++
	}
	var wrote []int // the records that must read back
	wrote = append(wrote, 0, 1, 2)
	for outage := range 2 {
		d.full.Store(true)
		errs := 0
		for range 25 { // 2.5 s of calls: retried twice, failed each time
			if rec(seq) != nil {
				errs++
			}
			seq++
		}
		if errs != 1 {
			t.Errorf("outage %d: Record failed %d times, want once (the outage's start)", outage, errs)
		}
		d.full.Store(false)
		for range 20 { // within a second a retry succeeds, and the rest
			if err := rec(seq); err != nil {
				t.Fatalf("after the disk was freed: %v", err)
			}
			if w.err == nil {
				wrote = append(wrote, seq)
			}
			seq++
		}
	}
	lost := int64(seq - len(wrote))
	if got := w.Lost(); got != lost || lost < 50 {
		t.Errorf("Lost() = %d, want %d (at least 50)", got, lost)
	}
	if n := strings.Count(logs.String(), "recording resumed"); n != 2 {
		t.Errorf("%d resumed lines for 2 outages:\n%s", n, logs.String())
	}
	err = w.Close()
	if !errors.Is(err, ErrLost) || !strings.Contains(err.Error(), fmt.Sprintf("%d records", lost)) {
		t.Errorf("Close() = %v, want ErrLost with %d records", err, lost)
	}
	if !strings.Contains(logs.String(), fmt.Sprintf("lost=%d", lost)) {
		t.Errorf("no report of %d lost records at Close:\n%s", lost, logs.String())
	}
	var got []int
	for ev, err := range NewReader(nil).Events(dir) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ev.Seq)
	}
	if !slices.Equal(got, wrote) {
		t.Errorf("read back %v, want %v", got, wrote)
	}
}
