package trace

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// ErrMalformed is wrapped by every error about a line that is not a valid
// event. Test with errors.Is; errors.AsType[*LineError] gives the place.
var ErrMalformed = errors.New("trace: malformed event")

// LineError is a malformed line: where it is and what is wrong with it.
type LineError struct {
	File  string
	Line  int    // 1-based
	Field string // the offending field, "" when the line is not JSON at all
	Err   error
}

func (e *LineError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err)
	}
	return fmt.Sprintf("%s:%d: field %q: %v", e.File, e.Line, e.Field, e.Err)
}

// Unwrap returns ErrMalformed and the underlying error.
func (e *LineError) Unwrap() []error { return []error{ErrMalformed, e.Err} }

// ReadOptions configure a Reader. The zero value is valid.
type ReadOptions struct {
	// SkipBad skips malformed lines, counting them in Stats.Bad, instead of
	// stopping at the first one with an error.
	SkipBad bool
	// Logger receives warnings: torn last lines and, with SkipBad, each
	// skipped line. Nil means no warnings are logged (they are still
	// counted in Stats).
	Logger *slog.Logger
}

// Stats count what a Reader has read so far.
type Stats struct {
	Files  int // files opened
	Lines  int // non-empty lines seen
	Events int // events yielded
	Bad    int // malformed lines skipped (SkipBad)
	Torn   int // torn last lines skipped (a writer crashed mid-line)
}

// Reader reads trace files. It is not safe for concurrent use; read its
// Stats after the iteration ends.
type Reader struct {
	opts  ReadOptions
	stats Stats
}

// NewReader returns a Reader; opts may be nil.
func NewReader(opts *ReadOptions) *Reader {
	r := &Reader{}
	if opts != nil {
		r.opts = *opts
	}
	return r
}

// Stats returns the counts so far.
func (r *Reader) Stats() Stats { return r.stats }

// Files expands paths into the trace files to read: a file is taken as
// given; a directory contributes every *.jsonl and *.jsonl.gz file below it,
// in lexical order, except session metadata files (*.sessions.jsonl, see the
// trace format). The result keeps the order of paths.
func Files(paths ...string) ([]string, error) {
	var out []string
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !fi.IsDir() {
			out = append(out, p)
			continue
		}
		var found []string
		err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				return nil
			}
			name := d.Name()
			if strings.HasSuffix(name, ".sessions.jsonl") || strings.HasSuffix(name, ".sessions.jsonl.gz") {
				return nil
			}
			if strings.HasSuffix(name, ".jsonl") || strings.HasSuffix(name, ".jsonl.gz") {
				found = append(found, path)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		slices.Sort(found)
		out = append(out, found...)
	}
	return out, nil
}

// Events streams the events of paths (files or directories, see Files) in
// file order. It stops at the first error, which it yields with a zero
// Event: a *LineError for a malformed line (unless SkipBad), or an I/O
// error. A torn last line of a file — no trailing newline, or a gzip
// stream cut short — is skipped with a warning, never an error.
func (r *Reader) Events(paths ...string) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		files, err := Files(paths...)
		if err != nil {
			yield(Event{}, err)
			return
		}
		for _, name := range files {
			if !r.readFile(name, yield) {
				return
			}
		}
	}
}

// Read streams the events of one reader (named name in errors), as Events
// does for a file. Gzip input is detected by its magic number.
func (r *Reader) Read(name string, in io.Reader) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		r.readStream(name, in, yield)
	}
}

// readFile returns false when iteration must stop.
func (r *Reader) readFile(name string, yield func(Event, error) bool) bool {
	f, err := os.Open(name)
	if err != nil {
		return yield(Event{}, err)
	}
	defer f.Close()
	return r.readStream(name, f, yield)
}

func (r *Reader) readStream(name string, in io.Reader, yield func(Event, error) bool) bool {
	r.stats.Files++
	br := bufio.NewReaderSize(in, 64<<10)
	var src io.Reader = br
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return yield(Event{}, fmt.Errorf("%s: %w", name, err))
		}
		defer zr.Close()
		src = zr
	}
	lr := bufio.NewReaderSize(src, 64<<10)
	var dec lineDecoder
	var line []byte
	for n := 1; ; n++ {
		line = line[:0]
		var err error
		line, err = readLine(lr, line)
		complete := err == nil // ends with '\n'
		if err != nil && err != io.EOF && !errors.Is(err, io.ErrUnexpectedEOF) {
			return yield(Event{}, fmt.Errorf("%s:%d: %w", name, n, err))
		}
		truncated := errors.Is(err, io.ErrUnexpectedEOF)
		body := bytes.TrimSpace(line)
		if len(body) > 0 {
			r.stats.Lines++
			ev, perr := dec.parse(body)
			switch {
			case perr == nil:
				r.stats.Events++
				if !yield(ev, nil) {
					return false
				}
			case !complete:
				// A writer that crashed mid-line, or a gzip stream cut
				// short: the last line is torn. Lose it, not the file.
				r.stats.Torn++
				r.warn("skipping torn last line", name, n, perr)
			default:
				lerr := &LineError{File: name, Line: n, Field: perr.field, Err: perr.err}
				if !r.opts.SkipBad {
					return yield(Event{}, lerr)
				}
				r.stats.Bad++
				r.warn("skipping malformed line", name, n, lerr)
			}
		}
		if truncated && len(body) == 0 {
			r.stats.Torn++
			r.warn("gzip stream cut short", name, n, err)
		}
		if !complete {
			return true
		}
	}
}

