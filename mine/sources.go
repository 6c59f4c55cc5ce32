package mine

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/ahead-dev/ahead/callkey"
	"github.com/ahead-dev/ahead/internal/rawjson"
	"github.com/ahead-dev/ahead/internal/text"
	"github.com/ahead-dev/ahead/pattern"
)

// Phase II, first half: for each argument of each call, find where in the
// events before it the value could have come from. The results (raw
// candidates) do not depend on the context; Phase II's second half names
// their events relative to each context and validates them.

// loc is a place in an event where a value was found. An event's index
// holds many (up to maxLocsPerKey a key), so it is small: 48 bytes, what
// few places have (the arrays of a JSON path) kept beside them.
type loc struct {
	path string           // JSON pointer to the value ("" for a text output)
	sel  *pattern.TextSel // a line or token of the (text) value at path
	// lineSel, once a value was found here, is sel's token of each line
	// (a listing's entry).
	lineSel *pattern.TextSel
	// lists is 1 + the index in evIndex.lists of the arrays path steps
	// through, 0 if none.
	lists int32
	ntok  int32 // with a token of a line: the tokens of the line
	next  int32 // the key's next place in evIndex.locs, or -1
	part  uint8 // partArgs or partOutput
	norm  uint8 // 0, or 1 + the index in indexedNorms of the normalisation that produced the key
}

// loc.part's values.
const (
	partArgs uint8 = iota
	partOutput
)

// partName returns the pattern.Part* the place is in.
func (l *loc) partName() string {
	if l.part == partOutput {
		return pattern.PartOutput
	}
	return pattern.PartArgs
}

// normName returns the normalisation that produced the key, or "".
func (l *loc) normName() string {
	if l.norm == 0 {
		return ""
	}
	return indexedNorms[l.norm-1]
}

// locLists are the arrays a place's JSON path steps through.
type locLists struct {
	// arrays lists the indices of path's tokens that step into arrays:
	// the places where the value could be a list element.
	arrays []int
	// elems, once a value was found here (findSources), is the list and
	// the path in its element of each of arrays.
	elems []listPath
}

// listPath is a value's place as an element of a list.
type listPath struct{ list, path string }

// evIndex maps the canonical JSON of values found in one event to their
// places: of the values whose key is wanted (keys.go), all.
//
// The places of all keys are in one slice, each key's chained in the
// order they were found, and a key is looked up by its bytes: an event's
// index takes a few allocations, not a map entry, a string and a growing
// slice per key.
type evIndex struct {
	keys  map[string]int32 // key → its entry in heads
	heads []keyPlaces
	locs  []loc
	lists []locLists // loc.lists
	// lens has bit n set when a key n bytes long is indexed: findBase
	// looks up the starts of a prefix of the lengths some key has.
	lens [(maxKeyLen+2)/64 + 1]uint64
	want keySet // nil: every key
}

// keyPlaces are the places of one key: the first and last in
// evIndex.locs, and their number.
type keyPlaces struct{ first, last, n int32 }

// first returns the index in x.locs of the first place of key, or -1.
func (x *evIndex) first(key []byte) int32 {
	if h, ok := x.keys[string(key)]; ok {
		return x.heads[h].first
	}
	return -1
}

// room reports whether key may take another place.
func (x *evIndex) room(key []byte) bool {
	h, ok := x.keys[string(key)]
	return len(key) <= maxKeyLen+2 && (!ok || x.heads[h].n < maxLocsPerKey)
}

// Bounds on indexing: an event's index must stay small even for megabyte
// outputs.
const (
	maxWalkNodes  = 4000 // JSON nodes visited per part
	maxWalkDepth  = 12
	maxKeyLen     = 512  // longest value indexed
	maxTextIndex  = 8192 // bytes of a string leaf whose lines and tokens are indexed
	maxLocsPerKey = 8
)

