package tooldef

import (
	"bytes"
	"encoding/json"
	"regexp"
	"slices"
	"strings"

	"github.com/ahead-dev/ahead/trace"
)

// tool is a declared tool, compiled: the words that say what it does and
// its arguments.
type tool struct {
	name string
	// nameWords are the words of its name (read_text_file: read, text,
	// file), descWords those of its description, stopwords left out.
	nameWords, descWords []string
	args                 []*arg
}

// arg is an argument of a declared tool, as its schema describes it.
type arg struct {
	name string
	// words are the words of its name and its description.
	words    []string
	typ      string // "string", "integer", "number", "boolean", "" (any)
	list     bool   // an array of typ: a single value is sent as a list of one
	required bool
	// enum holds the values it may take (const: one), as JSON and as the
	// lower-case text a message would say.
	enum     []json.RawMessage
	enumText []string
	pattern  *regexp.Regexp
	format   string
	// shapes are the shapes of its examples (and of its default, which
	// is a value of the same kind).
	shapes  []string
	minimum *float64
	maximum *float64
	// implied is the format its words imply (nameFormats), if any.
	implied string
}

// maxPattern bounds a pattern compiled from a schema (RE2 runs in linear
// time; this bounds its size).
const maxPattern = 512

// compile reads a declaration. A schema it cannot read leaves the tool
// without arguments (it is then predicted only without any).
func compile(defs []trace.ToolDef) []*tool {
	out := make([]*tool, 0, len(defs))
	for _, d := range defs {
		t := &tool{name: d.Name, nameWords: words(d.Name, nil), descWords: words(d.Description, nil)}
		var s struct {
			Properties map[string]json.RawMessage `json:"properties"`
			Required   []string                   `json:"required"`
		}
		if len(d.InputSchema) > 0 && json.Unmarshal(d.InputSchema, &s) == nil {
			for _, n := range propertyOrder(d.InputSchema, s.Properties) {
				t.args = append(t.args, compileArg(n, s.Properties[n], slices.Contains(s.Required, n)))
			}
		}
		out = append(out, t)
	}
	return out
}

// property is the part of a JSON schema an argument's values are read
// against.
type property struct {
	Type        json.RawMessage   `json:"type"`
	Description string            `json:"description"`
	Enum        []json.RawMessage `json:"enum"`
	Const       json.RawMessage   `json:"const"`
	Pattern     string            `json:"pattern"`
	Format      string            `json:"format"`
	Examples    []json.RawMessage `json:"examples"`
	Example     json.RawMessage   `json:"example"`
	Default     json.RawMessage   `json:"default"`
	Minimum     *float64          `json:"minimum"`
	Maximum     *float64          `json:"maximum"`
	Items       *property         `json:"items"`
}

func compileArg(name string, raw json.RawMessage, required bool) *arg {
	a := &arg{name: name, required: required, words: words(name, nil)}
	var p property
	if json.Unmarshal(raw, &p) != nil {
		a.typ = "object" // unreadable: never filled
		return a
	}
	a.words = words(p.Description, a.words)
	a.typ = typeOf(p.Type)
	if a.typ == "array" && p.Items != nil {
		if it := typeOf(p.Items.Type); it == "string" || it == "integer" || it == "number" {
			// A list of scalars: the items' constraints are what a
			// message names.
			a.list, a.typ = true, it
			desc := p.Description
			p = *p.Items
			a.words = words(p.Description, a.words)
			p.Description = desc
		}
	}
	if p.Const != nil {
		p.Enum = []json.RawMessage{p.Const}
	}
	for _, v := range p.Enum {
		var s string
		if json.Unmarshal(v, &s) != nil {
			s = string(v) // a number or a boolean, said as written
		}
		if s = strings.ToLower(strings.TrimSpace(s)); s != "" {
			a.enum = append(a.enum, v)
			a.enumText = append(a.enumText, s)
		}
	}
	if p.Pattern != "" && len(p.Pattern) <= maxPattern {
		a.pattern, _ = regexp.Compile(p.Pattern) // a pattern RE2 cannot read says nothing
	}
	a.format = p.Format
	if p.Example != nil {
		p.Examples = append(p.Examples, p.Example)
	}
	if p.Default != nil {
		p.Examples = append(p.Examples, p.Default)
	}
	for _, ex := range p.Examples {
		var s string
		if json.Unmarshal(ex, &s) == nil && s != "" {
			a.shapes = append(a.shapes, shape(s))
		}
	}
	a.minimum, a.maximum = p.Minimum, p.Maximum
	for _, w := range a.words {
		if kind, ok := nameFormats[w]; ok {
			a.implied = kind
			break
		}
	}
	return a
}

// typeOf reads a schema's type: a name, or a list of names (the first
// that is not "null").
func typeOf(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var l []string
	if json.Unmarshal(raw, &l) == nil {
		for _, s := range l {
			if s != "null" {
				return s
			}
		}
	}
	return ""
}

// fillable reports whether a's values can be read from a message: a
// scalar, or a list of them, whose enum (if any) holds strings or
// numbers said as written.
func (a *arg) fillable() bool {
	switch a.typ {
	case "string", "integer", "number", "":
		return true
	case "boolean":
		return len(a.enum) > 0
	}
	return false
}

// propertyOrder returns the names of props in the order the schema
// declares them (a tool's author lists "from" before "to", "a" before
// "b", as users say them), read from the raw schema.
func propertyOrder(schema json.RawMessage, props map[string]json.RawMessage) []string {
	var top map[string]json.RawMessage
	var names []string
	if json.Unmarshal(schema, &top) == nil {
		dec := json.NewDecoder(bytes.NewReader(top["properties"]))
		if t, err := dec.Token(); err == nil && t == json.Delim('{') {
			for dec.More() {
				t, err := dec.Token()
				k, ok := t.(string)
				if err != nil || !ok {
					break
				}
				if _, ok := props[k]; ok && !slices.Contains(names, k) {
					names = append(names, k)
				}
				var skip json.RawMessage
				if dec.Decode(&skip) != nil {
					break
				}
			}
		}
	}
	if len(names) != len(props) {
		// Not read in order: sorted, so that it is the same every time.
		names = names[:0]
		for n := range props {
			names = append(names, n)
		}
		slices.Sort(names)
	}
	return names
}
