package rawjson

import (
	"bytes"
	"unicode/utf8"
)

// IsCanonical reports whether b is a JSON object exactly as callkey would
// encode it. It may say no to some canonical input (keys with escapes),
// never yes to other input.
func IsCanonical(b []byte) bool {
	if len(b) < 2 || b[0] != '{' || !utf8.Valid(b) {
		return false
	}
	end, ok := CanonicalEnd(b, 0, 0)
	return ok && end == len(b)
}

// CanonicalEnd checks the canonical value at b[i:] and returns its end.
func CanonicalEnd(b []byte, i, depth int) (int, bool) {
	if i >= len(b) || depth > 512 {
		return 0, false
	}
	switch c := b[i]; {
	case c == '{' || c == '[':
		return canonContainerEnd(b, i, depth)
	case c == '"':
		return canonStringEnd(b, i)
	case c == 't':
		return literalEnd(b, i, "true")
	case c == 'f':
		return literalEnd(b, i, "false")
	case c == 'n':
		return literalEnd(b, i, "null")
	default:
		end, bad := NumberEnd(b, i)
		return end, bad == NumberOK
	}
}

// canonContainerEnd checks the canonical object or array at b[i].
func canonContainerEnd(b []byte, i, depth int) (int, bool) {
	obj := b[i] == '{'
	closer := byte(']')
	if obj {
		closer = '}'
	}
	i++
	if i < len(b) && b[i] == closer {
		return i + 1, true
	}
	var prev []byte // the previous key
	for {
		if obj {
			if i >= len(b) || b[i] != '"' {
				return 0, false
			}
			ke, ok := canonStringEnd(b, i)
			if !ok {
				return 0, false
			}
			key := b[i+1 : ke-1]
			if bytes.IndexByte(key, '\\') >= 0 || (prev != nil && bytes.Compare(prev, key) >= 0) {
				return 0, false // escaped keys: leave their order to callkey
			}
			prev = key
			if ke >= len(b) || b[ke] != ':' {
				return 0, false
			}
			i = ke + 1
		}
		ve, ok := CanonicalEnd(b, i, depth+1)
		if !ok || ve >= len(b) {
			return 0, false
		}
		switch b[ve] {
		case ',':
			i = ve + 1
		case closer:
			return ve + 1, true
		default:
			return 0, false
		}
	}
}

func literalEnd(b []byte, i int, lit string) (int, bool) {
	if bytes.HasPrefix(b[i:], []byte(lit)) {
		return i + len(lit), true
	}
	return 0, false
}

// canonStringEnd checks a string with callkey's minimal escaping.
func canonStringEnd(b []byte, i int) (int, bool) {
	const hex = "0123456789abcdef"
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			return j + 1, true
		case c < 0x20:
			return 0, false
		case c == '\\':
			if j+1 >= len(b) {
				return 0, false
			}
			switch b[j+1] {
			case '"', '\\', 'n', 'r', 't':
				j++
			case 'u':
				// Only control characters other than \n, \r, \t.
				if j+5 >= len(b) || b[j+2] != '0' || b[j+3] != '0' || (b[j+4] != '0' && b[j+4] != '1') || bytes.IndexByte([]byte(hex), b[j+5]) < 0 {
					return 0, false
				}
				if v := (b[j+4]-'0')<<4 | hexVal(b[j+5]); v == '\n' || v == '\r' || v == '\t' {
					return 0, false
				}
				j += 5
			default:
				return 0, false
			}
		}
	}
	return 0, false
}

func hexVal(c byte) byte {
	if c >= 'a' {
		return c - 'a' + 10
	}
	return c - '0'
}

// NumberError says where a number breaks JSON's grammar (see NumberEnd).
type NumberError uint8

const (
	NumberOK       NumberError = iota
	NumberDigit                // no digit where the number starts (after any '-')
	NumberFraction             // no digit after the decimal point
	NumberExponent             // no digit in the exponent
)

// NumberEnd checks the number at b[i:] against JSON's grammar,
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?, and returns its end; or,
// if it breaks the grammar, where and how.
func NumberEnd(b []byte, i int) (int, NumberError) {
	j := i
	if j < len(b) && b[j] == '-' {
		j++
	}
	switch {
	case j < len(b) && b[j] == '0':
		j++
	case j < len(b) && b[j] >= '1' && b[j] <= '9':
		j = digitsEnd(b, j)
	default:
		return j, NumberDigit
	}
	if j < len(b) && b[j] == '.' {
		k := j + 1
		if j = digitsEnd(b, k); j == k {
			return j, NumberFraction
		}
	}
	if j < len(b) && (b[j] == 'e' || b[j] == 'E') {
		j++
		if j < len(b) && (b[j] == '+' || b[j] == '-') {
			j++
		}
		k := j
		if j = digitsEnd(b, k); j == k {
			return j, NumberExponent
		}
	}
	return j, NumberOK
}

// digitsEnd returns the end of the run of decimal digits at b[i:].
func digitsEnd(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}