// add indexes l under key (canonical JSON), unless key is too long or
// has its maxLocsPerKey places.
func (x *evIndex) add(key []byte, l loc) {
	if len(key) > maxKeyLen+2 {
		return
	}
	h, ok := x.keys[string(key)]
	if !ok {
		if x.keys == nil {
			x.keys = make(map[string]int32)
		}
		h = int32(len(x.heads))
		x.keys[string(key)] = h
		x.heads = append(x.heads, keyPlaces{first: -1, last: -1})
		x.lens[len(key)/64] |= 1 << (len(key) % 64)
	}
	kp := &x.heads[h]
	if kp.n >= maxLocsPerKey {
		return
	}
	i := int32(len(x.locs))
	l.next = -1
	x.locs = append(x.locs, l)
	if kp.last >= 0 {
		x.locs[kp.last].next = i
	} else {
		kp.first = i
	}
	kp.last = i
	kp.n++
}

// addQuoted indexes l under the string s.
func (x *evIndex) addQuoted(s string, l loc) {
	var buf [128]byte
	x.add(rawjson.AppendQuoted(buf[:0], s), l)
}

// wantString reports whether the string s may be looked up.
func (x *evIndex) wantString(s string) bool {
	return len(s) <= maxKeyLen && x.want.has(quotedHash(s))
}

// roomString reports whether the string s may be looked up and may take
// another place.
func (x *evIndex) roomString(s string) bool {
	var buf [128]byte
	return x.wantString(s) && x.room(rawjson.AppendQuoted(buf[:0], s))
}

// addString indexes the string s at the place at gives, if it may be
// looked up.
func (x *evIndex) addString(s string, at *lazyLoc) {
	if x.roomString(s) {
		x.addQuoted(s, at.get())
	}
}

// addValue indexes the JSON value v at the place at gives, if it may be
// looked up.
func (x *evIndex) addValue(v []byte, at *lazyLoc) {
	if c, err := callkey.CanonicalValueView(v); err == nil && len(c) <= maxKeyLen+2 && x.want.has(keyHash(c)) && x.room(c) {
		x.add(c, at.get())
	}
}

// lazyLoc is a place built when first needed: most values of an event
// are never looked up, and their places (a JSON pointer, the arrays it
// steps through) are not built.
type lazyLoc struct {
	make func() loc
	l    loc
	made bool
}

func (z *lazyLoc) get() loc {
	if !z.made {
		z.l, z.made = z.make(), true
	}
	return z.l
}

// indexEvent builds the index of an event's arguments and output, of the
// keys in want (nil: all).
func indexEvent(p *pattern.Payload, want keySet) *evIndex {
	x := &evIndex{want: want}
	if len(p.Args) > 0 {
		walkJSON(x, partArgs, p.Args)
	}
	if len(p.Output) > 0 {
		if p.OutputIsJSON() {
			walkJSON(x, partOutput, p.Output)
		} else {
			// A view, not a copy: outputs can be megabytes, and the index keeps
			// only short keys cut from it.
			base := lazyLoc{l: loc{part: partOutput}, made: true}
			indexText(x, &base, unsafe.String(unsafe.SliceData(p.Output), len(p.Output)))
		}
	}
	return x
}

func walkJSON(x *evIndex, part uint8, data []byte) {
	budget := maxWalkNodes
	var toks []string
	var arrays []int
	here := func() loc {
		l := loc{part: part, path: rawjson.Pointer(toks)}
		if len(arrays) > 0 {
			x.lists = append(x.lists, locLists{arrays: slices.Clone(arrays)})
			l.lists = int32(len(x.lists))
		}
		return l
	}
	var walk func(v []byte, depth int)
	walk = func(v []byte, depth int) {
		if budget <= 0 || depth > maxWalkDepth || len(v) == 0 {
			return
		}
		budget--
		at := lazyLoc{make: here}
		switch v[0] {
		case '{':
			if len(v) <= maxKeyLen {
				x.addValue(v, &at)
			}
			rawjson.EachMember(v, func(k, val []byte) bool {
				name, ok := unquoteView(k)
				if !ok {
					return true
				}
				toks = append(toks, name)
				walk(val, depth+1)
				toks = toks[:len(toks)-1]
				return budget > 0
			})
		case '[':
			if len(v) <= maxKeyLen {
				x.addValue(v, &at)
			}
			rawjson.EachElem(v, func(i int, val []byte) bool {
				toks = append(toks, strconv.Itoa(i))
				arrays = append(arrays, len(toks)-1)
				walk(val, depth+1)
				arrays = arrays[:len(arrays)-1]
				toks = toks[:len(toks)-1]
				return budget > 0
			})
		case '"':
			if doc, ok := rawjson.Embedded(v); ok {
				walk(doc, depth+1)
				return
			}
			s, ok := unquoteView(v)
			if !ok {
				return
			}
			x.addString(s, &at)
			addNorms(x, s, &at)
			if len(s) <= maxTextIndex && strings.ContainsAny(s, " \t\n") {
				indexText(x, &at, s)
			}
		default:
			x.addValue(v, &at)
		}
	}
	walk(data, 0)
}

