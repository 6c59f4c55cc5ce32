package pattern

import (
	"strconv"
	"strings"
)

// Phase II, first half: for each argument of each call, find where in the
// events before it the value could have come from. The results (raw
// candidates) do not depend on the context; Phase II's second half names
// their events relative to each context and validates them.

// loc is a place in an event where a value was found.
type loc struct {
	part string // PartArgs or PartOutput
	path string // JSON pointer to the value ("" for a text output)
	// arrays lists the indices of path's tokens that step into arrays:
	// the places where the value could be a list element.
	arrays []int
	sel    *TextSel // a line or token of the (text) value at path
	norm   string   // the normalisation that produced the key
}

// evIndex maps the canonical JSON of values found in one event to their
// places.
type evIndex map[string][]loc

// Bounds on indexing: an event's index must stay small even for megabyte
// outputs.
const (
	maxWalkNodes  = 4000 // JSON nodes visited per part
	maxWalkDepth  = 12
	maxKeyLen     = 512  // longest value indexed
	maxTextIndex  = 8192 // bytes of a string leaf whose lines and tokens are indexed
	maxLocsPerKey = 8
)

func (x evIndex) add(key string, l loc) {
	if len(key) > maxKeyLen+2 || len(x[key]) >= maxLocsPerKey {
		return
	}
	x[key] = append(x[key], l)
}

// indexEvent builds the index of an event's arguments and output.
func indexEvent(p *Payload) evIndex {
	x := make(evIndex)
	if len(p.Args) > 0 {
		walkJSON(x, PartArgs, p.Args)
	}
	if len(p.Output) > 0 {
		if p.outputIsJSON() {
			walkJSON(x, PartOutput, p.Output)
		} else {
			indexText(x, loc{part: PartOutput}, bytesString(p.Output))
		}
	}
	return x
}

