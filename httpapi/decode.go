package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"
)

// ErrBadRequest is wrapped by every error DecodeCall returns.
var ErrBadRequest = errors.New("bad request")

// Call is a decoded call request.
type Call struct {
	Tool string
	// Args is the arguments object as sent (not yet canonical); nil when
	// the request has no "args" or "args": null, which the engine treats
	// as no arguments ({}).
	Args json.RawMessage
}

// DecodeCall decodes a call request body: one JSON object with a
// non-empty string "tool" and an optional object "args", nothing else.
// Unknown or repeated fields, a body that is not exactly one JSON object,
// and invalid UTF-8 are errors naming what and where (byte offset). The
// arguments themselves are checked fully (duplicate keys, nesting) when
// the engine makes the call key.
//
// It is on the path of every call, so it does not use json.Decoder (whose
// Token allocates per token): the body is validated once with json.Valid,
// and its top level, known to be valid, is walked by hand.
func DecodeCall(body []byte) (Call, error) {
	var c Call
	if i := invalidUTF8(body); i >= 0 {
		return c, badRequest("invalid UTF-8 at offset %d", i)
	}
	if !json.Valid(body) {
		if len(bytes.TrimLeft(body, " \t\r\n")) == 0 {
			return c, badRequest(`empty body; want {"tool": "...", "args": {...}}`)
		}
		return c, syntaxError(body)
	}
	w := walker{data: body}
	w.space()
	if body[w.pos] != '{' {
		return c, badRequest(`body must be a JSON object {"tool": "...", "args": {...}}, got %s`, kindOf(body[w.pos:]))
	}
	w.pos++
	var seenTool, seenArgs bool
	for {
		w.space()
		if body[w.pos] == '}' {
			break
		}
		if body[w.pos] == ',' {
			w.pos++
			w.space()
		}
		at := w.pos
		key := unquote(w.value())
		w.space()
		w.pos++ // ':'
		w.space()
		raw := w.value()
		switch {
		case key == "tool":
			if seenTool {
				return c, badRequest(`duplicate field "tool" at offset %d`, at)
			}
			seenTool = true
			if raw[0] != '"' {
				return c, badRequest(`"tool" must be a string, got %s`, kindOf(raw))
			}
			c.Tool = unquote(raw)
			if c.Tool == "" {
				return c, badRequest(`"tool" must not be empty`)
			}
		case key == "args":
			if seenArgs {
				return c, badRequest(`duplicate field "args" at offset %d`, at)
			}
			seenArgs = true
			switch raw[0] {
			case '{':
				c.Args = raw
			case 'n':
				c.Args = nil
			default:
				return c, badRequest(`"args" must be a JSON object, got %s`, kindOf(raw))
			}
		default:
			return c, badRequest(`unknown field %q at offset %d (want "tool" and "args")`, key, at)
		}
	}
	if !seenTool {
		return c, badRequest(`missing field "tool"`)
	}
	return c, nil
}

// walker steps through JSON already known to be valid.
type walker struct {
	data []byte
	pos  int
}

func (w *walker) space() {
	for w.pos < len(w.data) {
		switch w.data[w.pos] {
		case ' ', '\t', '\r', '\n':
			w.pos++
		default:
			return
		}
	}
}

// value returns the value at pos as written, and moves past it.
func (w *walker) value() []byte {
	start := w.pos
	switch w.data[w.pos] {
	case '"':
		w.str()
	case '{', '[':
		for depth := 0; ; {
			switch w.data[w.pos] {
			case '"':
				w.str()
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
			}
			w.pos++
			if depth == 0 {
				break
			}
		}
	default: // a number or a literal
		for w.pos < len(w.data) {
			switch w.data[w.pos] {
			case ',', '}', ']', ' ', '\t', '\r', '\n':
				return w.data[start:w.pos]
			}
			w.pos++
		}
	}
	return w.data[start:w.pos]
}

// str moves past the string at pos.
func (w *walker) str() {
	w.pos++
	for w.data[w.pos] != '"' {
		if w.data[w.pos] == '\\' {
			w.pos++
		}
		w.pos++
	}
	w.pos++
}

// unquote decodes a valid JSON string literal.
func unquote(raw []byte) string {
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw[1 : len(raw)-1])
	}
	var s string
	json.Unmarshal(raw, &s) // valid, so it cannot fail
	return s
}

func badRequest(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrBadRequest}, args...)...)
}

// syntaxError describes why body is not valid JSON, with the offset of
// the offending byte.
func syntaxError(body []byte) error {
	var raw json.RawMessage
	err := json.Unmarshal(body, &raw)
	if se, ok := errors.AsType[*json.SyntaxError](err); ok {
		if se.Error() == "unexpected end of JSON input" {
			return badRequest("unexpected end of JSON at offset %d", len(body))
		}
		// Offset counts the bytes read, the offending one included.
		return badRequest("invalid JSON at offset %d: %v", max(se.Offset-1, 0), se)
	}
	return badRequest("invalid JSON: %v", err)
}

// kindOf names the kind of a JSON value from its first byte.
func kindOf(raw json.RawMessage) string {
	switch raw[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// invalidUTF8 returns the offset of the first invalid UTF-8 byte, or -1.
// encoding/json would replace it silently, changing the tool name or the
// arguments the agent sent.
func invalidUTF8(b []byte) int {
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
