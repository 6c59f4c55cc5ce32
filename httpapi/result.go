package httpapi

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/ahead-dev/ahead/engine"
)

// appendResult appends the answer to a served call:
//
//	{"tool":…,"status":"ok"|"error","output":…,"source":…,"saved_ms":…,"seq":…}
//
// It is written by hand because it is on the path of every call and
// encoding/json would reflect over a struct and copy the output twice.
func appendResult(b []byte, res engine.Result) []byte {
	b = append(b, `{"tool":`...)
	b = appendString(b, res.Tool)
	b = append(b, `,"status":`...)
	b = appendString(b, string(res.Status))
	b = append(b, `,"output":`...)
	b = appendOutput(b, res.Output)
	b = append(b, `,"source":`...)
	b = appendString(b, string(res.Source))
	b = append(b, `,"saved_ms":`...)
	b = strconv.AppendFloat(b, float64(res.Saved)/float64(time.Millisecond), 'f', -1, 64)
	b = append(b, `,"seq":`...)
	b = strconv.AppendInt(b, int64(res.Seq), 10)
	return append(b, "}\n"...)
}

// appendOutput appends a backend's output as a JSON value: the output
// itself, compacted, when it is a valid JSON document, else the output as
// a JSON string. The agent thus gets JSON results as structured values and
// everything else verbatim.
func appendOutput(b []byte, out string) []byte {
	if utf8.ValidString(out) {
		buf := bytes.NewBuffer(b)
		if json.Compact(buf, []byte(out)) == nil {
			return buf.Bytes()
		}
	}
	return appendString(b, out)
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string. Unlike encoding/json it leaves
// <, > and & alone (the answer is data, not HTML); like it, it replaces
// invalid UTF-8 with U+FFFD, which JSON cannot carry.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
