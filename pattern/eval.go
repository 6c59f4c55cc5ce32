package pattern

import (
	"hash/maphash"
	"slices"
	"unsafe"

	"github.com/ahead-dev/ahead/callkey"
	"github.com/ahead-dev/ahead/internal/rawjson"
	"github.com/ahead-dev/ahead/internal/text"
)

// History is what mappings read while a pattern is evaluated.
type History interface {
	// At returns the event at a window position given to Match's fn.
	At(pos int) *Payload
	// Last returns the session's most recent event with a signature id,
	// or nil.
	Last(sig int32) *Payload
	// Recent returns the session's i-th most recent event with a
	// signature id (0 is the most recent, as Last), or nil; i <
	// MaxEvery.
	Recent(sig int32, i int) *Payload
	// Used reports whether the session already made a call (by CallHash).
	Used(call uint64) bool
}

// ToolHistory is a History that also tells whether the session may have
// called a tool at all (UsedTool false: Used is false of every call to
// it). Eval then tells that no element of a list was called without
// building each element's call: a list read in every recent event of a
// signature is looked through for a call already made at every
// evaluation, which mining does at every occurrence of every context.
type ToolHistory interface {
	History
	UsedTool(tool string) bool
}

// Candidate is one call a pattern predicts.
type Candidate struct {
	// Args is the canonical JSON object of the arguments; nil for a
	// tool-only pattern.
	Args []byte
	Hash uint64 // CallHash(tool, Args); 0 for a tool-only pattern
	Rank int    // position among the pattern's candidates
}

var callSeed = maphash.MakeSeed()

// CallHash identifies a call within this process: tool and canonical
// arguments (see callkey), hashed.
func CallHash(tool string, canonArgs []byte) uint64 {
	var h maphash.Hash
	h.SetSeed(callSeed)
	h.WriteString(tool)
	h.WriteByte(0)
	h.Write(canonArgs)
	return h.Sum64()
}

// Eval evaluates pattern i's mappings on the matched events (pos, from
// Match) and appends its candidates to dst: one call, or, for a list
// pattern, one per list element not already called in the session, at
// most max, in list order. A tool-only pattern gives one candidate with
// nil Args. Nothing is appended when a source is missing.
func (x *Index) Eval(i int32, pos []int, h History, max int, dst []Candidate) []Candidate {
	dst, _ = x.evalCompiled(x.pats[i], pos, h, max, dst, nil)
	return dst
}

// EvalCache remembers the candidates Index.evalCached computed for one
// state of a History (one prediction), and holds their arguments. A
// matched window names the same events in many contexts, and many
// patterns differ only in their contexts: they need evaluating once. The
// zero value is ready to use; it is not safe for concurrent use.
type EvalCache struct {
	memo  map[evalKey]evalEntry
	cands []Candidate
	buf   []byte // backs the candidates' Args
}

// evalKey names an evaluation: the pattern's class and the window
// positions it reads (one byte per context element, position + 1).
type evalKey struct {
	class int32
	pos   uint64
}

type evalEntry struct {
	start, end int // in cands
	max        int // the max they were computed with
}

// Reset forgets the cached candidates, for a new state of the History:
// the candidates returned so far are overwritten from then on.
func (c *EvalCache) Reset() {
	clear(c.memo)
	clear(c.cands) // drop references into released arguments
	c.cands = c.cands[:0]
	c.buf = c.buf[:0]
}

// evalCached is Eval for predictors: it returns pattern i's candidates
// (the caller must not modify them), computing them only if c holds none
// for the same evaluation since its last Reset. The History must not
// change between Resets. The candidates and their Args are valid until
// the next Reset.
func (x *Index) evalCached(c *EvalCache, i int32, pos []int, h History, max int) []Candidate {
	cp := x.pats[i]
	key, ok := cp.evalKey(pos)
	if !ok {
		start := len(c.cands)
		c.cands, c.buf = x.evalCompiled(cp, pos, h, max, c.cands, c.buf)
		return c.cands[start:len(c.cands):len(c.cands)]
	}
	if e, ok := c.memo[key]; ok {
		n := e.end - e.start
		switch {
		case cp.list == nil:
			// One call (or none), whatever max.
			return c.cands[e.start:e.end:e.end]
		case max <= e.max || n < e.max:
			// A list's candidates are those of the first elements not
			// used: with a smaller max, a prefix; if the list ran out
			// before e.max, the same with any max.
			n = min(n, max)
			if n < 0 {
				n = 0
			}
			return c.cands[e.start : e.start+n : e.start+n]
		}
	}
	start := len(c.cands)
	c.cands, c.buf = x.evalCompiled(cp, pos, h, max, c.cands, c.buf)
	if c.memo == nil {
		c.memo = make(map[evalKey]evalEntry)
	}
	c.memo[key] = evalEntry{start: start, end: len(c.cands), max: max}
	return c.cands[start:len(c.cands):len(c.cands)]
}

