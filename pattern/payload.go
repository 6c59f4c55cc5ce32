package pattern

import (
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/ahead-dev/ahead/internal/rawjson"
	"github.com/ahead-dev/ahead/internal/text"
	"github.com/ahead-dev/ahead/trace"
)

// Payload is an observed event as mappings read it. It memoises what
// mappings read from it; it is not safe for concurrent use.
type Payload struct {
	Tool   string
	Args   []byte
	Output []byte
	kind   int8 // 0 unknown, 1 text, 2 JSON
	memos  [8]memo
	nmemo  int
	more   []memo // the memos beyond the first 8, up to maxMemos in all
	spare  memo   // when all are taken: a scratch entry, not a cache
}

// maxMemos bounds the paths a payload memoises. Lists of records are read
// at many paths (each field of the first elements, and the lists
// themselves): a user's reservations, orders and address fields easily
// exceed 8, and a path that misses the memo is looked up again for every
// list element a candidate is built from.
const maxMemos = 32

// memo caches the value at one path of a payload.
type memo struct {
	part, ptr     string
	looked, rawOK bool
	raw           []byte
	unquoted, sOK bool
	whole         bool // s is the whole string, not only its first lines
	lines         int  // the lines decoded when not whole
	s             string
}

func (p *Payload) memo(part, ptr string) *memo {
	for i := range p.nmemo {
		if m := &p.memos[i]; m.part == part && m.ptr == ptr {
			return m
		}
	}
	for i := range p.more {
		if m := &p.more[i]; m.part == part && m.ptr == ptr {
			return m
		}
	}
	if p.nmemo < len(p.memos) {
		p.memos[p.nmemo] = memo{part: part, ptr: ptr}
		p.nmemo++
		return &p.memos[p.nmemo-1]
	}
	if len(p.memos)+len(p.more) < maxMemos {
		p.more = append(p.more, memo{part: part, ptr: ptr})
		return &p.more[len(p.more)-1]
	}
	p.spare = memo{part: part, ptr: ptr}
	return &p.spare
}

// MakePayload returns the payload of ev. It shares ev's memory (the output
// is viewed, not copied: outputs can be megabytes), so ev must not change
// while the payload is in use.
func MakePayload(ev *trace.Event) Payload {
	return Payload{Tool: ev.Tool, Args: ev.Args, Output: unsafe.Slice(unsafe.StringData(ev.Output), len(ev.Output))}
}

// Reset makes p the payload of ev, as MakePayload does, reusing the memory
// of its memos.
func (p *Payload) Reset(ev *trace.Event) {
	more := p.more
	clear(more) // they view the previous event's output
	*p = MakePayload(ev)
	p.more = more[:0]
}

// OutputIsJSON reports whether the output is a JSON document (an object or
// an array), as opposed to text (which may start with '[': a listing).
func (p *Payload) OutputIsJSON() bool {
	if p.kind == 0 {
		p.kind = 1
		if i := rawjson.SkipSpace(p.Output, 0); i < len(p.Output) && rawjson.StartsDocument(p.Output[i:]) {
			p.kind = 2
		}
	}
	return p.kind == 2
}

// listAt returns the list a list source names in this event: a JSON
// array, or for a list of lines, the text (isText: a text output read
// whole, else a JSON string).
func (p *Payload) listAt(s *csource) (list []byte, isText, ok bool) {
	raw := p.Args
	if s.part == PartOutput {
		if !p.OutputIsJSON() {
			if s.lines && len(s.path) == 0 && len(p.Output) > 0 {
				return p.Output, true, true
			}
			return nil, false, false
		}
		raw = p.Output
	}
	if len(s.path) == 0 {
		return raw, false, raw != nil
	}
	v, ok := p.lookup(s.part, raw, s.ptr, s.path)
	return v, false, ok
}

// stringAt returns the string (or the number, as written) at a source's
// path in this event, or a text output read whole.
func (p *Payload) stringAt(s *csource) (string, bool) {
	raw := p.Args
	if s.part == PartOutput {
		if !p.OutputIsJSON() {
			if len(s.path) == 0 && len(p.Output) > 0 {
				return bytesString(p.Output), true
			}
			return "", false
		}
		raw = p.Output
	}
	v := raw
	if len(s.path) > 0 {
		var ok bool
		if v, ok = p.lookup(s.part, raw, s.ptr, s.path); !ok {
			return "", false
		}
	}
	switch {
	case len(v) == 0:
		return "", false
	case v[0] == '"' && len(s.path) > 0:
		// A base is read again and again (a command whose first word
		// starts the next call's value): decoded once per event, as
		// appendValue's strings are.
		mm := p.memo(s.part, s.ptr)
		if !mm.unquoted || !mm.whole {
			mm.unquoted = true
			mm.s, mm.sOK, mm.whole = rawjson.UnquoteLines(v, -1)
			mm.lines = -1
		}
		return mm.s, mm.sOK
	case v[0] == '"':
		return rawjson.Unquote(v)
	case v[0] == '-' || (v[0] >= '0' && v[0] <= '9'):
		return bytesString(v), true
	}
	return "", false
}

