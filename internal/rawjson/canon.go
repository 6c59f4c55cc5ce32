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
		return numberEnd(b, i)
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
	var key []byte // the previous key
	for {
		if obj {
			var ok bool
			if i, key, ok = canonKeyEnd(b, i, key); !ok {
				return 0, false
			}
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

// canonKeyEnd checks the key at b[i], which must sort after prev, and the
// colon after it; it returns where the value starts, and the key.
func canonKeyEnd(b []byte, i int, prev []byte) (int, []byte, bool) {
	if i >= len(b) || b[i] != '"' {
		return 0, nil, false
	}
	ke, ok := canonStringEnd(b, i)
	if !ok {
		return 0, nil, false
	}
	key := b[i+1 : ke-1]
	if bytes.IndexByte(key, '\\') >= 0 || (prev != nil && bytes.Compare(prev, key) >= 0) {
		return 0, nil, false // escaped keys: leave their order to callkey
	}
	if ke >= len(b) || b[ke] != ':' {
		return 0, nil, false
	}
	return ke + 1, key, true
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

// numberEnd checks the JSON number grammar.
func numberEnd(b []byte, i int) (int, bool) {
	j := i
	if j < len(b) && b[j] == '-' {
		j++
	}
	switch {
	case j < len(b) && b[j] == '0':
		j++
	case j < len(b) && b[j] >= '1' && b[j] <= '9':
		for j < len(b) && b[j] >= '0' && b[j] <= '9' {
			j++
		}
	default:
		return 0, false
	}
	if j < len(b) && b[j] == '.' {
		j++
		k := j
		for j < len(b) && b[j] >= '0' && b[j] <= '9' {
			j++
		}
		if j == k {
			return 0, false
		}
	}
	if j < len(b) && (b[j] == 'e' || b[j] == 'E') {
		j++
		if j < len(b) && (b[j] == '+' || b[j] == '-') {
			j++
		}
		k := j
		for j < len(b) && b[j] >= '0' && b[j] <= '9' {
			j++
		}
		if j == k {
			return 0, false
		}
	}
	return j, true
}
