// Package callkey gives tool calls their identity: the tool name plus the
// canonical JSON of the arguments.
//
// Two calls are the same call if and only if their keys are equal. There is
// no fuzzy matching: canonicalisation only removes what JSON itself says is
// insignificant (whitespace and object key order). Numbers are kept exactly
// as written (1.0 and 1 are different keys), strings are compared after JSON
// unescaping (so "\u0041" and "A" are the same string), and anything that is
// not a single valid JSON object — malformed text, duplicate keys, NaN or
// Infinity, trailing data — is rejected.
//
// The standard library's encoding/json cannot do this (it round-trips
// numbers through float64 and accepts duplicate keys), and no well-kept
// library offers exact canonical JSON, so the small tokenizer-based encoder
// here is our own.
package callkey

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"slices"
	"strings"
	"unicode/utf8"
)

// ErrInvalidArgs is wrapped by every error about arguments that are not a
// canonicalisable JSON object.
var ErrInvalidArgs = errors.New("callkey: invalid arguments")

// Key identifies a call: the tool and the canonical JSON of its arguments.
// Keys are comparable; use them as map keys.
type Key struct {
	Tool string
	Args string // canonical JSON object
}

// String returns "tool(args)".
func (k Key) String() string { return k.Tool + k.Args }

var seed = maphash.MakeSeed()

// Hash returns a hash of the key, stable within one process.
func (k Key) Hash() uint64 {
	var h maphash.Hash
	h.SetSeed(seed)
	h.WriteString(k.Tool)
	h.WriteByte(0)
	h.WriteString(k.Args)
	return h.Sum64()
}

// Make returns the key of a call to tool with args. Empty or null args mean
// no arguments and canonicalise to {}.
func Make(tool string, args []byte) (Key, error) {
	if tool == "" {
		return Key{}, fmt.Errorf("%w: empty tool name", ErrInvalidArgs)
	}
	c, err := Canonical(args)
	if err != nil {
		return Key{}, err
	}
	return Key{Tool: tool, Args: string(c)}, nil
}

// Canonical returns the canonical form of a JSON object: keys sorted by
// their unescaped UTF-8 bytes, no insignificant whitespace, numbers exactly
// as written, strings re-escaped minimally. Empty input and null give {}.
func Canonical(args []byte) ([]byte, error) {
	trimmed := bytes.TrimSpace(args)
	if len(trimmed) == 0 || string(trimmed) == "null" {
		return []byte("{}"), nil
	}
	if trimmed[0] != '{' {
		return nil, fmt.Errorf("%w: arguments must be a JSON object, got %s", ErrInvalidArgs, kindOf(trimmed[0]))
	}
	v, err := CanonicalValue(trimmed)
	if err != nil {
		return nil, err
	}
	return v, nil
}

// CanonicalValue is like Canonical but accepts any JSON value, not only an
// object. The policy uses it to compare resource identifiers.
func CanonicalValue(data []byte) ([]byte, error) {
	// The decoder would silently replace invalid UTF-8 (and lone
	// surrogate escapes) with U+FFFD, making different inputs equal.
	if !utf8.Valid(data) {
		return nil, fmt.Errorf("%w: invalid UTF-8", ErrInvalidArgs)
	}
	if err := checkSurrogates(data); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidArgs, err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var buf bytes.Buffer
	buf.Grow(len(data))
	if err := writeValue(&buf, dec, 0); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidArgs, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: trailing data after the JSON value", ErrInvalidArgs)
	}
	return buf.Bytes(), nil
}

// maxDepth bounds nesting so hostile input cannot exhaust the stack.
const maxDepth = 512

func writeValue(buf *bytes.Buffer, dec *json.Decoder, depth int) error {
	if depth > maxDepth {
		return errors.New("nesting deeper than 512 levels")
	}
	tok, err := dec.Token()
	if err != nil {
		return syntaxError(err, dec)
	}
	return writeToken(buf, dec, tok, depth)
}

func writeToken(buf *bytes.Buffer, dec *json.Decoder, tok json.Token, depth int) error {
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			return writeObject(buf, dec, depth)
		case '[':
			return writeArray(buf, dec, depth)
		}
		return fmt.Errorf("unexpected %q at offset %d", t, dec.InputOffset())
	case string:
		writeString(buf, t)
	case json.Number:
		// json.Number is the literal text; the decoder has already
		// checked it is a valid JSON number (so no NaN or Infinity).
		buf.WriteString(string(t))
	case bool:
		if t {
			buf.WriteString("true")
		} else {
			buf.WriteString("false")
		}
	case nil:
		buf.WriteString("null")
	}
	return nil
}