func walkJSON(x evIndex, part string, data []byte) {
	budget := maxWalkNodes
	var toks []string
	var arrays []int
	var walk func(v []byte, depth int)
	walk = func(v []byte, depth int) {
		if budget <= 0 || depth > maxWalkDepth || len(v) == 0 {
			return
		}
		budget--
		here := func() loc {
			return loc{part: part, path: pointer(toks), arrays: append([]int(nil), arrays...)}
		}
		switch v[0] {
		case '{':
			if len(v) <= maxKeyLen {
				if c, ok := canonValue(v); ok {
					x.add(string(c), here())
				}
			}
			eachMember(v, func(k, val []byte) bool {
				name, ok := unquote(k)
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
				if c, ok := canonValue(v); ok {
					x.add(string(c), here())
				}
			}
			eachElem(v, func(i int, val []byte) bool {
				toks = append(toks, strconv.Itoa(i))
				arrays = append(arrays, len(toks)-1)
				walk(val, depth+1)
				arrays = arrays[:len(arrays)-1]
				toks = toks[:len(toks)-1]
				return budget > 0
			})
		case '"':
			if doc, ok := embedded(v); ok {
				walk(doc, depth+1)
				return
			}
			s, ok := unquote(v)
			if !ok {
				return
			}
			l := here()
			x.add(quoted(s), l)
			addNorms(x, s, l)
			if len(s) <= maxTextIndex && strings.ContainsAny(s, " \t\n") {
				indexText(x, l, s)
			}
		default:
			if c, ok := canonValue(v); ok {
				x.add(string(c), here())
			}
		}
	}
	walk(data, 0)
}

// addNorms indexes normalised forms of a string.
func addNorms(x evIndex, s string, l loc) {
	// Upper-casing is left out: it is rare, and indexing it for every
	// token of every output would cost more than it finds.
	for _, norm := range []string{NormLower, NormClean, NormBase, NormDir} {
		if (norm == NormClean || norm == NormBase || norm == NormDir) && !strings.Contains(s, "/") {
			continue
		}
		n, _ := normalize(s, norm)
		if n != s && n != "" && n != "." && n != "/" {
			l2 := l
			l2.norm = norm
			x.add(quoted(n), l2)
		}
	}
}

// indexText indexes the lines and tokens near both ends of a text.
func indexText(x evIndex, base loc, s string) {
	n := lineCount(s)
	var spans []span
	addLine := func(line string, sel TextSel) {
		if line == "" {
			return
		}
		l := base
		l.sel = &sel
		x.add(quoted(line), l)
		spans = tokenSpans(spans[:0], line)
		if len(spans) == 1 && spans[0].start == 0 && spans[0].end == len(line) {
			return // the token is the line
		}
		for t, sp := range spans {
			tok := line[sp.start:sp.end]
			for _, ti := range []int{t, t - len(spans)} {
				l := base
				l.sel = &TextSel{Line: sel.Line, Token: &ti}
				x.add(quoted(tok), l)
				addNorms(x, tok, l)
			}
		}
	}
	rest := s
	for i := 0; i < n && i < maxTextLines; i++ {
		line, tail, _ := strings.Cut(rest, "\n")
		rest = tail
		addLine(strings.TrimSpace(line), TextSel{Line: i})
		if n-i <= maxTextLines {
			addLine(strings.TrimSpace(line), TextSel{Line: i - n})
		}
	}
	if n > maxTextLines {
		// The last lines, counted from the end.
		t := strings.TrimRight(s, "\r\n")
		for i := 1; i <= maxTextLines && i <= n-maxTextLines; i++ {
			j := strings.LastIndexByte(t, '\n')
			line := t[j+1:]
			t = t[:max(j, 0)]
			addLine(strings.TrimSpace(line), TextSel{Line: -i})
		}
	}
}

// rawCand is where one argument value of one call may have come from.
type rawCand struct {
	arg    string
	back   int32 // the source event, counted back from the call (1 = the one before)
	recent bool  // the source is the most recent event of its signature
	part   string
	path   string
	list   string // for a list item: the list's path (path is then inside the element)
	sel    *TextSel
	norm   string
	prefix string
	suffix string
}

// maxTemplateLen bounds the values searched for templates: a long value
// (a script in a heredoc) is not one token in a constant frame.
const maxTemplateLen = 256

// findSources appends the raw candidates of value v (canonical JSON) of
// argument arg found in an event's index.
func findSources(dst []rawCand, x evIndex, arg string, v []byte, back int32, recent bool) []rawCand {
	add := func(l loc, prefix, suffix string) {
		c := rawCand{arg: arg, back: back, recent: recent, part: l.part, path: l.path, sel: l.sel, norm: l.norm, prefix: prefix, suffix: suffix}
		dst = append(dst, c)
		// The value may be an element of a list: the same place in each
		// element of an array the path steps through.
		if len(l.arrays) > 0 {
			toks, _ := parsePointer(l.path)
			for _, a := range l.arrays {
				c2 := c
				c2.list = pointer(toks[:a])
				c2.path = pointer(toks[a+1:])
				dst = append(dst, c2)
			}
		}
	}
	for _, l := range x[string(v)] {
		add(l, "", "")
	}
	if len(v) < 2 || v[0] != '"' || len(v) > maxTemplateLen+2 {
		return dst
	}
	s, ok := unquote(v)
	if !ok {
		return dst
	}
	var buf [16]span
	try := func(sp span) {
		if sp.start == 0 && sp.end == len(s) {
			return // the whole value: found above
		}
		for _, l := range x[quoted(s[sp.start:sp.end])] {
			add(l, s[:sp.start], s[sp.end:])
		}
	}
	for _, sp := range tokenSpans(buf[:0], s) {
		try(sp)
		// The components of a path: a directory or file name joined into
		// a longer path.
		if tok := s[sp.start:sp.end]; strings.Count(tok, "/") > 0 {
			start := sp.start
			for i := sp.start; i <= sp.end; i++ {
				if i == sp.end || s[i] == '/' {
					if i > start && !(start == sp.start && i == sp.end) {
						try(span{start, i})
					}
					start = i + 1
				}
			}
		}
	}
	return dst
}