func (r *Reader) warn(msg, file string, line int, err error) {
	if r.opts.Logger != nil {
		r.opts.Logger.Warn(msg, "file", file, "line", line, "err", err)
	}
}

// readLine appends the next line (without its '\n') to buf. It returns
// io.EOF when the input ended without a newline (possibly after a partial
// line) and io.ErrUnexpectedEOF when a gzip stream was cut short.
func readLine(r *bufio.Reader, buf []byte) ([]byte, error) {
	for {
		chunk, err := r.ReadSlice('\n')
		buf = append(buf, chunk...)
		switch err {
		case nil:
			return buf[:len(buf)-1], nil
		case bufio.ErrBufferFull:
			continue
		default:
			return buf, err
		}
	}
}

// rawEvent mirrors Event with the fields whose JSON shape we check by hand.
type rawEvent struct {
	Kind      string          `json:"kind"`
	Role      *string         `json:"role"`
	Content   *string         `json:"content"`
	Session   *string         `json:"session"`
	Seq       *int            `json:"seq"`
	Step      int             `json:"step"`
	Tool      *string         `json:"tool"`
	Args      json.RawMessage `json:"args"`
	Status    *string         `json:"status"`
	Output    json.RawMessage `json:"output"`
	Requestor string          `json:"requestor"`
	CallID    string          `json:"call_id"`
	TS        string          `json:"ts"`
	ResultTS  string          `json:"result_ts"`

	DurationMS *float64 `json:"duration_ms"`
	LLMMS      *float64 `json:"llm_ms"`

	Speculative bool   `json:"speculative"`
	Outcome     string `json:"outcome"`
	Origin      string `json:"origin"`
	Source      string `json:"source"`

	Tools json.RawMessage `json:"tools"`
	From  string          `json:"from"`
}

type parseError struct {
	field string
	err   error
}

func (e *parseError) Error() string { return e.field + ": " + e.err.Error() }

func fieldErr(field, format string, args ...any) *parseError {
	return &parseError{field: field, err: fmt.Errorf(format, args...)}
}

// parseMessage checks and returns a message line.
func parseMessage(raw *rawEvent) (Event, *parseError) {
	switch {
	case raw.Role == nil:
		return Event{}, fieldErr("role", "missing")
	case *raw.Role != RoleSystem && *raw.Role != RoleUser && *raw.Role != RoleAssistant:
		return Event{}, fieldErr("role", "want \"system\", \"user\" or \"assistant\", got %q", *raw.Role)
	case raw.Content == nil:
		return Event{}, fieldErr("content", "missing")
	}
	return Event{
		Kind: KindMessage, Session: *raw.Session, Seq: *raw.Seq, Step: raw.Step,
		Role: *raw.Role, Content: *raw.Content, TS: raw.TS,
	}, nil
}

// parseEmitted checks a line of a call the model emitted: a tool and an
// object of arguments, no result.
func parseEmitted(raw *rawEvent) (Event, *parseError) {
	if raw.Tool == nil || *raw.Tool == "" {
		return Event{}, fieldErr("tool", "missing or empty")
	}
	args := bytes.TrimSpace(raw.Args)
	if len(args) == 0 || args[0] != '{' {
		return Event{}, fieldErr("args", "want a JSON object, got %.40q", args)
	}
	return Event{
		Kind: KindEmitted, Session: *raw.Session, Seq: *raw.Seq, Step: raw.Step,
		Tool: *raw.Tool, Args: json.RawMessage(args), CallID: raw.CallID, TS: raw.TS,
	}, nil
}

// lineDecoder decodes the lines of one stream. It is not safe for
// concurrent use.
type lineDecoder struct {
	src bytes.Reader
	// dec decodes line after line, reusing its buffer (a json.Decoder per
	// line would allocate a copy of each); nil after an error, which a
	// Decoder keeps.
	dec *json.Decoder
}

