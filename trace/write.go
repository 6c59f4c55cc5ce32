package trace

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"
)

// ErrClosed is returned by Record after Close.
var ErrClosed = errors.New("trace: writer closed")

// ErrLost is returned (wrapped) by Close when records were lost to write
// errors and WriterOptions.FailOnLoss is set.
var ErrLost = errors.New("trace: records lost")

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
	// Now returns the time used in file names and to pace retries; nil
	// means time.Now.
	Now func() time.Time
	// RetryEvery is how often, while writes fail (a full disk), Record
	// tries again to write; 0 means a second. The records in between are
	// lost and counted (Lost).
	RetryEvery time.Duration
	// Logger hears when recording resumes after an outage, with the
	// records it lost, and at Close of all records lost; nil logs nothing.
	// (The outage's start is Record's error, returned once per outage.)
	Logger *slog.Logger
	// FailOnLoss makes Close return an error (ErrLost) when any record
	// was lost, so that a command can exit non-zero.
	FailOnLoss bool
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
//
// When a write fails (a full disk, issue 23), the file is closed (its torn
// last line stays last) and the Writer is in an outage: Record returns the
// error once, then counts the records it cannot write as lost (Lost) and,
// every RetryEvery, tries again in a new file. Recording resumes when the
// disk does; the Logger hears once per outage, and Close reports the
// total.
type Writer struct {
	dir  string
	opts WriterOptions

	mu    sync.Mutex // protects everything below
	f     traceFile
	name  string // of f
	size  int64
	n     int // files created
	buf   bytes.Buffer
	close bool

	err      error     // the outage's error; nil while writes succeed
	tried    time.Time // the outage's last attempt to write
	lost     int64     // records lost to write errors, in all
	lostHere int64     // of them, in the current outage

	// create opens a new file; nil means os.OpenFile (tests make disks
	// fill up).
	create func(name string) (traceFile, error)
}

// traceFile is what the Writer needs of an *os.File.
type traceFile interface {
	io.Writer
	Sync() error
	Close() error
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
	if w.opts.RetryEvery <= 0 {
		w.opts.RetryEvery = time.Second
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("trace writer: %w", err)
	}
	return w, nil
}

// Record appends ev as one line. When the line cannot be written, it is
// lost: the first loss of an outage returns the error, later ones return
// nil and are counted (see Writer).
func (w *Writer) Record(ev Event) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.close {
		return ErrClosed
	}
	w.buf.Reset()
	if err := EncodeLine(&w.buf, ev); err != nil {
		return fmt.Errorf("trace writer: %w", err)
	}
	if w.err != nil {
		now := w.opts.Now()
		if now.Sub(w.tried) < w.opts.RetryEvery {
			w.lost++
			w.lostHere++
			return nil
		}
		w.tried = now
	}
	err := w.writeLocked(w.buf.Bytes())
	switch {
	case err == nil && w.err != nil:
		if w.opts.Logger != nil {
			w.opts.Logger.Warn("trace writer: recording resumed", "lost", w.lostHere, "after", w.err)
		}
		w.err, w.lostHere = nil, 0
	case err != nil:
		w.lost++
		w.lostHere++
		if w.f != nil {
			// Its last line may be torn: it stays the last line of its
			// file, and recording resumes in a new one. A file that got
			// nothing goes: retries must not fill a folder with empty
			// files.
			w.f.Close()
			if w.size == 0 {
				os.Remove(w.name)
			}
			w.f = nil
		}
		if w.err == nil {
			w.err, w.tried = err, w.opts.Now()
			return fmt.Errorf("%w (records are lost and counted until writes succeed again; retrying every %v)", err, w.opts.RetryEvery)
		}
		w.err = err
	}
	return nil
}

// writeLocked writes one line, rotating first if needed.
func (w *Writer) writeLocked(line []byte) error {
	if w.f != nil && w.size > 0 && w.size+int64(len(line)) > w.opts.MaxBytes {
		err := w.f.Close()
		w.f = nil
		if err != nil {
			return fmt.Errorf("trace writer: %w", err)
		}
	}
	if w.f == nil {
		if err := w.openLocked(); err != nil {
			return err
		}
	}
	n, err := w.f.Write(line)
	w.size += int64(n)
	if err != nil {
		return fmt.Errorf("trace writer: %w", err)
	}
	return nil
}

// Lost returns how many records were lost to write errors.
func (w *Writer) Lost() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lost
}

func (w *Writer) openLocked() error {
	w.n++
	name := fmt.Sprintf("%s-%s-%06d.jsonl", w.opts.Prefix, w.opts.Now().UTC().Format("20060102T150405.000000000Z"), w.n)
	create := w.create
	if create == nil {
		create = func(name string) (traceFile, error) {
			// Traces hold what agents and tools said: readable by their
			// owner only.
			return os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
		}
	}
	f, err := create(filepath.Join(w.dir, name))
	if err != nil {
		return fmt.Errorf("trace writer: %w", err)
	}
	w.f, w.name, w.size = f, filepath.Join(w.dir, name), 0
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

// Close syncs and closes the current file, and reports the records lost
// to write errors: to the Logger, and as an error (ErrLost) with
// FailOnLoss. Later Records return ErrClosed.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.close {
		return nil
	}
	w.close = true
	var err error
	if w.f != nil {
		err = errors.Join(w.f.Sync(), w.f.Close())
		w.f = nil
		if err != nil {
			err = fmt.Errorf("trace writer: %w", err)
		}
	}
	if w.lost > 0 {
		if w.opts.Logger != nil {
			w.opts.Logger.Warn("trace writer: records lost to write errors", "lost", w.lost, "dir", w.dir)
		}
		if w.opts.FailOnLoss {
			err = errors.Join(err, fmt.Errorf("%w: %d records could not be written to %s", ErrLost, w.lost, w.dir))
		}
	}
	return err
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
	case ev.Kind == KindTools:
		tools := ev.Tools
		if tools == nil {
			tools = []ToolDef{}
		}
		v = toolsLine{Kind: ev.Kind, Session: ev.Session, Seq: ev.Seq, Step: ev.Step, From: ev.From, Tools: tools, TS: ev.TS}
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
	Tools       []ToolDef                  `json:"tools,omitempty"`
	From        string                     `json:"from,omitempty"`
	Extra       map[string]json.RawMessage `json:"-"`
}
