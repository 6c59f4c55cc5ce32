package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/ahead-dev/ahead/callkey"
)

// ErrInvalid is wrapped by every error about a policy that cannot be used.
var ErrInvalid = errors.New("invalid speculation policy")

// An Error is one problem in a policy file, with its position and the field
// it concerns. Parse returns all the problems it finds, joined with
// errors.Join; each is an *Error.
type Error struct {
	File   string // as given to Parse or FromNode; may be empty
	Line   int    // 1-based
	Column int    // 1-based; 0 when unknown (YAML syntax errors)
	Field  string // dotted path, such as speculation_policy.tools.web_search.allow; empty for syntax errors
	Msg    string
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		b.WriteByte(':')
	}
	b.WriteString(strconv.Itoa(e.Line))
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

// Unwrap returns ErrInvalid.
func (e *Error) Unwrap() error { return ErrInvalid }

// Key is the top-level key that holds the policy, in a policy file and in
// ahead's configuration file.
const Key = "speculation_policy"

// Load reads and parses the policy file at path.
func Load(path string) (*Policy, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(data, path)
}

// Parse parses a policy file: a YAML document whose only top-level key is
// speculation_policy. The filename is used in error messages only.
//
// Every error names the file, line, column and field, and all the problems
// found are reported together.
func Parse(data []byte, filename string) (*Policy, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if err == io.EOF {
			return nil, &Error{File: filename, Line: 1, Msg: "empty policy file (want a " + Key + " mapping)"}
		}
		return nil, yamlError(filename, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err != io.EOF {
		if err != nil {
			return nil, yamlError(filename, err)
		}
		return nil, &Error{File: filename, Line: extra.Line, Column: extra.Column, Msg: "a policy file holds one YAML document, found a second"}
	}
	p := &parser{file: filename}
	root := p.resolve(&doc)
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = p.resolve(root.Content[0])
	}
	var pol *Policy
	found := false
	p.mapping(root, "", func(k, v *yaml.Node, field string) {
		if k.Value != Key {
			p.errorf(k, field, "unknown top-level key (a policy file holds only %s)", Key)
			return
		}
		found = true
		pol = p.policy(v, field)
	})
	if !found && p.errs == nil {
		p.errorf(root, "", "no %s key", Key)
	}
	if err := errors.Join(p.errs...); err != nil {
		return nil, err
	}
	return pol, nil
}

// FromNode parses the value of a speculation_policy key inside a bigger
// YAML file, such as ahead's configuration. Errors name the filename, the
// node's position and the field, starting with speculation_policy.
func FromNode(node *yaml.Node, filename string) (*Policy, error) {
	if node == nil {
		return nil, &Error{File: filename, Line: 1, Field: Key, Msg: "missing"}
	}
	p := &parser{file: filename}
	pol := p.policy(node, Key)
	if err := errors.Join(p.errs...); err != nil {
		return nil, err
	}
	return pol, nil
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// yamlError turns a YAML syntax error into an *Error with its line.
func yamlError(file string, err error) error {
	msg := err.Error()
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		return &Error{File: file, Line: line, Msg: "invalid YAML: " + m[2]}
	}
	return &Error{File: file, Line: 1, Msg: "invalid YAML: " + strings.TrimPrefix(msg, "yaml: ")}
}

// parser walks the YAML tree and collects every problem it finds.
type parser struct {
	file string
	errs []error
}

func (p *parser) errorf(n *yaml.Node, field, format string, args ...any) {
	line, col := n.Line, n.Column
	if line == 0 {
		line = 1
	}
	p.errs = append(p.errs, &Error{File: p.file, Line: line, Column: col, Field: field, Msg: fmt.Sprintf(format, args...)})
}

// resolve follows aliases (*name) to the anchored node.
func (p *parser) resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n.Kind == yaml.AliasNode && n.Alias != nil && i < 100; i++ {
		n = n.Alias
	}
	return n
}

// join appends a key to a dotted field path, quoting keys that would make
// the path ambiguous.
func join(field, key string) string {
	if key == "" || strings.ContainsAny(key, ". \t\"'[]") {
		key = strconv.Quote(key)
	}
	if field == "" {
		return key
	}
	return field + "." + key
}

// mapping calls fn for each key and value of the mapping n, in file order,
// after checking that keys are strings and not repeated.
func (p *parser) mapping(n *yaml.Node, field string, fn func(k, v *yaml.Node, field string)) {
	n = p.resolve(n)
	if n.Kind != yaml.MappingNode {
		p.errorf(n, field, "want a mapping, got %s", describe(n))
		return
	}
	seen := make(map[string]*yaml.Node, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := p.resolve(n.Content[i]), n.Content[i+1]
		if k.Kind != yaml.ScalarNode || k.ShortTag() == "!!null" {
			p.errorf(k, field, "want a string key, got %s", describe(k))
			continue
		}
		if k.ShortTag() == "!!merge" {
			p.errorf(k, field, "merge keys (<<) are not supported; write the fields out")
			continue
		}
		f := join(field, k.Value)
		if prev, dup := seen[k.Value]; dup {
			p.errorf(k, f, "duplicate key (first at line %d)", prev.Line)
			continue
		}
		seen[k.Value] = k
		fn(k, v, f)
	}
}

