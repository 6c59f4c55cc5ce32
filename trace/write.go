package trace

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"
)

// ErrClosed is returned by Record after Close.
var ErrClosed = errors.New("trace: writer closed")

// WriterOptions configure a Writer. The zero value is valid.
type WriterOptions struct {
	// Prefix starts every file name; "" means "ahead".
	Prefix string
	// MaxBytes rotates to a new file once the current one would grow
	// beyond it; 0 means 64 MiB. A single event larger than MaxBytes still
	// gets written, alone in its file.
	MaxBytes int64
	// MaxFiles keeps at most this many files of the prefix in the
	// directory: when a new file is created, the oldest beyond the limit
	// are deleted. 0 means no limit.
	MaxFiles int
	// Now returns the time used in file names; nil means time.Now.
	Now func() time.Time
}

// Writer appends events as JSONL to files in a directory, rotating by
// size. Files are named PREFIX-YYYYMMDDTHHMMSS.NNNNNNNNNZ-N.jsonl (UTC), so
// their lexical order is their creation order and a directory of them
// reads back in order (see Files). A Writer never appends to an existing
// file: after a crash the torn last line stays the last line of its file,
// where readers skip it.
//
// Each event is written with a single write call, so a crash loses at most
// the line being written; nothing is buffered. Record is safe for
// concurrent use; it implements the engine's Recorder.
type Writer struct {
	dir  string
	opts WriterOptions

	mu    sync.Mutex // protects everything below
	f     *os.File
	size  int64
	n     int // files created
	buf   bytes.Buffer
	err   error // sticky write error
	close bool
}

// NewWriter returns a Writer that writes into dir, creating it if needed.
// The first file is created on the first Record.
func NewWriter(dir string, opts *WriterOptions) (*Writer, error) {
	w := &Writer{dir: dir}
	if opts != nil {
		w.opts = *opts
	}
	if w.opts.Prefix == "" {
		w.opts.Prefix = "ahead"
	}
	if w.opts.MaxBytes <= 0 {
		w.opts.MaxBytes = 64 << 20
	}
	if w.opts.Now == nil {
		w.opts.Now = time.Now
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("trace writer: %w", err)
	}
	return w, nil
}

// Record appends ev as one line. After a write error every later Record
// returns that error: a trace with a silent hole is worse than none.
func (w *Writer) Record(ev Event) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.close {
		return ErrClosed
	}
	if w.err != nil {
		return w.err
	}
	w.buf.Reset()
	if err := EncodeLine(&w.buf, ev); err != nil {
		return fmt.Errorf("trace writer: %w", err)
	}
	line := w.buf.Bytes()
	if w.f != nil && w.size > 0 && w.size+int64(len(line)) > w.opts.MaxBytes {
		if err := w.f.Close(); err != nil {
			w.err = fmt.Errorf("trace writer: %w", err)
			return w.err
		}
		w.f = nil
	}
	if w.f == nil {
		if err := w.openLocked(); err != nil {
			w.err = err
			return err
		}
	}
	n, err := w.f.Write(line)
	w.size += int64(n)
	if err != nil {
		w.err = fmt.Errorf("trace writer: %w", err)
		return w.err
	}
	return nil
}

func (w *Writer) openLocked() error {
	w.n++
	name := fmt.Sprintf("%s-%s-%06d.jsonl", w.opts.Prefix, w.opts.Now().UTC().Format("20060102T150405.000000000Z"), w.n)
	// Traces hold what agents and tools said: readable by their owner only.
	f, err := os.OpenFile(filepath.Join(w.dir, name), os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("trace writer: %w", err)
	}
	w.f, w.size = f, 0
	// Best effort: a prune that fails leaves more files, never a hole.
	_ = w.pruneLocked()
	return nil
}

// pruneLocked deletes the oldest files of the prefix beyond MaxFiles. The
// names sort by creation time, so the lexically smallest go first.
func (w *Writer) pruneLocked() error {
	if w.opts.MaxFiles <= 0 {
		return nil
	}
	names, err := filepath.Glob(filepath.Join(w.dir, w.opts.Prefix+"-*.jsonl"))
	if err != nil {
		return fmt.Errorf("trace writer: %w", err)
	}
	slices.Sort(names)
	for _, n := range names[:max(0, len(names)-w.opts.MaxFiles)] {
		if err := os.Remove(n); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("trace writer: pruning old traces: %w", err)
		}
	}
	return nil
}

// Close syncs and closes the current file. Later Records return ErrClosed.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.close {
		return nil
	}
	w.close = true
	if w.f == nil {
		return nil
	}
	err := errors.Join(w.f.Sync(), w.f.Close())
	w.f = nil
	if err != nil {
		return fmt.Errorf("trace writer: %w", err)
	}
	return nil
}