// eachElem calls fn with each element of a list (see listAt, read in p)
// until it returns false: the elements of a JSON array, or the lines of a
// text, trimmed, as JSON strings, the empty ones skipped. The element fn
// gets is valid until fn returns.
func eachElem(s *csource, p *Payload, list []byte, isText bool, fn func(n int, it elem) bool) {
	if !s.lines {
		if !isText {
			rawjson.EachElem(list, func(n int, el []byte) bool {
				return fn(n, elem{raw: el, from: p})
			})
		}
		return
	}
	var t string
	valid := false // t is valid UTF-8 as a whole
	if isText {
		t = bytesString(list)
	} else {
		if len(list) == 0 || list[0] != '"' {
			return
		}
		// Only the lines a list is read to (maxLineScan) are decoded:
		// an output can be megabytes. A listing is read at every
		// occurrence of every context after it: decoded once per event.
		var ok bool
		if t, ok = p.linesOf(s, list); !ok {
			return
		}
		valid = true // decoded strings are
	}
	var el []byte
	n := 0
	for t != "" {
		var line string
		line, t, _ = strings.Cut(t, "\n")
		if line = strings.TrimSpace(line); line == "" {
			continue
		}
		it := elem{line: line, from: p}
		if !valid && !utf8.ValidString(line) {
			// Quoted, it is not a JSON string: what callkey makes
			// of it decides.
			el = rawjson.AppendQuoted(el[:0], line)
			it = elem{raw: el, from: p}
		}
		if n >= maxLineScan || !fn(n, it) {
			return
		}
		n++
	}
}

// elem is the list element a candidate is built from: JSON, or a line of
// a list of lines, which is a string (valid UTF-8). A line is read as
// itself: quoting it to decode it again, at every occurrence of every
// context after a listing, was a good part of mining's time.
type elem struct {
	raw  []byte   // its JSON, if not a line
	line string   // the line, if a line
	from *Payload // the event of its list (nil if not known)
}

// linesOf returns the first maxLineScan lines of a JSON string at a list
// source's path in p (nil: decoded, not memoised), as eachElem reads them.
func (p *Payload) linesOf(s *csource, list []byte) (string, bool) {
	if p == nil {
		t, ok, _ := rawjson.UnquoteLines(list, maxLineScan)
		return t, ok
	}
	mm := p.memo(s.part, s.ptr)
	// A string decoded whole because it has fewer lines than asked for
	// (up to maxLineScan) is what decoding maxLineScan lines gives.
	if !mm.unquoted || !(mm.lines == maxLineScan || (mm.whole && mm.lines >= 0 && mm.lines < maxLineScan)) {
		mm.unquoted = true
		mm.s, mm.sOK, mm.whole = rawjson.UnquoteLines(list, maxLineScan)
		mm.lines = maxLineScan
	}
	return mm.s, mm.sOK
}

// maxLineScan bounds the lines of a text read as a list, as far as a line
// selector reaches (text.MaxLines): every line costs a candidate call at
// every evaluation, and mining evaluates at every occurrence of a context.
const maxLineScan = text.MaxLines

// lookup returns the value at a path of a part, through the memo: paths
// that share a prefix (the fields of one list element) step from the
// prefix's value instead of scanning from the top again.
func (p *Payload) lookup(part string, raw []byte, ptr string, path []string) ([]byte, bool) {
	m := p.memo(part, ptr)
	if m.looked {
		return m.raw, m.rawOK
	}
	from := raw
	if len(path) > 1 {
		parent, ok := p.lookup(part, raw, ptr[:strings.LastIndexByte(ptr, '/')], path[:len(path)-1])
		if !ok {
			m = p.memo(part, ptr) // the entry may have moved to the spare slot
			m.looked, m.rawOK = true, false
			return nil, false
		}
		from, path = parent, path[len(path)-1:]
		m = p.memo(part, ptr)
	}
	m.looked = true
	m.raw, m.rawOK = rawjson.Lookup(from, path)
	return m.raw, m.rawOK
}

// Retained is the memory the payload's memos hold beyond the event they
// view (decoded strings and the memos past the first eight), in bytes:
// what a holder of the payload keeps besides the event's own Args and
// Output.
func (p *Payload) Retained() int64 {
	n := int64(cap(p.more)) * int64(unsafe.Sizeof(memo{}))
	for i := range p.nmemo {
		n += int64(len(p.memos[i].s))
	}
	for i := range p.more {
		n += int64(len(p.more[i].s))
	}
	return n
}