func describe(n *yaml.Node) string {
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

func (p *parser) str(n *yaml.Node, field string) (string, bool) {
	n = p.resolve(n)
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
		p.errorf(n, field, "want a string, got %s", describe(n))
		return "", false
	}
	return n.Value, true
}

func (p *parser) boolean(n *yaml.Node, field string) (bool, bool) {
	n = p.resolve(n)
	var b bool
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" || n.Decode(&b) != nil {
		p.errorf(n, field, "want true or false, got %s", describe(n))
		return false, false
	}
	return b, true
}

var (
	fieldsPolicy = []string{"default", "tools", "deduplication"}
	fieldsTool   = []string{"allow", "max_speculation", "dry_run", "read_only", "reads", "writes", "shared", "ttl", "cancellable"}
	fieldsDryRun = []string{"tool", "args"}
	fieldsDedup  = []string{"strategy", "max_per_tool"}
	strategies   = []string{StrategyMaxUtility, StrategyMaxProbability, StrategyAll}
)

func (p *parser) unknown(k *yaml.Node, field string, want []string) {
	p.errorf(k, field, "unknown field (want %s)", list(want, "or"))
}

// list returns "a, b or c".
func list(words []string, conj string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " " + conj + " " + words[len(words)-1]
}

func (p *parser) policy(n *yaml.Node, field string) *Policy {
	pol := &Policy{Tools: make(map[string]Tool)}
	p.mapping(n, field, func(k, v *yaml.Node, f string) {
		switch k.Value {
		case "default":
			pol.Default = p.tool(v, f, "")
		case "tools":
			p.mapping(v, f, func(k, v *yaml.Node, f string) {
				name := k.Value
				if name == "" {
					p.errorf(k, f, "empty tool name")
					return
				}
				if !strings.ContainsAny(name, `*?[\`) {
					pol.Tools[name] = p.tool(v, f, name)
					return
				}
				if _, err := path.Match(name, ""); err != nil {
					p.errorf(k, f, "bad tool name pattern: %v (patterns use *, ? and [a-z] as in Go's path.Match)", err)
					return
				}
				pol.Globs = append(pol.Globs, Glob{Pattern: name, Tool: p.tool(v, f, "")})
			})
		case "deduplication":
			pol.Dedup = p.dedup(v, f)
		default:
			p.unknown(k, f, fieldsPolicy)
		}
	})
	return pol
}

func (p *parser) dedup(n *yaml.Node, field string) Dedup {
	var d Dedup
	p.mapping(n, field, func(k, v *yaml.Node, f string) {
		switch k.Value {
		case "strategy":
			s, ok := p.str(v, f)
			if !ok {
				return
			}
			for _, known := range strategies {
				if s == known {
					d.Strategy = s
					return
				}
			}
			p.errorf(v, f, "unknown strategy %q (want %s)", s, list(strategies, "or"))
		case "max_per_tool":
			v = p.resolve(v)
			var i int
			if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!int" || v.Decode(&i) != nil {
				p.errorf(v, f, "want a whole number, got %s", describe(v))
				return
			}
			if i < 1 {
				p.errorf(v, f, "must be at least 1, got %d", i)
				return
			}
			d.MaxPerTool = i
		default:
			p.unknown(k, f, fieldsDedup)
		}
	})
	return d
}

// tool parses one rule. name is the exact tool name, or "" for the default
// rule and globs (whose dry-run variant cannot be the tool itself by name).
func (p *parser) tool(n *yaml.Node, field, name string) Tool {
	var t Tool
	var levelNode, readOnlyNode, sharedNode *yaml.Node
	explicitNone := false
	p.mapping(n, field, func(k, v *yaml.Node, f string) {
		switch k.Value {
		case "allow":
			t.Allow, _ = p.boolean(v, f)
		case "max_speculation":
			s, ok := p.str(v, f)
			if !ok {
				return
			}
			l, ok := ParseLevel(s)
			if !ok {
				p.errorf(v, f, "unknown level %q (want full, dry_run, warmup or none)", s)
				return
			}
			levelNode = v
			t.MaxSpeculation = l
			explicitNone = l == LevelNone
		case "dry_run":
			t.DryRun = p.dryRun(v, f)
		case "read_only":
			if b, ok := p.boolean(v, f); ok {
				readOnlyNode = k
				t.ReadOnly = &b
			}
		case "reads", "writes":
			s, ok := p.str(v, f)
			if !ok {
				return
			}
			if s == "" {
				p.errorf(v, f, "empty argument name")
				return
			}
			if k.Value == "reads" {
				t.Reads = s
			} else {
				t.Writes = s
			}
		case "shared":
			if b, ok := p.boolean(v, f); ok {
				sharedNode = k
				t.Shared = b
			}
		case "ttl":
			t.TTL = p.ttl(v, f)
		case "cancellable":
			if b, ok := p.boolean(v, f); ok {
				t.Cancellable = &b
			}
		default:
			p.unknown(k, f, fieldsTool)
		}
	})

	// Cross-field checks: a rule must mean what it says.
	if levelNode != nil && !explicitNone && !t.Allow {
		p.errorf(levelNode, join(field, "max_speculation"), "level %s has no effect without allow: true", t.MaxSpeculation)
	}
	if explicitNone {
		// The zero MaxSpeculation means "not given" (full when allowed),
		// so an explicit none must switch the rule off.
		t.Allow = false
	}
	// A dry_run level with no declared variant (the PASTE paper's Figure 6
	// pip_install rule) is accepted as written: running the same call
	// unpatched would run its side effect, so such a tool is only ever
	// warmed up (see Tool.DryRunVariant).
	if t.ReadOnly != nil && *t.ReadOnly && t.Writes != "" {
		p.errorf(readOnlyNode, join(field, "read_only"), "a read-only tool cannot declare writes: %s", t.Writes)
	}
	if t.Shared && !t.IsReadOnly() {
		p.errorf(sharedNode, join(field, "shared"), "only read-only tools may share results across sessions (declare read_only: true, or remove writes)")
	}
	return t
}

func (p *parser) dryRun(n *yaml.Node, field string) DryRun {
	var d DryRun
	p.mapping(n, field, func(k, v *yaml.Node, f string) {
		switch k.Value {
		case "tool":
			if s, ok := p.str(v, f); ok {
				if s == "" {
					p.errorf(v, f, "empty tool name")
					return
				}
				d.Tool = s
			}
		case "args":
			v = p.resolve(v)
			if v.Kind != yaml.MappingNode {
				p.errorf(v, f, "want a mapping of arguments to set, got %s", describe(v))
				return
			}
			if len(v.Content) == 0 {
				p.errorf(v, f, "empty argument patch")
				return
			}
			budget := maxPatchNodes
			var buf []byte
			buf, ok := p.json(buf, v, f, 0, &budget)
			if !ok {
				return
			}
			c, err := callkey.Canonical(buf)
			if err != nil {
				p.errorf(v, f, "%v", err)
				return
			}
			d.Args = json.RawMessage(c)
		default:
			p.unknown(k, f, fieldsDryRun)
		}
	})
	return d
}

// maxPatchNodes bounds the JSON made from a dry-run patch, so that aliases
// referring to aliases cannot blow a small file up exponentially.
const maxPatchNodes = 10000

var jsonNumber = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)

// json appends the JSON form of a YAML value.
func (p *parser) json(buf []byte, n *yaml.Node, field string, depth int, budget *int) ([]byte, bool) {
	n = p.resolve(n)
	*budget--
	if *budget < 0 || depth > 64 {
		p.errorf(n, field, "argument patch too large or too deep")
		return buf, false
	}
	switch n.Kind {
	case yaml.MappingNode:
		buf = append(buf, '{')
		ok := true
		first := true
		nerrs := len(p.errs)
		p.mapping(n, field, func(k, v *yaml.Node, f string) {
			if !ok {
				return
			}
			if !first {
				buf = append(buf, ',')
			}
			first = false
			buf = strconv.AppendQuote(buf, k.Value)
			buf = append(buf, ':')
			buf, ok = p.json(buf, v, f, depth+1, budget)
		})
		return append(buf, '}'), ok && len(p.errs) == nerrs
	case yaml.SequenceNode:
		buf = append(buf, '[')
		for i, e := range n.Content {
			if i > 0 {
				buf = append(buf, ',')
			}
			var ok bool
			if buf, ok = p.json(buf, e, fmt.Sprintf("%s[%d]", field, i), depth+1, budget); !ok {
				return buf, false
			}
		}
		return append(buf, ']'), true
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!str", "!!timestamp":
			b, _ := json.Marshal(n.Value)
			return append(buf, b...), true
		case "!!null":
			return append(buf, "null"...), true
		case "!!bool":
			var b bool
			if n.Decode(&b) == nil {
				return strconv.AppendBool(buf, b), true
			}
		case "!!int", "!!float":
			if jsonNumber.MatchString(n.Value) {
				return append(buf, n.Value...), true // exactly as written
			}
			var f float64
			if n.Decode(&f) == nil && !math.IsInf(f, 0) && !math.IsNaN(f) {
				return strconv.AppendFloat(buf, f, 'g', -1, 64), true
			}
			p.errorf(n, field, "number %s has no JSON form", n.Value)
			return buf, false
		}
	}
	p.errorf(n, field, "%s has no JSON form", describe(n))
	return buf, false
}

func (p *parser) ttl(n *yaml.Node, field string) time.Duration {
	n = p.resolve(n)
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
		p.errorf(n, field, "want a duration such as 30s or 5m, got %s", describe(n))
		return 0
	}
	d, err := time.ParseDuration(n.Value)
	if err != nil {
		p.errorf(n, field, "want a duration such as 30s or 5m, got %q", n.Value)
		return 0
	}
	if d <= 0 {
		// Zero would silently mean the engine's default.
		p.errorf(n, field, "must be positive, got %s (omit ttl for the default)", n.Value)
		return 0
	}
	return d
}