type member struct {
	key string
	val []byte
}

func writeObject(buf *bytes.Buffer, dec *json.Decoder, depth int) error {
	var members []member
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return syntaxError(err, dec)
		}
		key, ok := tok.(string)
		if !ok {
			return fmt.Errorf("object key is not a string at offset %d", dec.InputOffset())
		}
		var val bytes.Buffer
		if err := writeValue(&val, dec, depth+1); err != nil {
			return err
		}
		members = append(members, member{key, val.Bytes()})
	}
	if _, err := dec.Token(); err != nil { // '}'
		return syntaxError(err, dec)
	}
	slices.SortFunc(members, func(a, b member) int { return strings.Compare(a.key, b.key) })
	buf.WriteByte('{')
	for i, m := range members {
		if i > 0 {
			if members[i-1].key == m.key {
				return fmt.Errorf("duplicate key %q", m.key)
			}
			buf.WriteByte(',')
		}
		writeString(buf, m.key)
		buf.WriteByte(':')
		buf.Write(m.val)
	}
	buf.WriteByte('}')
	return nil
}

func writeArray(buf *bytes.Buffer, dec *json.Decoder, depth int) error {
	buf.WriteByte('[')
	first := true
	for dec.More() {
		if !first {
			buf.WriteByte(',')
		}
		first = false
		if err := writeValue(buf, dec, depth+1); err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil { // ']'
		return syntaxError(err, dec)
	}
	buf.WriteByte(']')
	return nil
}

// writeString writes s as a JSON string with minimal escaping: only '"',
// '\\' and control characters are escaped, so equal strings always encode
// the same way. Invalid UTF-8 was already replaced by the decoder.
func writeString(buf *bytes.Buffer, s string) {
	const hex = "0123456789abcdef"
	buf.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"':
			buf.WriteString(`\"`)
		case c == '\\':
			buf.WriteString(`\\`)
		case c == '\n':
			buf.WriteString(`\n`)
		case c == '\r':
			buf.WriteString(`\r`)
		case c == '\t':
			buf.WriteString(`\t`)
		case c < 0x20:
			buf.WriteString(`\u00`)
			buf.WriteByte(hex[c>>4])
			buf.WriteByte(hex[c&0xf])
		default:
			buf.WriteByte(c)
		}
	}
	buf.WriteByte('"')
}

func syntaxError(err error, dec *json.Decoder) error {
	if err == io.EOF {
		return errors.New("unexpected end of JSON input")
	}
	return fmt.Errorf("%v (offset %d)", err, dec.InputOffset())
}

func kindOf(c byte) string {
	switch {
	case c == '[':
		return "an array"
	case c == '"':
		return "a string"
	case c == 't' || c == 'f':
		return "a boolean"
	case c == '-' || (c >= '0' && c <= '9'):
		return "a number"
	default:
		return fmt.Sprintf("%q", c)
	}
}

// checkSurrogates rejects \uXXXX escapes that encode a lone UTF-16
// surrogate: the decoder would turn them into U+FFFD, so "\ud800" and
// "\ufffd" would otherwise get the same key.
func checkSurrogates(data []byte) error {
	for i := 0; i < len(data); i++ {
		if data[i] != '\\' || i+1 >= len(data) {
			continue
		}
		if data[i+1] != 'u' {
			i++ // skip the escaped character (it may be a backslash)
			continue
		}
		r, ok := hex4(data, i+2)
		if !ok {
			continue // the decoder reports the syntax error
		}
		switch {
		case r >= 0xd800 && r < 0xdc00:
			lo, ok := uint16(0), false
			if i+11 < len(data) && data[i+6] == '\\' && data[i+7] == 'u' {
				lo, ok = hex4(data, i+8)
			}
			if !ok || lo < 0xdc00 || lo >= 0xe000 {
				return fmt.Errorf("lone UTF-16 surrogate escape at offset %d", i)
			}
			i += 11
		case r >= 0xdc00 && r < 0xe000:
			return fmt.Errorf("lone UTF-16 surrogate escape at offset %d", i)
		default:
			i += 5
		}
	}
	return nil
}

func hex4(data []byte, at int) (uint16, bool) {
	if at+4 > len(data) {
		return 0, false
	}
	var r uint16
	for _, c := range data[at : at+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | uint16(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | uint16(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | uint16(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}