// evalKey returns the key of the pattern's evaluation at pos, if it has
// one.
func (cp *cpattern) evalKey(pos []int) (evalKey, bool) {
	if cp.class < 0 {
		return evalKey{}, false
	}
	k := evalKey{class: cp.class}
	for c := range 8 {
		if cp.reads&(1<<c) == 0 || c >= len(pos) {
			continue
		}
		v := pos[c] + 1
		if v < 0 || v > 255 {
			return evalKey{}, false
		}
		k.pos |= uint64(v) << (8 * c)
	}
	return k, true
}

// evalCompiled appends the pattern's candidates to dst (see Eval), and
// their arguments to buf, which backs them.
func (x *Index) evalCompiled(cp *cpattern, pos []int, h History, max int, dst []Candidate, buf []byte) ([]Candidate, []byte) {
	if !cp.exact {
		return append(dst, Candidate{}), buf
	}
	if cp.list == nil {
		start := len(buf)
		b, ok := cp.appendArgs(buf, pos, h, nil)
		if !ok {
			return dst, b[:start]
		}
		args := b[start:len(b):len(b)]
		return append(dst, Candidate{Args: args, Hash: CallHash(cp.tool, args)}), b
	}
	start := len(dst)
	rank, scanned := 0, 0
	each := func(n int, it elem) bool {
		if scanned++; scanned > maxListScan || rank >= max {
			return false
		}
		at := len(buf)
		b, ok := cp.appendArgs(buf, pos, h, &it)
		if !ok {
			buf = b[:at]
			return true
		}
		args := b[at:len(b):len(b)]
		hash := CallHash(cp.tool, args)
		if h.Used(hash) || slices.ContainsFunc(dst[start:], func(c Candidate) bool { return c.Hash == hash }) {
			buf = b[:at]
			return true
		}
		buf = b
		dst = append(dst, Candidate{Args: args, Hash: hash, Rank: rank})
		rank++
		return true
	}
	if cp.list.every {
		// Lists the session has started on come first, the most recent
		// first, then the untouched ones: an agent going through the
		// elements of several lists (the flights of each booking) finishes
		// one before it starts the next, even when a newer list arrived
		// in between. Whether a list was started is worked out once, when
		// first needed.
		const (
			unknown = iota
			started
			untouched
		)
		var state [MaxEvery]uint8
		for pass := 0; pass < 2 && rank < max && scanned <= maxListScan; pass++ {
			for r := range MaxEvery {
				p := h.Recent(cp.list.sig, r)
				if p == nil {
					break
				}
				list, isText, ok := p.listAt(cp.list)
				if !ok {
					continue
				}
				if state[r] == unknown {
					state[r] = untouched
					var s bool
					if s, buf = cp.started(list, isText, p, pos, h, buf); s {
						state[r] = started
					}
				}
				if (state[r] == started) != (pass == 0) {
					continue
				}
				eachElem(cp.list, p, list, isText, each)
				if rank >= max || scanned > maxListScan {
					break
				}
			}
		}
		return dst, buf
	}
	list, text, p, ok := cp.resolve(cp.list, pos, h, nil)
	if !ok {
		return dst, buf
	}
	eachElem(cp.list, p, list, text, each)
	return dst, buf
}

// started reports whether the session already made the call of one of
// list's elements. It uses buf's spare capacity as scratch, and returns
// it with the same length.
func (cp *cpattern) started(list []byte, isText bool, from *Payload, pos []int, h History, buf []byte) (bool, []byte) {
	if th, ok := h.(ToolHistory); ok && !th.UsedTool(cp.tool) {
		return false, buf
	}
	found := false
	at := len(buf)
	eachElem(cp.list, from, list, isText, func(n int, it elem) bool {
		if n >= maxListScan {
			return false
		}
		b, ok := cp.appendArgs(buf, pos, h, &it)
		buf = b[:at]
		if ok && h.Used(CallHash(cp.tool, b[at:])) {
			found = true
		}
		return !found
	})
	return found, buf
}

// resolve returns the value a source names: JSON, or text (for a text
// output read whole), and the event it was read from (nil for a list
// item).
func (cp *cpattern) resolve(s *csource, pos []int, h History, item []byte) (val []byte, text bool, from *Payload, ok bool) {
	if s.part == PartItem {
		if item == nil {
			return nil, false, nil, false
		}
		if len(s.path) == 0 {
			return item, false, nil, true
		}
		v, ok := rawjson.Lookup(item, s.path)
		return v, false, nil, ok
	}
	p := cp.eventOf(s, pos, h)
	if p == nil {
		return nil, false, nil, false
	}
	raw := p.Args
	if s.part == PartOutput {
		raw = p.Output
		if !p.OutputIsJSON() {
			if len(s.path) > 0 {
				return nil, false, p, false
			}
			return raw, true, p, true
		}
	}
	if raw == nil {
		return nil, false, p, false
	}
	if len(s.path) == 0 {
		return raw, false, p, true
	}
	v, ok := p.lookup(s.part, raw, s.ptr, s.path)
	return v, false, p, ok
}

