package pattern

import (
	"path"
	"strings"
)

// Text values (shell output, commands, free-text fields) are read by line
// and token. A token is a maximal run of letters, digits, non-ASCII bytes
// and the characters _ . / - ~ + @ # %: identifiers, numbers, file paths
// and ids survive whole, while punctuation such as quotes, colons,
// brackets, '=', '>' and '|' separates them ("src/a.py:74:def f():" has the
// tokens src/a.py, 74, def and f).

func isTokenByte(c byte) bool {
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

// span is a token's byte range in its line.
type span struct{ start, end int }

// tokenSpans appends the spans of the tokens of line to dst.
func tokenSpans(dst []span, line string) []span {
	for i := 0; i < len(line); {
		if !isTokenByte(line[i]) {
			i++
			continue
		}
		j := i
		for j < len(line) && isTokenByte(line[j]) {
			j++
		}
		dst = append(dst, span{i, j})
		i = j
	}
	return dst
}

// maxTextLines bounds how far from either end of a text a line selector
// reaches: a value is found near the top or the bottom of an output, never
// at "line 3017" of it.
const maxTextLines = 32

// lineCount returns the number of lines of s, ignoring trailing newlines.
func lineCount(s string) int {
	s = strings.TrimRight(s, "\r\n")
	if s == "" {
		return 0
	}
	return strings.Count(s, "\n") + 1
}

// lineAt returns line n of s (n < 0 counts from the end: -1 is the last
// line), trimmed, ignoring trailing newlines. It scans only as far as it
// must.
func lineAt(s string, n int) (string, bool) {
	s = strings.TrimRight(s, "\r\n")
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

// tokenAt returns token n of line (n < 0 counts from the end).
func tokenAt(line string, n int) (string, bool) {
	var buf [32]span
	spans := tokenSpans(buf[:0], line)
	if n < 0 {
		n += len(spans)
	}
	if n < 0 || n >= len(spans) {
		return "", false
	}
	return line[spans[n].start:spans[n].end], true
}

// Norm names a normalisation applied to a selected string before it is
// placed in its template.
const (
	NormNone  = ""
	NormLower = "lower" // strings.ToLower
	NormUpper = "upper" // strings.ToUpper
	NormClean = "clean" // path.Clean: "./a//b/" → "a/b"
	NormBase  = "base"  // path.Base: "src/a.py" → "a.py"
	NormDir   = "dir"   // path.Dir: "src/a.py" → "src"
)

func normalize(s, norm string) (string, bool) {
	switch norm {
	case NormNone:
		return s, true
	case NormLower:
		return strings.ToLower(s), true
	case NormUpper:
		return strings.ToUpper(s), true
	case NormClean:
		return path.Clean(s), true
	case NormBase:
		return path.Base(s), true
	case NormDir:
		return path.Dir(s), true
	}
	return "", false
}
