// Package callkey gives tool calls their identity: the tool name plus the
// canonical JSON of the arguments.
//
// Two calls are the same call if and only if their keys are equal. There is
// no fuzzy matching: canonicalisation only removes what JSON itself says is
// insignificant (whitespace and object key order). Numbers are kept exactly
// as written (1.0 and 1 are different keys), strings are compared after JSON
// unescaping (so "\u0041" and "A" are the same string), and anything that is
// not a single valid JSON object — malformed text, invalid UTF-8, lone UTF-16
// surrogate escapes, duplicate keys, NaN or Infinity, trailing data — is
// rejected.
//
// The standard library's encoding/json cannot do this (it round-trips
// numbers through float64, accepts duplicate keys and replaces invalid UTF-8
// silently), and no well-kept library offers exact canonical JSON, so the
// small single-pass parser here is our own. It is on the path of every call
// ahead sees, so it works in reused buffers: Make allocates only the key's
// string.
//
// It is one half of the project's one JSON toolkit; the other is
// internal/rawjson, the scanner that reads raw JSON without decoding it
// (escapes, skipping values, paths) and tells this package's canonical
// encoding from other JSON, which CanonicalView and CanonicalValueView use
// to skip re-encoding. Their fuzz targets and corpus are this package's.
// Elsewhere encoding/json serves wherever speed does not demand more.
package callkey

import (
	"bytes"
	"errors"
	"fmt"
	"hash/maphash"
	"slices"
	"sync"
	"unicode/utf8"

	"github.com/ahead-dev/ahead/internal/rawjson"
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
	p := getParser()
	defer putParser(p)
	if err := p.object(args); err != nil {
		return Key{}, err
	}
	return Key{Tool: tool, Args: string(p.out)}, nil
}

// Canonical returns the canonical form of a JSON object: keys sorted by
// their unescaped UTF-8 bytes, no insignificant whitespace, numbers exactly
// as written, strings re-escaped minimally (only '"', '\\' and control
// characters, as \" \\ \n \r \t or \u00xx). Empty input and null give {}.
func Canonical(args []byte) ([]byte, error) {
	p := getParser()
	defer putParser(p)
	if err := p.object(args); err != nil {
		return nil, err
	}
	return bytes.Clone(p.out), nil
}

// CanonicalValue is like Canonical but accepts any JSON value, not only an
// object, and gives no special meaning to empty input or null. The policy
// uses it to compare resource identifiers.
func CanonicalValue(data []byte) ([]byte, error) {
	p := getParser()
	defer putParser(p)
	if err := p.document(data); err != nil {
		return nil, err
	}
	return bytes.Clone(p.out), nil
}

// maxDepth bounds nesting (objects and arrays inside one another) so that
// hostile input cannot exhaust the stack.
const maxDepth = 512

// maxPooled is the largest buffer kept for reuse, so that one huge call
// does not pin its memory for the life of the process.
const maxPooled = 64 << 10

// member is one object member while its object is being canonicalised.
type member struct {
	key      [2]int // unescaped key: p.keys[key[0]:key[1]]
	encoding [2]int // `"key":value` as written to p.out
}

// parser canonicalises one JSON document in a single pass. Objects are
// written in input order and, when their keys are not already sorted,
// rewritten in place once their members are known; nested objects are done
// before their parents, so a member's encoding is final when it is recorded.
type parser struct {
	data    []byte
	pos     int
	depth   int
	out     []byte   // canonical output
	keys    []byte   // unescaped keys of the objects being parsed (a stack)
	members []member // members of the objects being parsed (a stack)
	tmp     []byte   // scratch for reordering an object's members
}

var parsers = sync.Pool{New: func() any { return new(parser) }}

func getParser() *parser { return parsers.Get().(*parser) }

func putParser(p *parser) {
	if cap(p.out) > maxPooled || cap(p.keys) > maxPooled || cap(p.tmp) > maxPooled || cap(p.members) > maxPooled/32 {
		return
	}
	*p = parser{out: p.out[:0], keys: p.keys[:0], members: p.members[:0], tmp: p.tmp[:0]}
	parsers.Put(p)
}