// eventOf returns the event a source (not a list item) names, or nil.
func (cp *cpattern) eventOf(s *csource, pos []int, h History) *Payload {
	if s.sig > 0 {
		return h.Recent(s.sig, s.nth)
	}
	if s.ctx < len(pos) {
		return h.At(pos[s.ctx])
	}
	return nil
}

// appendArgs appends the canonical arguments object. it is the current
// list element (nil for none).
func (cp *cpattern) appendArgs(buf []byte, pos []int, h History, it *elem) ([]byte, bool) {
	buf = append(buf, '{')
	for j := range cp.args {
		m := &cp.args[j]
		if j > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, m.key...)
		buf = append(buf, ':')
		var ok bool
		if buf, ok = cp.appendValue(buf, m, pos, h, it); !ok {
			return buf, false
		}
	}
	return append(buf, '}'), true
}

func (cp *cpattern) appendValue(buf []byte, m *cmapping, pos []int, h History, it *elem) ([]byte, bool) {
	if m.constVal != nil {
		return append(buf, m.constVal...), true
	}
	var raw []byte
	var text bool
	var from *Payload
	line := "" // a line of a list of lines
	if it != nil && it.line != "" && m.src.part == PartItem {
		if len(m.src.path) > 0 {
			return buf, false // a string has no members
		}
		line = it.line
	} else {
		var item []byte
		if it != nil {
			item = it.raw
		}
		var ok bool
		if raw, text, from, ok = cp.resolve(&m.src, pos, h, item); !ok || len(raw) == 0 {
			return buf, false
		}
	}
	var base string
	if m.base != nil {
		// The first part is read from the event the rest comes from, or
		// from an event of its own.
		at := from
		switch {
		case m.baseOwn:
			at = cp.eventOf(m.base, pos, h)
		case m.src.part == PartItem && it != nil:
			at = it.from
		}
		if at == nil {
			return buf, false
		}
		var ok bool
		if base, ok = at.stringAt(m.base); !ok || base == "" {
			return buf, false
		}
		if sel := m.baseText; sel != nil {
			if base, ok = selectText(base, sel); !ok || base == "" {
				return buf, false
			}
		}
	}
	if !m.template {
		if line != "" {
			return rawjson.AppendQuoted(buf, line), true // canonical
		}
		if text {
			return rawjson.AppendQuoted(buf, bytesString(raw)), true
		}
		c, err := callkey.CanonicalValueView(raw)
		if err != nil {
			return buf, false
		}
		return append(buf, c...), true
	}
	var s string
	ok := true
	switch {
	case line != "":
		s = line
	case text:
		s = bytesString(raw)
	case raw[0] == '"':
		if from != nil {
			// Patterns read the same string (a command, a summary)
			// again and again; decode it once per event, and only as
			// many lines as they read.
			need := -1
			if m.text != nil && m.text.Line >= 0 {
				need = m.text.Line + 1
			}
			mm := from.memo(m.src.part, m.src.ptr)
			if !mm.unquoted || (!mm.whole && (need < 0 || need > mm.lines)) {
				mm.unquoted = true
				mm.s, mm.sOK, mm.whole = rawjson.UnquoteLines(raw, need)
				mm.lines = need
			}
			s, ok = mm.s, mm.sOK
		} else {
			s, ok = rawjson.Unquote(raw)
		}
		if !ok {
			return buf, false
		}
	case raw[0] == '-' || (raw[0] >= '0' && raw[0] <= '9'):
		s = bytesString(raw)
	default:
		return buf, false
	}
	return appendTemplate(buf, s, m.text, m.norm, base, m.prefix, m.suffix)
}

// appendTemplate applies a text selection, a normalisation and a template
// to s and appends the result, after base, as a JSON string.
func appendTemplate(buf []byte, s string, sel *TextSel, norm, base, prefix, suffix string) ([]byte, bool) {
	var ok bool
	if sel != nil {
		if s, ok = selectText(s, sel); !ok {
			return buf, false
		}
	}
	if s, ok = text.Normalize(s, norm); !ok {
		return buf, false
	}
	buf = append(buf, '"')
	buf = rawjson.AppendEscaped(buf, base)
	buf = rawjson.AppendEscaped(buf, prefix)
	buf = rawjson.AppendEscaped(buf, s)
	buf = rawjson.AppendEscaped(buf, suffix)
	return append(buf, '"'), true
}

// selectText returns the line, or the token of a line, that sel selects
// from s.
func selectText(s string, sel *TextSel) (string, bool) {
	s, ok := text.LineAt(s, sel.Line)
	if ok && sel.Token != nil {
		s, ok = text.TokenAt(s, *sel.Token)
	}
	return s, ok
}

// bytesString views b as a string without copying; b must not change.
func bytesString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

func ratio(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}
