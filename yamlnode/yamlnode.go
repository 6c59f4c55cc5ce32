// Package yamlnode decodes go.yaml.in/yaml/v3 nodes with errors that say
// where the problem is: FILE:LINE:COL: field.path: message.
//
// It owns the rules that ahead's YAML files (the speculation policy, the
// serve configuration) share: a file holds one document; a mapping has
// string keys, no duplicates and no merge keys (<<), and is walked in file
// order; aliases are followed; scalars must have the YAML type asked for
// (a quoted "true" is not a boolean); and every problem is collected, so a
// file's author sees them all at once instead of one per run. What each file
// means (its fields, their cross-checks) stays with the package that reads
// it.
package yamlnode

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// An Error is one problem in a YAML file, with its position and the field
// it concerns.
type Error struct {
	File   string // as given to the Decoder; may be empty
	Line   int    // 1-based
	Column int    // 1-based; 0 when unknown (YAML syntax errors)
	Field  string // dotted path, such as speculation_policy.tools.web_search.allow; empty for the whole file
	Msg    string
}

// Error returns FILE:LINE:COL: FIELD: MSG, leaving out the file, column
// and field when they are empty.
func (e *Error) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		b.WriteByte(':')
	}
	b.WriteString(strconv.Itoa(max(e.Line, 1)))
	if e.Column > 0 {
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(e.Column))
	}
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// ErrEmpty is returned by Document for data that holds no YAML document
// (nothing, or only comments). It has no position: the caller says what
// the file should hold.
var ErrEmpty = errors.New("yamlnode: no YAML document")

// A Decoder collects the problems found while walking one file's nodes.
// The zero Decoder is ready to use; set File to name the file in errors.
type Decoder struct {
	// File is the file name put in every error; it may be empty.
	File string
	// Wrap, when not nil, turns each problem into the error the decoder
	// records and returns, so that a package can give its errors its own
	// type (policy's *Error, which wraps ErrInvalid). Nil keeps *Error.
	Wrap func(*Error) error

	errs []error // in the order found
}

func (d *Decoder) wrap(e *Error) error {
	if d.Wrap == nil {
		return e
	}
	return d.Wrap(e)
}

// Errorf records a problem at node n in the given field.
func (d *Decoder) Errorf(n *yaml.Node, field, format string, args ...any) {
	// Nodes made by the YAML parser are positioned; a hand-built one (line
	// 0) is reported on the first line rather than on none.
	d.errs = append(d.errs, d.wrap(&Error{File: d.File, Line: max(n.Line, 1), Column: n.Column, Field: field, Msg: fmt.Sprintf(format, args...)}))
}

// Add records an error found by someone else, such as another package
// reading a block of the same file, after the problems found so far.
func (d *Decoder) Add(err error) {
	if err != nil {
		d.errs = append(d.errs, err)
	}
}

// Err returns every problem recorded, joined with errors.Join in the order
// found, or nil.
func (d *Decoder) Err() error { return errors.Join(d.errs...) }

// Document decodes data, which must hold exactly one YAML document, and
// returns its root node. what names the kind of file in messages ("policy
// file"). It returns ErrEmpty when there is no document, and an *Error (or
// what Wrap makes of it) for a syntax error or a second document; such
// errors are returned, not recorded, since nothing else can be checked.
func (d *Decoder) Document(data []byte, what string) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if err == io.EOF {
			return nil, ErrEmpty
		}
		return nil, d.wrap(syntaxError(d.File, err))
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err != io.EOF {
		if err != nil {
			return nil, d.wrap(syntaxError(d.File, err))
		}
		return nil, d.wrap(&Error{File: d.File, Line: extra.Line, Column: extra.Column, Msg: "a " + what + " holds one YAML document, found a second"})
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	return Resolve(root), nil
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// syntaxError turns yaml.v3's "yaml: line N: message" into an *Error on
// line N; the parser gives no column.
func syntaxError(file string, err error) *Error {
	msg := err.Error()
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		return &Error{File: file, Line: line, Msg: "invalid YAML: " + m[2]}
	}
	return &Error{File: file, Line: 1, Msg: "invalid YAML: " + strings.TrimPrefix(msg, "yaml: ")}
}

// maxAliasHops bounds Resolve. yaml.v3 does not make an alias of an alias,
// but a hand-built or corrupted tree must not loop forever.
const maxAliasHops = 100