// object canonicalises call arguments: a JSON object, or nothing or null
// for no arguments.
func (p *parser) object(data []byte) error {
	p.data, p.pos = data, 0
	p.skipSpace()
	if p.pos == len(data) {
		p.out = append(p.out, "{}"...)
		return nil
	}
	c := data[p.pos]
	if c == '{' {
		return p.document(data)
	}
	// Report malformed input as such before complaining about its kind.
	if err := p.document(data); err != nil {
		return err
	}
	if c == 'n' {
		p.out = append(p.out[:0], "{}"...)
		return nil
	}
	return fmt.Errorf("%w: arguments must be a JSON object, got %s", ErrInvalidArgs, rawjson.KindOf(c))
}

// document canonicalises one JSON value with optional surrounding space.
func (p *parser) document(data []byte) error {
	p.data, p.pos = data, 0
	// Checking the whole input once is cheaper than checking each string,
	// and outside strings any non-ASCII byte is a syntax error anyway.
	if !utf8.Valid(data) {
		return p.errorf("invalid UTF-8 at offset %d", rawjson.InvalidUTF8(data))
	}
	p.skipSpace()
	if err := p.value(); err != nil {
		return err
	}
	p.skipSpace()
	if p.pos != len(data) {
		return p.errorf("trailing data after the JSON value at offset %d", p.pos)
	}
	return nil
}

func (p *parser) errorf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidArgs}, args...)...)
}

// unexpected reports the byte at p.pos (or the end of input) as wrong.
func (p *parser) unexpected(what string) error {
	if p.pos >= len(p.data) {
		return p.errorf("unexpected end of JSON input %s", what)
	}
	r, _ := utf8.DecodeRune(p.data[p.pos:])
	return p.errorf("invalid character %q %s at offset %d", r, what, p.pos)
}

// skipSpace skips JSON whitespace only: bytes.TrimSpace would also skip
// \f, \v, U+0085 and U+00A0, which JSON does not allow.
func (p *parser) skipSpace() { p.pos = rawjson.SkipSpace(p.data, p.pos) }

func (p *parser) value() error {
	if p.pos >= len(p.data) {
		return p.unexpected("looking for the beginning of a value")
	}
	switch c := p.data[p.pos]; {
	case c == '{':
		return p.parseObject()
	case c == '[':
		return p.parseArray()
	case c == '"':
		return p.parseString(false)
	case c == '-' || c >= '0' && c <= '9':
		return p.parseNumber()
	case c == 't':
		return p.literal("true")
	case c == 'f':
		return p.literal("false")
	case c == 'n':
		return p.literal("null")
	default:
		return p.unexpected("looking for the beginning of a value")
	}
}

func (p *parser) literal(lit string) error {
	if !bytes.HasPrefix(p.data[p.pos:], []byte(lit)) {
		return p.unexpected("in a literal (want " + lit + ")")
	}
	p.pos += len(lit)
	p.out = append(p.out, lit...)
	return nil
}

func (p *parser) enter() error {
	p.depth++
	if p.depth > maxDepth {
		return p.errorf("nesting deeper than %d levels at offset %d", maxDepth, p.pos)
	}
	return nil
}

func (p *parser) parseArray() error {
	if err := p.enter(); err != nil {
		return err
	}
	p.pos++ // '['
	p.out = append(p.out, '[')
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == ']' {
		p.pos++
		p.out = append(p.out, ']')
		p.depth--
		return nil
	}
	for {
		p.skipSpace()
		if err := p.value(); err != nil {
			return err
		}
		p.skipSpace()
		if p.pos >= len(p.data) {
			return p.unexpected("in an array")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
			p.out = append(p.out, ',')
		case ']':
			p.pos++
			p.out = append(p.out, ']')
			p.depth--
			return nil
		default:
			return p.unexpected("after an array element")
		}
	}
}

func (p *parser) parseObject() error {
	if err := p.enter(); err != nil {
		return err
	}
	open := p.pos
	p.pos++ // '{'
	start, keys0, members0 := len(p.out), len(p.keys), len(p.members)
	p.out = append(p.out, '{')
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == '}' {
		p.pos++
		p.out = append(p.out, '}')
		p.depth--
		return nil
	}
	for {
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != '"' {
			return p.unexpected("looking for the beginning of an object key")
		}
		enc0, key0 := len(p.out), len(p.keys)
		if err := p.parseString(true); err != nil {
			return err
		}
		key1 := len(p.keys)
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != ':' {
			return p.unexpected("after an object key")
		}
		p.pos++
		p.out = append(p.out, ':')
		p.skipSpace()
		if err := p.value(); err != nil {
			return err
		}
		p.members = append(p.members, member{key: [2]int{key0, key1}, encoding: [2]int{enc0, len(p.out)}})
		p.skipSpace()
		if p.pos >= len(p.data) {
			return p.unexpected("in an object")
		}
		if c := p.data[p.pos]; c == ',' {
			p.pos++
			p.out = append(p.out, ',')
			continue
		} else if c != '}' {
			return p.unexpected("after an object member")
		}
		p.pos++
		break
	}
	if err := p.sortMembers(open, start, p.members[members0:]); err != nil {
		return err
	}
	p.out = append(p.out, '}')
	p.keys, p.members = p.keys[:keys0], p.members[:members0]
	p.depth--
	return nil
}