// unquoteView is rawjson.Unquote, but a string that needs no decoding is
// a view of raw, not a copy: the index keeps no string it reads (keys and
// paths are built anew), and most of an event's strings are read only to
// find their keys unwanted.
func unquoteView(raw []byte) (string, bool) {
	if len(raw) >= 2 && raw[0] == '"' && raw[len(raw)-1] == '"' {
		body := raw[1 : len(raw)-1]
		if bytes.IndexByte(body, '\\') < 0 && bytes.IndexByte(body, '"') < 0 && rawjson.NoControl(body) && utf8.Valid(body) {
			return unsafe.String(unsafe.SliceData(body), len(body)), true
		}
	}
	return rawjson.Unquote(raw)
}

// addNorms indexes normalised forms of a string.
func addNorms(x *evIndex, s string, at *lazyLoc) {
	var forms [len(indexedNorms)]string
	if wantedNorms(x, normForms(&forms, s)) {
		addNormForms(x, &forms, at.get())
	}
}

// indexedNorms are the normalisations indexed. Upper-casing is left out:
// it is rare, and indexing it for every token of every output would cost
// more than it finds.
var indexedNorms = [...]string{pattern.NormLower, pattern.NormClean, pattern.NormBase, pattern.NormDir}

// normForms sets forms[k] to s under indexedNorms[k], "" where that form
// is not indexed, and returns forms.
func normForms(forms *[len(indexedNorms)]string, s string) *[len(indexedNorms)]string {
	for k, norm := range indexedNorms {
		forms[k] = ""
		if (norm == pattern.NormClean || norm == pattern.NormBase || norm == pattern.NormDir) && !strings.Contains(s, "/") {
			continue
		}
		n, _ := text.Normalize(s, norm)
		if n != s && n != "" && n != "." && n != "/" {
			forms[k] = n
		}
	}
	return forms
}

// wantedNorms clears the forms that are not looked up and reports
// whether any is left.
func wantedNorms(x *evIndex, forms *[len(indexedNorms)]string) bool {
	any := false
	for k, n := range forms {
		if n != "" && !x.wantString(n) {
			forms[k] = ""
		}
		any = any || forms[k] != ""
	}
	return any
}

// addNormForms indexes at l the forms normForms gave.
func addNormForms(x *evIndex, forms *[len(indexedNorms)]string, l loc) {
	for k, n := range forms {
		if n != "" {
			l2 := l
			l2.norm = uint8(k + 1)
			x.addQuoted(n, l2)
		}
	}
}

// indexText indexes the lines and tokens near both ends of a text.
func indexText(x *evIndex, base *lazyLoc, s string) {
	n := text.LineCount(s)
	var spans []text.Span
	addLine := func(line string, sel pattern.TextSel) {
		if line == "" {
			return
		}
		if x.roomString(line) {
			l := base.get()
			l.sel = &sel
			x.addQuoted(line, l)
		}
		spans = text.TokenSpans(spans[:0], line)
		if len(spans) == 1 && spans[0].Start == 0 && spans[0].End == len(line) {
			return // the token is the line
		}
		for t, sp := range spans {
			tok := line[sp.Start:sp.End]
			wantTok := x.roomString(tok)
			var norms [len(indexedNorms)]string
			if !wantedNorms(x, normForms(&norms, tok)) && !wantTok {
				continue
			}
			for _, ti := range []int{t, t - len(spans)} {
				l := base.get()
				l.sel = &pattern.TextSel{Line: sel.Line, Token: &ti}
				l.ntok = int32(len(spans))
				if wantTok {
					x.addQuoted(tok, l)
				}
				addNormForms(x, &norms, l)
			}
		}
	}
	rest := s
	for i := 0; i < n && i < text.MaxLines; i++ {
		line, tail, _ := strings.Cut(rest, "\n")
		rest = tail
		addLine(strings.TrimSpace(line), pattern.TextSel{Line: i})
		if n-i <= text.MaxLines {
			addLine(strings.TrimSpace(line), pattern.TextSel{Line: i - n})
		}
	}
	if n > text.MaxLines {
		// The last lines, counted from the end.
		t := strings.TrimRight(s, "\r\n")
		for i := 1; i <= text.MaxLines && i <= n-text.MaxLines; i++ {
			j := strings.LastIndexByte(t, '\n')
			line := t[j+1:]
			t = t[:max(j, 0)]
			addLine(strings.TrimSpace(line), pattern.TextSel{Line: -i})
		}
	}
}