// EncodeLine writes ev to w as one JSONL line in the trace format: a call's
// fields, a message line's (../shared/traces/README.md), or for another
// kind its fields that are set; then ev.Extra. Args and Extra values are
// compacted (a RawMessage spanning lines cannot break the format) and must
// be valid JSON.
func EncodeLine(w io.Writer, ev Event) error {
	var v any = ev
	switch {
	case ev.IsMessage():
		v = messageLine{Kind: ev.Kind, Session: ev.Session, Seq: ev.Seq, Step: ev.Step, Role: ev.Role, Content: ev.Content, TS: ev.TS}
	case ev.Kind == KindEmitted:
		v = emittedLine{Kind: ev.Kind, Session: ev.Session, Seq: ev.Seq, Step: ev.Step, Tool: ev.Tool, Args: ev.Args, CallID: ev.CallID, TS: ev.TS}
	case !ev.IsCall() && ev.Kind != KindSpeculative && ev.Kind != KindFailed:
		v = otherLine(ev)
	}
	var err error
	if len(ev.Extra) == 0 {
		err = newEncoder(w).Encode(v)
	} else {
		err = encodeWithExtra(w, v, &ev)
	}
	if err != nil {
		return fmt.Errorf("encoding event %s/%d: %w", ev.Session, ev.Seq, err)
	}
	return nil
}

func newEncoder(w io.Writer) *json.Encoder {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc
}

// encodeWithExtra writes v, an object, followed by the keys of ev.Extra
// that its kind does not define, in key order.
func encodeWithExtra(w io.Writer, v any, ev *Event) error {
	fields := fieldsOf(ev)
	extra := make(map[string]json.RawMessage, len(ev.Extra))
	for k, x := range ev.Extra {
		if !defines(fields, k) {
			extra[k] = x
		}
	}
	var known, more bytes.Buffer
	if err := newEncoder(&known).Encode(v); err != nil {
		return err
	}
	if len(extra) == 0 {
		_, err := w.Write(known.Bytes())
		return err
	}
	if err := newEncoder(&more).Encode(extra); err != nil {
		return err
	}
	// {"a":1}\n + {"x":2}\n → {"a":1,"x":2}\n (the known object is never
	// empty: it has at least a session and a seq).
	line := known.Bytes()[:known.Len()-2]
	line = append(line, ',')
	line = append(line, more.Bytes()[1:]...)
	_, err := w.Write(line)
	return err
}

// messageLine is the shape of a message line (../shared/traces/README.md):
// a call's fields would only mislead a reader.
type messageLine struct {
	Kind    string `json:"kind"`
	Session string `json:"session"`
	Seq     int    `json:"seq"`
	Step    int    `json:"step,omitempty"`
	Role    string `json:"role"`
	Content string `json:"content"`
	TS      string `json:"ts,omitempty"`
}

// emittedLine is the shape of a call the model emitted: no status or
// output, for there was no result.
type emittedLine struct {
	Kind    string          `json:"kind"`
	Session string          `json:"session"`
	Seq     int             `json:"seq"`
	Step    int             `json:"step,omitempty"`
	Tool    string          `json:"tool"`
	Args    json.RawMessage `json:"args"`
	CallID  string          `json:"call_id,omitempty"`
	TS      string          `json:"ts,omitempty"`
}

// otherLine is the shape of a line of another kind: the fields that are
// set. Read back, such a line keeps the fields every line has and puts the
// rest in Extra, which writes them out again in the same place.
type otherLine struct {
	Kind        string                     `json:"kind"`
	Session     string                     `json:"session"`
	Seq         int                        `json:"seq"`
	Step        int                        `json:"step,omitempty"`
	Tool        string                     `json:"tool,omitempty"`
	Args        json.RawMessage            `json:"args,omitempty"`
	Status      Status                     `json:"status,omitempty"`
	Role        string                     `json:"role,omitempty"`
	Content     string                     `json:"content,omitempty"`
	Output      string                     `json:"output,omitempty"`
	Requestor   string                     `json:"requestor,omitempty"`
	CallID      string                     `json:"call_id,omitempty"`
	TS          string                     `json:"ts,omitempty"`
	ResultTS    string                     `json:"result_ts,omitempty"`
	DurationMS  *float64                   `json:"duration_ms,omitempty"`
	LLMMS       *float64                   `json:"llm_ms,omitempty"`
	Speculative bool                       `json:"speculative,omitempty"`
	Outcome     string                     `json:"outcome,omitempty"`
	Origin      string                     `json:"origin,omitempty"`
	Source      string                     `json:"source,omitempty"`
	Extra       map[string]json.RawMessage `json:"-"`
}
