// Package rawjson is the JSON scanner of the project's one JSON toolkit
// (callkey holds the canonical encoder). It reads JSON text without
// decoding it into values: it steps over members and elements, follows
// JSON pointers, decodes strings and their escapes, and tells callkey's
// canonical encoding apart from other JSON. The predictor looks up a few
// paths in outputs of up to megabytes after every call, and a full decode
// would cost more than the whole prediction budget; the HTTP API steps
// through every request body with it.
//
// The readers are forgiving: malformed input yields "not found" or a
// best-effort value, never a panic; nothing is validated that is not read.
// Its fuzz targets live with callkey's, in one corpus.
package rawjson

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// IsSpace reports whether c is JSON whitespace.
func IsSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// SkipSpace returns the index of the first byte at or after i that is not
// JSON whitespace.
func SkipSpace(data []byte, i int) int {
	for i < len(data) && IsSpace(data[i]) {
		i++
	}
	return i
}

// SkipValue returns the index just after the JSON value starting at or
// after i, or -1 if there is none.
func SkipValue(data []byte, i int) int {
	i = SkipSpace(data, i)
	if i >= len(data) {
		return -1
	}
	switch c := data[i]; c {
	case '"':
		return SkipString(data, i)
	case '{', '[':
		depth := 0
		for ; i < len(data); i++ {
			switch data[i] {
			case '"':
				j := SkipString(data, i)
				if j < 0 {
					return -1
				}
				i = j - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
		}
		return -1
	default:
		j := i
		for j < len(data) && !IsSpace(data[j]) && data[j] != ',' && data[j] != '}' && data[j] != ']' && data[j] != ':' {
			j++
		}
		if j == i {
			return -1
		}
		return j
	}
}

// SkipString returns the index after the string starting at data[i] ('"').
func SkipString(data []byte, i int) int {
	for j := i + 1; j < len(data); j++ {
		switch data[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return -1
}

// Unquote returns the content of a JSON string literal.
func Unquote(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	return unquoteBody(raw[1 : len(raw)-1])
}

// UnquoteLines decodes the first n lines of a JSON string literal (all of
// it for n < 0), and reports whether that was the whole string: a mapping
// that reads line 0 of a kilobytes-long command need not decode the rest.
func UnquoteLines(raw []byte, n int) (s string, ok, whole bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false, false
	}
	body := raw[1 : len(raw)-1]
	if n >= 0 {
		for i := 0; i+1 < len(body); i++ {
			if body[i] != '\\' {
				continue
			}
			if body[i+1] == 'n' {
				if n--; n == 0 {
					s, ok = unquoteBody(body[:i])
					return s, ok, false
				}
			}
			i++ // skip the escaped character
		}
	}
	s, ok = unquoteBody(body)
	return s, ok, true
}

// unquoteBody decodes the inside of a JSON string literal.
func unquoteBody(body []byte) (string, bool) {
	i := bytes.IndexByte(body, '\\')
	if i < 0 {
		if !utf8.Valid(body) || !NoControl(body) || bytes.IndexByte(body, '"') >= 0 {
			return "", false
		}
		return string(body), true
	}
	// Decode escapes by hand: encoding/json's reflection costs more than
	// the whole prediction budget on a few-kilobyte shell command.
	if !NoControl(body[:i]) || bytes.IndexByte(body[:i], '"') >= 0 {
		return "", false
	}
	out := make([]byte, i, len(body))
	copy(out, body[:i])
	for i < len(body) {
		c := body[i]
		switch {
		case c == '"' || c < 0x20:
			return "", false
		case c != '\\':
			out = append(out, c)
			i++
			continue
		}
		r, end, bad := Escape(body, i)
		if bad != EscapeOK {
			// A lone surrogate among them too: encoding/json would make
			// it U+FFFD, merging distinct strings; callkey rejects it.
			return "", false
		}
		out = utf8.AppendRune(out, r)
		i = end
	}
	if !utf8.Valid(out) {
		return "", false
	}
	return string(out), true
}

// EscapeError says what is wrong with an escape sequence (see Escape).
type EscapeError uint8

const (
	EscapeOK        EscapeError = iota
	EscapeCut                   // the input ends right after the backslash
	EscapeUnknown               // the character after the backslash starts no JSON escape
	EscapeHex                   // \u is not followed by four hex digits
	EscapeSurrogate             // a \u escape of half a UTF-16 surrogate pair, alone
)

// unescaped maps the character after a backslash to what it stands for,
// for every JSON escape but \u.
var unescaped = [256]rune{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

// Escape decodes the escape sequence at b[i] (a backslash) and returns its
// rune and the index after it. A \u escape of a UTF-16 surrogate must be
// one half of a pair: decoders differ on lone ones (Go's turns them into
// U+FFFD), so accepting them would let "\ud800" and "\ufffd" share a key.
func Escape(b []byte, i int) (r rune, end int, bad EscapeError) {
	if i+1 >= len(b) {
		return 0, len(b), EscapeCut
	}
	if r := unescaped[b[i+1]]; r != 0 {
		return r, i + 2, EscapeOK
	}
	if b[i+1] != 'u' {
		return 0, i + 1, EscapeUnknown
	}
	r, ok := Hex4(b, i+2)
	if !ok {
		return 0, i, EscapeHex
	}
	if !utf16.IsSurrogate(r) {
		return r, i + 6, EscapeOK
	}
	if r < 0xdc00 && i+12 <= len(b) && b[i+6] == '\\' && b[i+7] == 'u' {
		if lo, ok := Hex4(b, i+8); ok && lo >= 0xdc00 && lo < 0xe000 {
			return utf16.DecodeRune(r, lo), i + 12, EscapeOK
		}
	}
	return 0, i, EscapeSurrogate
}

// Hex4 decodes the four hex digits of a \u escape at b[i:].
func Hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// KeyEquals reports whether the raw key literal (with quotes) is key.
func KeyEquals(raw []byte, key string) bool {
	body := raw[1 : len(raw)-1]
	if bytes.IndexByte(body, '\\') < 0 {
		return string(body) == key
	}
	s, ok := Unquote(raw)
	return ok && s == key
}

// EachMember calls fn for the members of the object at data (trimmed),
// stopping when fn returns false. It returns false if data is not an
// object.
func EachMember(data []byte, fn func(key, val []byte) bool) bool {
	i := SkipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return false
	}
	i++
	for {
		i = SkipSpace(data, i)
		if i >= len(data) {
			return false
		}
		if data[i] == '}' {
			return true
		}
		if data[i] == ',' {
			i++
			continue
		}
		if data[i] != '"' {
			return false
		}
		k := SkipString(data, i)
		if k < 0 {
			return false
		}
		key := data[i:k]
		i = SkipSpace(data, k)
		if i >= len(data) || data[i] != ':' {
			return false
		}
		vs := SkipSpace(data, i+1)
		ve := SkipValue(data, vs)
		if ve < 0 {
			return false
		}
		if !fn(key, data[vs:ve]) {
			return true
		}
		i = ve
	}
}

// EachElem calls fn for the elements of the array at data, stopping when fn
// returns false. It returns false if data is not an array.
func EachElem(data []byte, fn func(i int, val []byte) bool) bool {
	i := SkipSpace(data, 0)
	if i >= len(data) || data[i] != '[' {
		return false
	}
	i++
	for n := 0; ; {
		i = SkipSpace(data, i)
		if i >= len(data) {
			return false
		}
		switch data[i] {
		case ']':
			return true
		case ',':
			i++
			continue
		}
		e := SkipValue(data, i)
		if e < 0 {
			return false
		}
		if !fn(n, data[i:e]) {
			return true
		}
		n++
		i = e
	}
}

// Member returns the value of key in the object data.
func Member(data []byte, key string) ([]byte, bool) {
	var out []byte
	found := false
	EachMember(data, func(k, v []byte) bool {
		if KeyEquals(k, key) {
			out, found = v, true
			return false
		}
		return true
	})
	return out, found
}

// Elem returns element n of the array data.
func Elem(data []byte, n int) ([]byte, bool) {
	var out []byte
	found := false
	EachElem(data, func(i int, v []byte) bool {
		if i == n {
			out, found = v, true
			return false
		}
		return true
	})
	return out, found
}

// Embedded returns the JSON document inside a string value, if the string
// holds one: outputs are often JSON documents inside strings.
func Embedded(v []byte) ([]byte, bool) {
	if len(v) == 0 || v[0] != '"' {
		return nil, false
	}
	s, ok := Unquote(v)
	if !ok {
		return nil, false
	}
	t := strings.TrimSpace(s)
	if !StartsDocument(t) {
		return nil, false
	}
	return []byte(t), true
}

// StartsDocument reports whether s (trimmed) starts like a JSON object or
// array. A text can start with '[' too (a listing: "[FILE] notes.md",
// "[DIR] src"), so an array must go on with the start of a value (or be
// cut short there).
func StartsDocument[T string | []byte](s T) bool {
	if len(s) == 0 || (s[0] != '{' && s[0] != '[') {
		return false
	}
	if s[0] == '{' {
		return true
	}
	i := 1
	for i < len(s) && IsSpace(s[i]) {
		i++
	}
	if i == len(s) {
		return true
	}
	switch c := s[i]; {
	case c == '"' || c == '{' || c == '[' || c == ']' || c == '-' || c >= '0' && c <= '9':
		return true
	}
	for _, lit := range []string{"true", "false", "null"} {
		r := string(s[i:min(len(s), i+len(lit)+1)])
		if strings.HasPrefix(r, lit) && (len(r) == len(lit) || !isWordByte(r[len(lit)])) {
			return true
		}
	}
	return false
}

func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_'
}

// Lookup follows path (decoded JSON-pointer tokens) from data. A token
// steps into an object member or, if it is a decimal number, an array
// element; a string holding a JSON document is stepped into transparently.
func Lookup(data []byte, path []string) ([]byte, bool) {
	cur := data
	for _, step := range path {
		cur = bytes.TrimSpace(cur)
		if len(cur) > 0 && cur[0] == '"' {
			doc, ok := Embedded(cur)
			if !ok {
				return nil, false
			}
			cur = doc
		}
		if len(cur) == 0 {
			return nil, false
		}
		var ok bool
		switch cur[0] {
		case '{':
			cur, ok = Member(cur, step)
		case '[':
			n, err := strconv.Atoi(step)
			if err != nil || n < 0 {
				return nil, false
			}
			cur, ok = Elem(cur, n)
		}
		if !ok {
			return nil, false
		}
	}
	return bytes.TrimSpace(cur), true
}

// ParsePointer splits a JSON pointer ("/a/0/b~1c") into its decoded
// tokens. "" is the whole document.
func ParsePointer(p string) ([]string, bool) {
	if p == "" {
		return nil, true
	}
	if p[0] != '/' {
		return nil, false
	}
	parts := strings.Split(p[1:], "/")
	for i, s := range parts {
		if strings.Contains(s, "~") {
			s = strings.ReplaceAll(s, "~1", "/")
			parts[i] = strings.ReplaceAll(s, "~0", "~")
		}
	}
	return parts, true
}

// Pointer encodes tokens as a JSON pointer.
func Pointer(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		if strings.ContainsAny(t, "~/") {
			t = strings.ReplaceAll(t, "~", "~0")
			t = strings.ReplaceAll(t, "/", "~1")
		}
		b.WriteString(t)
	}
	return b.String()
}