// sortMembers puts the members of the object starting at p.out[start] in
// key order and rejects duplicate keys. Agents usually send keys in one
// fixed order, often already sorted, so that case costs only a comparison
// per member.
func (p *parser) sortMembers(open, start int, ms []member) error {
	cmp := func(a, b member) int {
		return bytes.Compare(p.keys[a.key[0]:a.key[1]], p.keys[b.key[0]:b.key[1]])
	}
	sorted := slices.IsSortedFunc(ms, cmp)
	if !sorted {
		slices.SortFunc(ms, cmp)
	}
	for i := 1; i < len(ms); i++ {
		if cmp(ms[i-1], ms[i]) == 0 {
			return p.errorf("duplicate key %q in the object at offset %d", p.keys[ms[i].key[0]:ms[i].key[1]], open)
		}
	}
	if sorted {
		return nil
	}
	p.tmp = append(p.tmp[:0], p.out[start:]...)
	p.out = append(p.out[:start], '{')
	for i, m := range ms {
		if i > 0 {
			p.out = append(p.out, ',')
		}
		p.out = append(p.out, p.tmp[m.encoding[0]-start:m.encoding[1]-start]...)
	}
	return nil
}

// parseNumber copies a number literal after checking it against JSON's
// grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?. Its text is
// kept as written: 1, 1.0 and 1e0 are different keys, and integers beyond
// float64's precision keep every digit.
func (p *parser) parseNumber() error {
	end, bad := rawjson.NumberEnd(p.data, p.pos)
	if bad != rawjson.NumberOK {
		p.pos = end
		switch bad {
		case rawjson.NumberDigit:
			return p.unexpected("in a number (want a digit)")
		case rawjson.NumberFraction:
			return p.unexpected("after a decimal point (want a digit)")
		}
		return p.unexpected("in an exponent (want a digit)")
	}
	p.out = append(p.out, p.data[p.pos:end]...)
	p.pos = end
	return nil
}

// parseString reads the string at p.pos and writes its canonical encoding
// to p.out; for a key it also appends the unescaped bytes to p.keys. The
// input is known to be valid UTF-8.
func (p *parser) parseString(key bool) error {
	d := p.data
	p.pos++ // opening quote
	p.out = append(p.out, '"')
	for {
		// Copy the run of bytes that need no change in one go.
		i := p.pos
		for i < len(d) && d[i] >= 0x20 && d[i] != '"' && d[i] != '\\' {
			i++
		}
		p.out = append(p.out, d[p.pos:i]...)
		if key {
			p.keys = append(p.keys, d[p.pos:i]...)
		}
		p.pos = i
		if i >= len(d) {
			return p.unexpected("in a string")
		}
		switch c := d[i]; {
		case c == '"':
			p.pos++
			p.out = append(p.out, '"')
			return nil
		case c < 0x20:
			return p.errorf("control character %q in a string at offset %d (it must be escaped)", c, i)
		}
		r, err := p.escape()
		if err != nil {
			return err
		}
		p.out = rawjson.AppendRune(p.out, r)
		if key {
			p.keys = utf8.AppendRune(p.keys, r)
		}
	}
}

// escape decodes the escape sequence at p.pos (see rawjson.Escape: lone
// UTF-16 surrogates are rejected, as decoders differ on them).
func (p *parser) escape() (rune, error) {
	at := p.pos
	r, end, bad := rawjson.Escape(p.data, at)
	switch bad {
	case rawjson.EscapeOK:
		p.pos = end
		return r, nil
	case rawjson.EscapeCut:
		p.pos = len(p.data)
		return 0, p.unexpected("in a string escape")
	case rawjson.EscapeUnknown:
		p.pos = at + 1
		return 0, p.unexpected("in a string escape")
	case rawjson.EscapeHex:
		return 0, p.errorf("invalid \\u escape at offset %d", at)
	}
	return 0, p.errorf("lone UTF-16 surrogate escape at offset %d", at)
}