// Resolve follows aliases (*name) to the anchored node. It does not copy:
// a value that aliases refer to many times is walked as many times, so
// whoever turns nodes into something that grows with each visit (policy's
// argument patches) must bound the total itself.
func Resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n.Kind == yaml.AliasNode && n.Alias != nil && i < maxAliasHops; i++ {
		n = n.Alias
	}
	return n
}

// Mapping calls fn for each key and value of the mapping n, in file order,
// with the key resolved and field extended by it (see Join). Keys that are
// not strings, merge keys (<<) and repeated keys are recorded as problems
// and skipped, as is a node that is not a mapping. Mapping reports whether
// it recorded no problem itself (fn's problems are fn's to count).
func (d *Decoder) Mapping(n *yaml.Node, field string, fn func(k, v *yaml.Node, field string)) bool {
	n = Resolve(n)
	if n.Kind != yaml.MappingNode {
		d.Errorf(n, field, "want a mapping, got %s", Describe(n))
		return false
	}
	ok := true
	seen := make(map[string]*yaml.Node, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := Resolve(n.Content[i]), n.Content[i+1]
		if k.Kind != yaml.ScalarNode || k.ShortTag() == "!!null" {
			d.Errorf(k, field, "want a string key, got %s", Describe(k))
			ok = false
			continue
		}
		if k.ShortTag() == "!!merge" {
			// Merged fields would have no line of their own to blame.
			d.Errorf(k, field, "merge keys (<<) are not supported; write the fields out")
			ok = false
			continue
		}
		f := Join(field, k.Value)
		if prev, dup := seen[k.Value]; dup {
			d.Errorf(k, f, "duplicate key (first at line %d)", prev.Line)
			ok = false
			continue
		}
		seen[k.Value] = k
		fn(k, v, f)
	}
	return ok
}

// Unknown records that key k is no field of the mapping at field, listing
// the fields it may have.
func (d *Decoder) Unknown(k *yaml.Node, field string, known []string) {
	d.Errorf(k, field, "unknown field (want %s)", Or(known))
}

// Str decodes a string. A scalar of another type (7, true, null) is a
// problem: quoting it says a string was meant.
func (d *Decoder) Str(n *yaml.Node, field string) (string, bool) {
	n = Resolve(n)
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
		d.Errorf(n, field, "want a string, got %s", Describe(n))
		return "", false
	}
	return n.Value, true
}

// Bool decodes true or false.
func (d *Decoder) Bool(n *yaml.Node, field string) (bool, bool) {
	n = Resolve(n)
	var b bool
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" || n.Decode(&b) != nil {
		d.Errorf(n, field, "want true or false, got %s", Describe(n))
		return false, false
	}
	return b, true
}

// Int decodes a whole number of at least min (0 or 1 in practice: "must
// not be negative" or "must be at least 1"). It returns 0 and false on any
// problem.
func (d *Decoder) Int(n *yaml.Node, field string, min int) (int, bool) {
	n = Resolve(n)
	var i int
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" || n.Decode(&i) != nil {
		d.Errorf(n, field, "want a whole number, got %s", Describe(n))
		return 0, false
	}
	if i < min {
		if min == 0 {
			d.Errorf(n, field, "must not be negative, got %d", i)
		} else {
			d.Errorf(n, field, "must be at least %d, got %d", min, i)
		}
		return 0, false
	}
	return i, true
}

// Describe names what a node holds, for "want X, got Y" messages: "a
// mapping", "a list", "a number (7)", a quoted string, ...
func Describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.DocumentNode:
		return "an empty document"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return "nothing (null)"
		case "!!bool":
			return "a boolean (" + n.Value + ")"
		case "!!int", "!!float":
			return "a number (" + n.Value + ")"
		case "!!str":
			return strconv.Quote(n.Value)
		}
		return n.ShortTag() + " " + strconv.Quote(n.Value)
	}
	return "nothing"
}

// Join appends a key to a dotted field path, quoting keys that would make
// the path ambiguous (empty, or holding dots, blanks, quotes or brackets).
func Join(field, key string) string {
	if key == "" || strings.ContainsAny(key, ". \t\"'[]") {
		key = strconv.Quote(key)
	}
	if field == "" {
		return key
	}
	return field + "." + key
}

// Or returns the words as "a, b or c", for the choices a message offers.
func Or(words []string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}
