package trace

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"iter"
	"os"
	"regexp"
	"slices"
	"strconv"
)

// Session is one session's calls in seq order and, when the trace has
// them, its messages.
type Session struct {
	ID     string
	Events []Event
	// Messages are the session's message lines in the order they were
	// written; each one's Seq is the number of calls before it.
	Messages []Event
	// Tools are the session's lines of declared tools (KindTools), in
	// the order they were written; each one's Seq is the number of calls
	// before it.
	Tools []Event
}

// Collect groups a stream of events into sessions (calls in Events,
// messages in Messages, declared tools in Tools, lines of other kinds
// dropped), in order of first
// appearance; each session's events are sorted by Seq (stably, so repeated
// seqs keep their file order). Events of a session may be interleaved with
// others', as a Writer serving concurrent sessions writes them. It stops at
// the stream's first error.
func Collect(events iter.Seq2[Event, error]) ([]Session, error) {
	index := make(map[string]int)
	var out []Session
	for ev, err := range events {
		if err != nil {
			return nil, err
		}
		i, ok := index[ev.Session]
		if !ok {
			i = len(out)
			index[ev.Session] = i
			out = append(out, Session{ID: ev.Session})
		}
		switch {
		case ev.IsCall():
			out[i].Events = append(out[i].Events, ev)
		case ev.IsMessage():
			out[i].Messages = append(out[i].Messages, ev)
		case ev.Kind == KindTools:
			out[i].Tools = append(out[i].Tools, ev)
		}
	}
	for i := range out {
		bySeq := func(a, b Event) int { return a.Seq - b.Seq }
		slices.SortStableFunc(out[i].Events, bySeq)
		slices.SortStableFunc(out[i].Messages, bySeq)
		slices.SortStableFunc(out[i].Tools, bySeq)
	}
	return out, nil
}

// Meta holds session metadata: one object per session, from the
// *.sessions.jsonl files that accompany traces (fields such as model, task
// id, reward), keyed by the "session" field.
type Meta map[string]map[string]json.RawMessage

// ReadMeta reads session metadata files. A line without a "session" string
// is an error naming file:line.
func ReadMeta(paths ...string) (Meta, error) {
	m := make(Meta)
	for _, p := range paths {
		if err := readMetaFile(m, p); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func readMetaFile(m Meta, name string) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 64<<10)
	var line []byte
	for n := 1; ; n++ {
		line, err = readLine(r, line[:0])
		if body := bytes.TrimSpace(line); len(body) > 0 {
			var fields map[string]json.RawMessage
			if uerr := json.Unmarshal(body, &fields); uerr != nil {
				return &LineError{File: name, Line: n, Err: uerr}
			}
			var id string
			if uerr := json.Unmarshal(fields["session"], &id); uerr != nil || id == "" {
				return &LineError{File: name, Line: n, Field: "session", Err: fmt.Errorf("missing or not a string")}
			}
			m[id] = fields
		}
		if err != nil {
			if err == io.EOF {
				return nil
			}
			return fmt.Errorf("%s:%d: %w", name, n, err)
		}
	}
}

// Split assigns every session to a training part or a held-out test part
// by a stable hash of a key, so that all sessions sharing the key (the same
// task, the same repository) fall on the same side, identically in every
// run and every process.
type Split struct {
	// Field names the metadata field whose value is the key; "" or
	// "session" means the session id itself (no metadata needed).
	Field string
	// Match, if set, narrows the key to the first capture group of its
	// match in the field's value (the whole match if it has no group); a
	// value it does not match is an error. E.g. `^(.*)-[0-9]+$` turns a
	// task id "proj-123" into the key "proj".
	Match *regexp.Regexp
	// Holdout is the share of keys in the test part, in [0, 1].
	Holdout float64
	// Meta holds the metadata Field is read from.
	Meta Meta
}

// Key returns the split key of a session.
func (s *Split) Key(session string) (string, error) {
	v := session
	if s.Field != "" && s.Field != "session" {
		fields, ok := s.Meta[session]
		if !ok {
			return "", fmt.Errorf("session %q: no metadata (is its sessions file given?)", session)
		}
		raw, ok := fields[s.Field]
		if !ok {
			return "", fmt.Errorf("session %q: metadata has no field %q", session, s.Field)
		}
		var str string
		if err := json.Unmarshal(raw, &str); err == nil {
			v = str
		} else {
			v = string(bytes.TrimSpace(raw)) // a number or other JSON value, as written
		}
	}
	if s.Match != nil {
		m := s.Match.FindStringSubmatch(v)
		switch {
		case m == nil:
			return "", fmt.Errorf("session %q: %s %q does not match %s", session, s.fieldName(), v, s.Match)
		case len(m) > 1:
			v = m[1]
		default:
			v = m[0]
		}
	}
	return v, nil
}

func (s *Split) fieldName() string {
	if s.Field == "" {
		return "session"
	}
	return s.Field
}

// Test reports whether a session belongs to the held-out test part.
func (s *Split) Test(session string) (bool, error) {
	k, err := s.Key(session)
	if err != nil {
		return false, err
	}
	return KeyBucket(k) < s.Holdout, nil
}

// Part returns the sessions of one part, in their order: the held-out
// test part with test, else the train part. It reuses sessions' array.
func (s *Split) Part(sessions []Session, test bool) ([]Session, error) {
	kept := sessions[:0]
	for _, ss := range sessions {
		in, err := s.Test(ss.ID)
		if err != nil {
			return nil, err
		}
		if in == test {
			kept = append(kept, ss)
		}
	}
	return kept, nil
}

// KeyBucket maps a key to a stable number in [0, 1) (FNV-1a, 64 bits).
func KeyBucket(key string) float64 {
	h := fnv.New64a()
	h.Write([]byte(key))
	return float64(h.Sum64()%1_000_000) / 1_000_000
}

// String describes the split, for logs and summaries.
func (s *Split) String() string {
	d := s.fieldName()
	if s.Match != nil {
		d += " ~ " + strconv.Quote(s.Match.String())
	}
	return fmt.Sprintf("%s, holdout %.2f", d, s.Holdout)
}

// Recent returns the sessions of the newest trace files of paths (as
// Files expands them; a Writer's file names sort by time), reading newest
// first until they hold at least maxCalls calls, in file order. Malformed
// lines are skipped: a store being written to may hold a torn line. It is
// what a pool that learns mines (learn.LearnerOptions.Recorded).
func Recent(maxCalls int, paths ...string) ([]Session, error) {
	files, err := Files(paths...)
	if err != nil {
		return nil, err
	}
	first, calls := len(files), 0
	for first > 0 && calls < maxCalls {
		first--
		ss, err := Collect(NewReader(&ReadOptions{SkipBad: true}).Events(files[first]))
		if err != nil {
			return nil, err
		}
		for _, s := range ss {
			calls += len(s.Events)
		}
	}
	return Collect(NewReader(&ReadOptions{SkipBad: true}).Events(files[first:]...))
}
