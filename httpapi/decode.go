package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
// arguments themselves are checked fully (duplicate keys, NaN, nesting)
// when the engine makes the call key.
func DecodeCall(body []byte) (Call, error) {
	var c Call
	if i := invalidUTF8(body); i >= 0 {
		return c, badRequest("invalid UTF-8 at offset %d", i)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	tok, err := dec.Token()
	if err == io.EOF {
		return c, badRequest(`empty body; want {"tool": "...", "args": {...}}`)
	}
	if err != nil {
		return c, syntaxError(err, body)
	}
	if tok != json.Delim('{') {
		return c, badRequest(`body must be a JSON object {"tool": "...", "args": {...}}, got %s`, tokenKind(tok))
	}
	var seenTool, seenArgs bool
	for dec.More() {
		at := keyOffset(body, dec.InputOffset())
		tok, err := dec.Token()
		if err != nil {
			return c, syntaxError(err, body)
		}
		name := tok.(string) // inside an object, More() promises a key
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return c, syntaxError(err, body)
		}
		switch name {
		case "tool":
			if seenTool {
				return c, badRequest(`duplicate field "tool" at offset %d`, at)
			}
			seenTool = true
			if raw[0] != '"' {
				return c, badRequest(`"tool" must be a string, got %s`, kindOf(raw))
			}
			if err := json.Unmarshal(raw, &c.Tool); err != nil {
				return c, badRequest(`"tool": %v`, err)
			}
			if c.Tool == "" {
				return c, badRequest(`"tool" must not be empty`)
			}
		case "args":
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
			return c, badRequest(`unknown field %q at offset %d (want "tool" and "args")`, name, at)
		}
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return c, syntaxError(err, body)
	}
	if end := skipSpace(body, dec.InputOffset()); end < int64(len(body)) {
		return c, badRequest("trailing data after the JSON object at offset %d", end)
	}
	if !seenTool {
		return c, badRequest(`missing field "tool"`)
	}
	return c, nil
}

func badRequest(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrBadRequest}, args...)...)
}

// syntaxError describes a decoding error with its offset. json.Decoder's
// offsets are relative to its internal buffer and value, so the body is
// checked again as a whole, which gives the offending byte exactly.
func syntaxError(err error, body []byte) error {
	var raw json.RawMessage
	if uerr := json.Unmarshal(body, &raw); uerr != nil {
		if se, ok := errors.AsType[*json.SyntaxError](uerr); ok {
			if se.Error() == "unexpected end of JSON input" {
				return badRequest("unexpected end of JSON at offset %d", len(body))
			}
			// Offset counts the bytes read, the offending one included.
			return badRequest("invalid JSON at offset %d: %v", max(se.Offset-1, 0), se)
		}
		err = uerr
	}
	return badRequest("invalid JSON: %v", err)
}

// skipSpace returns the offset of the first byte at or after at that is
// not JSON whitespace.
func skipSpace(body []byte, at int64) int64 {
	for at < int64(len(body)) {
		switch body[at] {
		case ' ', '\t', '\r', '\n':
			at++
			continue
		}
		break
	}
	return at
}

func tokenKind(tok json.Token) string {
	switch v := tok.(type) {
	case json.Delim:
		if v == '[' {
			return "an array"
		}
		return fmt.Sprintf("%q", rune(v))
	case string:
		return "a string"
	case float64, json.Number:
		return "a number"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", tok)
}

// keyOffset returns where the key after offset starts: the decoder's
// offset is just past the previous value, before the comma.
func keyOffset(body []byte, at int64) int64 {
	for at < int64(len(body)) {
		switch body[at] {
		case ' ', '\t', '\r', '\n', ',':
			at++
			continue
		}
		break
	}
	return at
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
