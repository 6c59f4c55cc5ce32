// Package text reads text values (shell output, commands, free-text
// fields) by line and token, as mined mappings select them and the index
// evaluates them: both sides must cut a text the same way.
//
// A token is a maximal run of letters, digits, non-ASCII bytes
// and the characters _ . / - ~ + @ # %: identifiers, numbers, file paths
// and ids survive whole, while punctuation such as quotes, colons,
// brackets, '=', '>' and '|' separates them ("src/a.py:74:def f():" has the
// tokens src/a.py, 74, def and f).
package text

import (
	"path"
	"strings"
)

// IsTokenByte reports whether c belongs to a token. Every package that
// cuts text into tokens (pattern's mappings, the miner, the conversation
// model) asks it, so that all cut a text the same way.
func IsTokenByte(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c >= 0x80:
		return true
	}
	switch c {
	case '_', '.', '/', '-', '~', '+', '@', '#', '%':
		return true
	}
	return false
}

// Span is a token's byte range in its line.
type Span struct{ Start, End int }

// TokenSpans appends the spans of the tokens of line to dst.
func TokenSpans(dst []Span, line string) []Span {
	for i, j := nextToken(line, 0); i < len(line); i, j = nextToken(line, j) {
		dst = append(dst, Span{i, j})
	}
	return dst
}

// nextToken returns the span of line's first token at or after from;
// start is len(line) when there is none.
func nextToken(line string, from int) (start, end int) {
	start = from
	for start < len(line) && !IsTokenByte(line[start]) {
		start++
	}
	end = start
	for end < len(line) && IsTokenByte(line[end]) {
		end++
	}
	return start, end
}

// MaxLines bounds how far from either end of a text a line selector
// reaches: a value is found near the top or the bottom of an output, never
// at "line 3017" of it.
const MaxLines = 32

// LineCount returns the number of lines of s, ignoring trailing newlines.
func LineCount(s string) int {
	s = strings.TrimRight(s, "\r\n")
	if s == "" {
		return 0
	}
	return strings.Count(s, "\n") + 1
}

// LineAt returns line n of s (n < 0 counts from the end: -1 is the last
// line), trimmed, ignoring trailing newlines. It scans only as far as it
// must.
func LineAt(s string, n int) (string, bool) {
	// strings.TrimRight(s, "\r\n"), which cost more than the rest:
	// mining selects a line at every evaluation of a template.
	end := len(s)
	for end > 0 && (s[end-1] == '\n' || s[end-1] == '\r') {
		end--
	}
	s = s[:end]
	if s == "" {
		return "", false
	}
	if n >= 0 {
		for ; n > 0; n-- {
			i := strings.IndexByte(s, '\n')
			if i < 0 {
				return "", false
			}
			s = s[i+1:]
		}
		if i := strings.IndexByte(s, '\n'); i >= 0 {
			s = s[:i]
		}
		return strings.TrimSpace(s), true
	}
	for ; n < -1; n++ {
		i := strings.LastIndexByte(s, '\n')
		if i < 0 {
			return "", false
		}
		s = s[:i]
	}
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return strings.TrimSpace(s), true
}

// TokenAt returns token n of line (n < 0 counts from the end): the
// tokens of TokenSpans, scanned only as far as n, from the end when it
// counts from there.
func TokenAt(line string, n int) (string, bool) {
	if n >= 0 {
		for i, j := nextToken(line, 0); i < len(line); i, j = nextToken(line, j) {
			if n == 0 {
				return line[i:j], true
			}
			n--
		}
		return "", false
	}
	for j := len(line); j > 0; {
		if !IsTokenByte(line[j-1]) {
			j--
			continue
		}
		i := j
		for i > 0 && IsTokenByte(line[i-1]) {
			i--
		}
		if n == -1 {
			return line[i:j], true
		}
		n++
		j = i
	}
	return "", false
}

// The normalisations a selected string may get before it is placed in
// its template (pattern.NormLower and the others are these names).
const (
	None  = ""
	Lower = "lower" // strings.ToLower
	Upper = "upper" // strings.ToUpper
	Clean = "clean" // path.Clean: "./a//b/" → "a/b"
	Base  = "base"  // path.Base: "src/a.py" → "a.py"
	Dir   = "dir"   // path.Dir: "src/a.py" → "src"
)

// Normalize applies the normalisation named norm to s; ok is false for
// a name it does not know.
func Normalize(s, norm string) (string, bool) {
	switch norm {
	case None:
		return s, true
	case Lower:
		return strings.ToLower(s), true
	case Upper:
		return strings.ToUpper(s), true
	case Clean:
		return path.Clean(s), true
	case Base:
		return path.Base(s), true
	case Dir:
		return path.Dir(s), true
	}
	return "", false
}