// rawCand is where one argument value of one call may have come from.
type rawCand struct {
	arg    string
	back   int32 // the source event, counted back from the call (1 = the one before)
	recent bool  // the source is the most recent event of its signature
	nth    uint8 // else, 1 ≤ nth ≤ maxNthRef: the nth before it
	part   string
	path   string
	list   string // for a list item: the list's path (path is then inside the element)
	sel    *pattern.TextSel
	norm   string
	prefix string
	suffix string
	// lines: the list is the lines of the text at list (see
	// pattern.ListSource.Lines); list may then be "".
	lines bool
	// basePart and basePath, when set, name the first part of a value of
	// two sources (pattern.Base): in the same event, or, with baseSig,
	// in the session's most recent event of that signature (joined.go).
	basePart, basePath string
	baseSel            *pattern.TextSel // a line or token of the base's string
	baseSig            int32
}

func (rc *rawCand) isList() bool { return rc.list != "" || rc.lines }

// whole reports whether the candidate's value is a value of its event as
// it is, not a selection, normalisation or template of one.
func (rc *rawCand) whole() bool {
	return rc.sel == nil && rc.norm == "" && rc.prefix == "" && rc.suffix == "" && rc.basePart == "" && !rc.isList()
}

// maxEntryTokens bounds the tokens of a line read as a list's entry.
const maxEntryTokens = 3

// findBase finds the longest start of prefix that is a whole string
// value of the event (x, its index), or else, with words, the longest that
// is a line or token of one, and ends where a separator or the prefix
// does: the first source of a value of two sources. It returns where the
// start was found and the constant after it.
//
// A word as the first part lets a frame that a pool may not hold as a
// constant (pattern.Identifying: "python3 ") be read from the session's
// own earlier call, joined with a value of another (joinAcross). In the
// event the rest is read from, a word before it is only that event's
// wording again (a command's program before its file), which the
// constant frame already says: it is not looked for there, where it would
// double the candidates of every templated value.
func findBase(x *evIndex, prefix string, words bool) (loc, string, bool) {
	if len(prefix) < 2 {
		return loc{}, "", false
	}
	// The canonical JSON of each start is the start of prefix's, closed:
	// strings are escaped byte by byte (rawjson.AppendEscaped). off[i] is
	// where prefix[:i] ends in the escaped prefix.
	var bufA [256]byte
	var offA [130]int32
	buf, off := append(bufA[:0], '"'), offA[:0]
	if len(prefix)+1 > len(offA) {
		off = make([]int32, 0, len(prefix)+1)
	}
	for i := 0; i < len(prefix); i++ {
		off = append(off, int32(len(buf)))
		if c := prefix[i]; c >= 0x20 && c != '"' && c != '\\' {
			buf = append(buf, c) // as AppendEscaped, without a call a byte
		} else {
			buf = rawjson.AppendEscaped(buf, prefix[i:i+1])
		}
	}
	off = append(off, int32(len(buf)))
	// The longest start that is a word, kept while a whole value may
	// still be found at a shorter one.
	var word loc
	wordAt := -1
	for i := len(prefix); i >= 2; i-- {
		if i < len(prefix) && !isSeparator(prefix[i]) {
			continue
		}
		// Longest first: closing the key at off[i] overwrites only what
		// longer starts used.
		if n := off[i] + 1; x.lens[n/64]&(1<<(n%64)) == 0 {
			continue // no key that long
		}
		key := append(buf[:off[i]], '"')
		for p := x.first(key); p >= 0; p = x.locs[p].next {
			l := &x.locs[p]
			if l.norm != 0 || (l.part != partArgs && l.path == "") {
				continue
			}
			if l.sel == nil {
				return *l, prefix[i:], true
			}
			if words && wordAt < 0 {
				word, wordAt = *l, i
			}
		}
	}
	if wordAt >= 0 {
		return word, prefix[wordAt:], true
	}
	return loc{}, "", false
}