// parse decodes one line, keeping the fields its kind does not define in
// Extra.
func (d *lineDecoder) parse(line []byte) (Event, *parseError) {
	var raw rawEvent
	unknown, err := d.decode(line, &raw)
	if err != nil {
		if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok && te.Field != "" {
			return Event{}, fieldErr(te.Field, "want %s, got JSON %s", te.Type, te.Value)
		}
		return Event{}, &parseError{err: err}
	}
	ev, perr := parseRaw(&raw)
	if perr != nil {
		return Event{}, perr
	}
	// A line of a known kind whose keys are all fields of rawEvent, and
	// of its kind, has no extra fields: the common case, decoded once.
	switch {
	case unknown:
	case ev.IsCall() && raw.Role == nil && raw.Content == nil && raw.Tools == nil && raw.From == "":
		return ev, nil
	case ev.IsMessage() && !raw.hasCallFields() && raw.Tools == nil && raw.From == "":
		return ev, nil
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(line, &all); err != nil {
		return Event{}, &parseError{err: err} // cannot happen: the line decoded above
	}
	fields := fieldsOf(&ev)
	for k, v := range all {
		if !defines(fields, k) {
			if ev.Extra == nil {
				ev.Extra = make(map[string]json.RawMessage)
			}
			ev.Extra[k] = v
		}
	}
	return ev, nil
}

// decode decodes line into raw and reports whether the line has keys that
// are not fields of rawEvent. Lines without such keys, the common case, are
// decoded once; others again with json.Unmarshal, since a Decoder that
// disallows unknown fields reports the first of them rather than a type
// error that may follow.
func (d *lineDecoder) decode(line []byte, raw *rawEvent) (unknown bool, err error) {
	d.src.Reset(line)
	if d.dec == nil {
		d.dec = json.NewDecoder(&d.src)
		d.dec.DisallowUnknownFields()
	}
	start := d.dec.InputOffset()
	err = d.dec.Decode(raw)
	if err == nil && d.dec.InputOffset()-start == int64(len(line)) && d.src.Len() == 0 {
		return false, nil
	}
	// An unknown field, data after the object (which would start the next
	// line), or a malformed line: json.Unmarshal gives the values, or the
	// error, for the whole line.
	d.dec = nil
	unknown = err != nil && strings.HasPrefix(err.Error(), "json: unknown field ")
	*raw = rawEvent{}
	return unknown, json.Unmarshal(line, raw)
}

// hasCallFields reports whether a call's fields were set on the line
// (present with their zero value, they are not seen, and not kept).
func (raw *rawEvent) hasCallFields() bool {
	return raw.Tool != nil || raw.Args != nil || raw.Status != nil || raw.Output != nil ||
		raw.Requestor != "" || raw.CallID != "" || raw.ResultTS != "" || raw.DurationMS != nil || raw.LLMMS != nil ||
		raw.Speculative || raw.Outcome != "" || raw.Source != ""
}

// parseRaw checks a decoded line and returns its event, without Extra.
func parseRaw(raw *rawEvent) (Event, *parseError) {
	switch {
	case raw.Session == nil || *raw.Session == "":
		return Event{}, fieldErr("session", "missing or empty")
	case raw.Seq == nil:
		return Event{}, fieldErr("seq", "missing")
	case *raw.Seq < 0:
		return Event{}, fieldErr("seq", "negative (%d)", *raw.Seq)
	case raw.Kind == KindMessage:
		return parseMessage(raw)
	case raw.Kind == KindEmitted:
		return parseEmitted(raw)
	case raw.Kind == KindTools:
		return parseTools(raw)
	case raw.Kind != "" && raw.Kind != KindSpeculative && raw.Kind != KindFailed:
		// A kind this reader does not know: kept, for tools that pass
		// lines on; consumers skip it (Event.IsCall is false).
		return Event{Kind: raw.Kind, Session: *raw.Session, Seq: *raw.Seq, Step: raw.Step, TS: raw.TS}, nil
	case raw.Tool == nil || *raw.Tool == "":
		return Event{}, fieldErr("tool", "missing or empty")
	case raw.Status == nil:
		return Event{}, fieldErr("status", "missing")
	case *raw.Status != string(StatusOK) && *raw.Status != string(StatusError):
		return Event{}, fieldErr("status", "want \"ok\" or \"error\", got %q", *raw.Status)
	}
	args := bytes.TrimSpace(raw.Args)
	if len(args) > 0 && args[0] != '{' && string(args) != "null" {
		return Event{}, fieldErr("args", "want a JSON object or null, got %.40s", args)
	}
	if string(args) == "null" {
		args = nil
	}
	if raw.Speculative {
		raw.Kind = KindSpeculative
	}
	ev := Event{
		Kind:    raw.Kind,
		Session: *raw.Session, Seq: *raw.Seq, Step: raw.Step, Tool: *raw.Tool,
		Args: json.RawMessage(args), Status: Status(*raw.Status),
		Requestor: raw.Requestor, CallID: raw.CallID, TS: raw.TS, ResultTS: raw.ResultTS,
		DurationMS: raw.DurationMS, LLMMS: raw.LLMMS,
		Speculative: raw.Speculative, Outcome: raw.Outcome, Source: raw.Source, Origin: raw.Origin,
	}
	out := bytes.TrimSpace(raw.Output)
	switch {
	case len(out) == 0 || string(out) == "null":
	case out[0] == '"':
		if err := json.Unmarshal(out, &ev.Output); err != nil {
			return Event{}, fieldErr("output", "%v", err)
		}
	default:
		// Not the documented shape, but lossless: a recorder that wrote
		// the result as a JSON value keeps its text.
		ev.Output = string(out)
	}
	return ev, nil
}
