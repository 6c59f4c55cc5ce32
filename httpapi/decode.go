package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/ahead-dev/ahead/internal/rawjson"
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
// Token allocates per token; BenchmarkHandler): the body is validated once
// with json.Valid, and its top level, known to be valid, is stepped through
// with rawjson's scanner.
func DecodeCall(body []byte) (Call, error) {
	var c Call
	if i := rawjson.InvalidUTF8(body); i >= 0 {
		return c, badRequest("invalid UTF-8 at offset %d", i)
	}
	if !json.Valid(body) {
		if len(bytes.TrimLeft(body, " \t\r\n")) == 0 {
			return c, badRequest(`empty body; want {"tool": "...", "args": {...}}`)
		}
		return c, syntaxError(body)
	}
	i := rawjson.SkipSpace(body, 0)
	if body[i] != '{' {
		return c, badRequest(`body must be a JSON object {"tool": "...", "args": {...}}, got %s`, rawjson.KindOf(body[i]))
	}
	var seenTool, seenArgs bool
	for i++; ; {
		i = rawjson.SkipSpace(body, i)
		if body[i] == '}' {
			break
		}
		if body[i] == ',' {
			i = rawjson.SkipSpace(body, i+1)
		}
		at := i
		i = rawjson.SkipString(body, at)
		key := unquote(body[at:i])
		start := rawjson.SkipSpace(body, rawjson.SkipSpace(body, i)+1) // past ':'
		i = rawjson.SkipValue(body, start)
		raw := body[start:i]
		switch {
		case key == "tool":
			if seenTool {
				return c, badRequest(`duplicate field "tool" at offset %d`, at)
			}
			seenTool = true
			if raw[0] != '"' {
				return c, badRequest(`"tool" must be a string, got %s`, rawjson.KindOf(raw[0]))
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
				return c, badRequest(`"args" must be a JSON object, got %s`, rawjson.KindOf(raw[0]))
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

// unquote decodes a valid JSON string literal. Escapes are rare in these
// names, so encoding/json decodes them; unlike rawjson.Unquote it accepts a
// lone surrogate escape (as U+FFFD), as this API always has.
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