// isSeparator reports whether c separates the parts of a path, URL or
// name: not a letter, digit or non-ASCII byte.
func isSeparator(c byte) bool {
	return !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c >= 0x80)
}

// maxTemplateLen bounds the values searched for templates: a long value
// (a script in a heredoc) is not one token in a constant frame.
const maxTemplateLen = 256

// findSources appends the raw candidates of value v (canonical JSON) of
// argument arg found in an event's index.
func findSources(dst []rawCand, x *evIndex, arg string, v []byte, back int32, recent bool) []rawCand {
	// The places of a token share its prefix: its base is found once.
	var base struct {
		prefix string
		l      loc
		sep    string
		ok     bool
	}
	findBaseOnce := func(prefix string) (loc, string, bool) {
		if prefix != base.prefix {
			base.prefix = prefix
			base.l, base.sep, base.ok = findBase(x, prefix, false)
		}
		return base.l, base.sep, base.ok
	}
	add := func(l *loc, prefix, suffix string) {
		c := rawCand{arg: arg, back: back, recent: recent, part: l.partName(), path: l.path, sel: l.sel, norm: l.normName(), prefix: prefix, suffix: suffix}
		start := len(dst)
		dst = append(dst, c)
		// The value may be an element of a list: the same place in each
		// element of an array the path steps through.
		var elems []listPath
		if l.lists > 0 {
			ls := &x.lists[l.lists-1]
			if ls.elems == nil {
				toks, _ := rawjson.ParsePointer(l.path)
				ls.elems = make([]listPath, len(ls.arrays))
				for i, a := range ls.arrays {
					ls.elems[i] = listPath{rawjson.Pointer(toks[:a]), rawjson.Pointer(toks[a+1:])}
				}
			}
			elems = ls.elems
		}
		for _, e := range elems {
			c2 := c
			c2.list, c2.path = e.list, e.path
			dst = append(dst, c2)
		}
		// Or a line of a text printed one entry a line (a listing): the
		// same token of each line. An entry is a short line (a marker and
		// a name: "[FILE] notes.md"), read by its last token; the lines of
		// longer texts (a shell's output) are read one by one, as before:
		// trying every line of them costs more than it finds.
		if l.sel != nil && l.sel.Line >= 0 && l.ntok <= maxEntryTokens && (l.sel.Token == nil || *l.sel.Token == -1) {
			c2 := c
			c2.list, c2.lines, c2.path, c2.sel = l.path, true, "", nil
			if l.sel.Token != nil {
				if l.lineSel == nil {
					l.lineSel = &pattern.TextSel{Token: l.sel.Token}
				}
				c2.sel = l.lineSel
			}
			dst = append(dst, c2)
		}
		// The constant before the value may itself start with a value of
		// the same event: a folder the call named before a name it
		// listed, a base URL before an id.
		if prefix == "" {
			return
		}
		if bl, sep, ok := findBaseOnce(prefix); ok {
			for i, end := start, len(dst); i < end; i++ {
				c2 := dst[i]
				c2.basePart, c2.basePath, c2.prefix = bl.partName(), bl.path, sep
				dst = append(dst, c2)
			}
		}
	}
	for p := x.first(v); p >= 0; p = x.locs[p].next {
		add(&x.locs[p], "", "")
	}
	s, ok := templated(v)
	if !ok {
		return dst
	}
	var spans [16]text.Span
	var key [64]byte
	eachTemplatePart(spans[:0], s, func(sp text.Span) {
		for p := x.first(rawjson.AppendQuoted(key[:0], s[sp.Start:sp.End])); p >= 0; p = x.locs[p].next {
			add(&x.locs[p], s[:sp.Start], s[sp.End:])
		}
	})
	return dst
}