// NoControl reports whether b holds no control character (below 0x20).
func NoControl(b []byte) bool {
	for _, c := range b {
		if c < 0x20 {
			return false
		}
	}
	return true
}

// AppendQuoted appends s as a canonical JSON string (callkey's escaping:
// only '"', '\\' and control characters are escaped).
func AppendQuoted(buf []byte, s string) []byte {
	buf = append(buf, '"')
	buf = AppendEscaped(buf, s)
	return append(buf, '"')
}

// AppendEscaped appends the body of s's canonical JSON string, without the
// quotes: callkey's minimal escaping, which escapes only '"', '\\' and
// control characters.
func AppendEscaped(buf []byte, s string) []byte {
	for i := 0; i < len(s); {
		j := i
		for j < len(s) && s[j] >= 0x20 && s[j] != '"' && s[j] != '\\' {
			j++
		}
		buf = append(buf, s[i:j]...)
		if j == len(s) {
			break
		}
		buf = appendEscape(buf, s[j])
		i = j + 1
	}
	return buf
}

// AppendRune appends r as it appears inside a canonical JSON string.
func AppendRune(buf []byte, r rune) []byte {
	if r < 0x20 || r == '"' || r == '\\' {
		return appendEscape(buf, byte(r))
	}
	return utf8.AppendRune(buf, r)
}

