package callkey

// The reference canonicaliser: the first implementation of this package,
// built on encoding/json's tokenizer. It is slow (tens of allocations per
// call) but simple, and it leans on the standard library for JSON syntax, so
// the fuzz test uses it as an independent oracle for the hand-written parser.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode/utf8"
)

// refCanonical is Canonical as the reference defines it.
func refCanonical(args []byte) ([]byte, error) {
	trimmed := bytes.Trim(args, " \t\r\n")
	if len(trimmed) == 0 || string(trimmed) == "null" {
		return []byte("{}"), nil
	}
	v, err := refCanonicalValue(trimmed)
	if err != nil {
		return nil, err
	}
	if trimmed[0] != '{' {
		return nil, fmt.Errorf("%w: not an object", ErrInvalidArgs)
	}
	return v, nil
}

// CanonicalValue is like Canonical but accepts any JSON value, not only an
// object. The policy uses it to compare resource identifiers.
func refCanonicalValue(data []byte) ([]byte, error) {
	// The decoder would silently replace invalid UTF-8 (and lone
	// surrogate escapes) with U+FFFD, making different inputs equal.
	if !utf8.Valid(data) {
		return nil, fmt.Errorf("%w: invalid UTF-8", ErrInvalidArgs)
	}
	if err := refCheckSurrogates(data); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidArgs, err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var buf bytes.Buffer
	buf.Grow(len(data))
	if err := refWriteValue(&buf, dec, 0); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidArgs, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: trailing data after the JSON value", ErrInvalidArgs)
	}
	return buf.Bytes(), nil
}

// refMaxDepth bounds nesting so hostile input cannot exhaust the stack.
const refMaxDepth = 512

func refWriteValue(buf *bytes.Buffer, dec *json.Decoder, depth int) error {
	tok, err := dec.Token()
	if err != nil {
		return refSyntaxError(err, dec)
	}
	return refWriteToken(buf, dec, tok, depth)
}

func refWriteToken(buf *bytes.Buffer, dec *json.Decoder, tok json.Token, depth int) error {
	switch t := tok.(type) {
	case json.Delim:
		if depth+1 > refMaxDepth {
			return errors.New("nesting too deep")
		}
		switch t {
		case '{':
			return refWriteObject(buf, dec, depth)
		case '[':
			return refWriteArray(buf, dec, depth)
		}
		return fmt.Errorf("unexpected %q at offset %d", t, dec.InputOffset())
	case string:
		refWriteString(buf, t)
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

type refMember struct {
	key string
	val []byte
}

func refWriteObject(buf *bytes.Buffer, dec *json.Decoder, depth int) error {
	var members []refMember
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return refSyntaxError(err, dec)
		}
		key, ok := tok.(string)
		if !ok {
			return fmt.Errorf("object key is not a string at offset %d", dec.InputOffset())
		}
		var val bytes.Buffer
		if err := refWriteValue(&val, dec, depth+1); err != nil {
			return err
		}
		members = append(members, refMember{key, val.Bytes()})
	}
	if _, err := dec.Token(); err != nil { // '}'
		return refSyntaxError(err, dec)
	}
	slices.SortFunc(members, func(a, b refMember) int { return strings.Compare(a.key, b.key) })
	buf.WriteByte('{')
	for i, m := range members {
		if i > 0 {
			if members[i-1].key == m.key {
				return fmt.Errorf("duplicate key %q", m.key)
			}
			buf.WriteByte(',')
		}
		refWriteString(buf, m.key)
		buf.WriteByte(':')
		buf.Write(m.val)
	}
	buf.WriteByte('}')
	return nil
}

func refWriteArray(buf *bytes.Buffer, dec *json.Decoder, depth int) error {
	buf.WriteByte('[')
	first := true
	for dec.More() {
		if !first {
			buf.WriteByte(',')
		}
		first = false
		if err := refWriteValue(buf, dec, depth+1); err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil { // ']'
		return refSyntaxError(err, dec)
	}
	buf.WriteByte(']')
	return nil
}

// refWriteString writes s as a JSON string with minimal escaping: only '"',
// '\\' and control characters are escaped, so equal strings always encode
// the same way. Invalid UTF-8 was already replaced by the decoder.
func refWriteString(buf *bytes.Buffer, s string) {
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

func refSyntaxError(err error, dec *json.Decoder) error {
	if err == io.EOF {
		return errors.New("unexpected end of JSON input")
	}
	return fmt.Errorf("%v (offset %d)", err, dec.InputOffset())
}

// refCheckSurrogates rejects \uXXXX escapes that encode a lone UTF-16
// surrogate: the decoder would turn them into U+FFFD, so "\ud800" and
// "\ufffd" would otherwise get the same key.
func refCheckSurrogates(data []byte) error {
	for i := 0; i < len(data); i++ {
		if data[i] != '\\' || i+1 >= len(data) {
			continue
		}
		if data[i+1] != 'u' {
			i++ // skip the escaped character (it may be a backslash)
			continue
		}
		r, ok := refHex4(data, i+2)
		if !ok {
			continue // the decoder reports the syntax error
		}
		switch {
		case r >= 0xd800 && r < 0xdc00:
			lo, ok := uint16(0), false
			if i+11 < len(data) && data[i+6] == '\\' && data[i+7] == 'u' {
				lo, ok = refHex4(data, i+8)
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

func refHex4(data []byte, at int) (uint16, bool) {
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