// appendEscape appends the escape of c: '"', '\\' or a control character.
func appendEscape(buf []byte, c byte) []byte {
	const hex = "0123456789abcdef"
	switch c {
	case '"':
		return append(buf, '\\', '"')
	case '\\':
		return append(buf, '\\', '\\')
	case '\n':
		return append(buf, '\\', 'n')
	case '\r':
		return append(buf, '\\', 'r')
	case '\t':
		return append(buf, '\\', 't')
	}
	return append(buf, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
}

// Quoted returns s as a canonical JSON string.
func Quoted(s string) string { return string(AppendQuoted(nil, s)) }

// InvalidUTF8 returns the offset of the first invalid UTF-8 byte in b, or
// -1.
func InvalidUTF8(b []byte) int {
	if utf8.Valid(b) {
		return -1
	}
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			return i
		}
		i += n
	}
	return -1
}

// KindOf names the kind of the JSON value that starts with c, for error
// messages ("an object", "a number"), or quotes c if no value starts so.
func KindOf(c byte) string {
	switch {
	case c == '{':
		return "an object"
	case c == '[':
		return "an array"
	case c == '"':
		return "a string"
	case c == 't' || c == 'f':
		return "a boolean"
	case c == 'n':
		return "null"
	case c == '-' || (c >= '0' && c <= '9'):
		return "a number"
	}
	return fmt.Sprintf("%q", c)
}
