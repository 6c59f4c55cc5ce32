package policy

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/ahead-dev/ahead/callkey"
	"github.com/ahead-dev/ahead/yamlnode"
)

// ErrInvalid is wrapped by every error about a policy that cannot be used.
var ErrInvalid = errors.New("invalid speculation policy")

// An Error is one problem in a policy file, with its position and the field
// it concerns: File (as given to Parse or FromNode; may be empty), Line
// (1-based), Column (1-based; 0 for YAML syntax errors, which have none),
// Field (a dotted path such as speculation_policy.tools.web_search.allow;
// empty for problems with the whole file) and Msg. Parse returns all the
// problems it finds, joined with errors.Join; each is an *Error.
//
// It has yamlnode.Error's fields and text, as a type of its own so that it
// can wrap ErrInvalid.
type Error yamlnode.Error

// Error returns FILE:LINE:COL: FIELD: MSG.
func (e *Error) Error() string { return (*yamlnode.Error)(e).Error() }

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
	p := newParser(filename)
	root, err := p.Document(data, "policy file")
	if errors.Is(err, yamlnode.ErrEmpty) {
		return nil, &Error{File: filename, Line: 1, Msg: "empty policy file (want a " + Key + " mapping)"}
	}
	if err != nil {
		return nil, err
	}
	var pol *Policy
	found := false
	p.Mapping(root, "", func(k, v *yaml.Node, field string) {
		if k.Value != Key {
			p.Errorf(k, field, "unknown top-level key (a policy file holds only %s)", Key)
			return
		}
		found = true
		pol = p.policy(v, field)
	})
	if err := p.Err(); err != nil {
		return nil, err
	}
	if !found {
		p.Errorf(root, "", "no %s key", Key)
		return nil, p.Err()
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
	p := newParser(filename)
	pol := p.policy(node, Key)
	if err := p.Err(); err != nil {
		return nil, err
	}
	return pol, nil
}

// parser walks the YAML tree and collects every problem it finds, as
// *Error.
type parser struct {
	yamlnode.Decoder
}

func newParser(file string) *parser {
	return &parser{yamlnode.Decoder{File: file, Wrap: func(e *yamlnode.Error) error { return (*Error)(e) }}}
}

var (
	fieldsPolicy = []string{"default", "tools", "deduplication"}
	fieldsTool   = []string{"allow", "max_speculation", "dry_run", "read_only", "reads", "writes", "shared", "ttl", "volatile", "cancellable", "private"}
	fieldsRef    = []string{"arg", "as"}
	fieldsDryRun = []string{"tool", "args"}
	fieldsDedup  = []string{"strategy", "max_per_tool"}
	strategies   = []string{StrategyMaxUtility, StrategyMaxProbability, StrategyAll}
)

func (p *parser) policy(n *yaml.Node, field string) *Policy {
	pol := &Policy{Tools: make(map[string]Tool)}
	p.Mapping(n, field, func(k, v *yaml.Node, f string) {
		switch k.Value {
		case "default":
			pol.Default = p.tool(v, f, "")
		case "tools":
			p.Mapping(v, f, func(k, v *yaml.Node, f string) {
				name := k.Value
				if name == "" {
					p.Errorf(k, f, "empty tool name")
					return
				}
				if !strings.ContainsAny(name, `*?[\`) {
					pol.Tools[name] = p.tool(v, f, name)
					return
				}
				if _, err := path.Match(name, ""); err != nil {
					p.Errorf(k, f, "bad tool name pattern: %v (patterns use *, ? and [a-z] as in Go's path.Match)", err)
					return
				}
				pol.Globs = append(pol.Globs, Glob{Pattern: name, Tool: p.tool(v, f, "")})
			})
		case "deduplication":
			pol.Dedup = p.dedup(v, f)
		default:
			p.Unknown(k, f, fieldsPolicy)
		}
	})
	return pol
}

func (p *parser) dedup(n *yaml.Node, field string) Dedup {
	var d Dedup
	p.Mapping(n, field, func(k, v *yaml.Node, f string) {
		switch k.Value {
		case "strategy":
			s, ok := p.Str(v, f)
			if !ok {
				return
			}
			for _, known := range strategies {
				if s == known {
					d.Strategy = s
					return
				}
			}
			p.Errorf(v, f, "unknown strategy %q (want %s)", s, yamlnode.Or(strategies))
		case "max_per_tool":
			d.MaxPerTool, _ = p.Int(v, f, 1)
		default:
			p.Unknown(k, f, fieldsDedup)
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
	p.Mapping(n, field, func(k, v *yaml.Node, f string) {
		switch k.Value {
		case "allow":
			t.Allow, _ = p.Bool(v, f)
		case "max_speculation":
			s, ok := p.Str(v, f)
			if !ok {
				return
			}
			l, ok := ParseLevel(s)
			if !ok {
				p.Errorf(v, f, "unknown level %q (want full, dry_run, warmup or none)", s)
				return
			}
			levelNode = v
			t.MaxSpeculation = l
			explicitNone = l == LevelNone
		case "dry_run":
			t.DryRun = p.dryRun(v, f)
		case "read_only":
			if b, ok := p.Bool(v, f); ok {
				readOnlyNode = k
				t.ReadOnly = &b
			}
		case "reads", "writes":
			refs := p.refs(v, f)
			if k.Value == "reads" {
				t.Reads = refs
			} else {
				t.Writes = refs
			}
		case "volatile":
			t.Volatile, _ = p.Bool(v, f)
		case "private":
			t.Private, _ = p.Bool(v, f)
		case "shared":
			if b, ok := p.Bool(v, f); ok {
				sharedNode = k
				t.Shared = b
			}
		case "ttl":
			t.TTL = p.ttl(v, f)
		case "cancellable":
			if b, ok := p.Bool(v, f); ok {
				t.Cancellable = &b
			}
		default:
			p.Unknown(k, f, fieldsTool)
		}
	})

	// Cross-field checks: a rule must mean what it says.
	if levelNode != nil && !explicitNone && !t.Allow {
		p.Errorf(levelNode, yamlnode.Join(field, "max_speculation"), "level %s has no effect without allow: true", t.MaxSpeculation)
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
	if t.ReadOnly != nil && *t.ReadOnly && len(t.Writes) > 0 {
		p.Errorf(readOnlyNode, yamlnode.Join(field, "read_only"), "a read-only tool cannot declare writes: %s", refsString(t.Writes))
	}
	if t.Shared && !t.IsReadOnly() {
		p.Errorf(sharedNode, yamlnode.Join(field, "shared"), "only read-only tools may share results across sessions (declare read_only: true, or remove writes)")
	}
	return t
}

// refs parses the value of reads or writes: an argument name (path), a
// mapping with its kind ({arg: path, as: path}), or a list of either
// ([src, {arg: dst, as: path}]).
func (p *parser) refs(n *yaml.Node, field string) []Ref {
	n = yamlnode.Resolve(n)
	if n.Kind != yaml.SequenceNode {
		r, ok := p.ref(n, field)
		if !ok {
			return nil
		}
		return []Ref{r}
	}
	if len(n.Content) == 0 {
		p.Errorf(n, field, "empty list of arguments (omit the field instead)")
		return nil
	}
	var refs []Ref
	for i, e := range n.Content {
		if r, ok := p.ref(e, fmt.Sprintf("%s[%d]", field, i)); ok {
			refs = append(refs, r)
		}
	}
	return refs
}

func (p *parser) ref(n *yaml.Node, field string) (Ref, bool) {
	n = yamlnode.Resolve(n)
	if n.Kind != yaml.MappingNode {
		s, ok := p.Str(n, field)
		if ok && s == "" {
			p.Errorf(n, field, "empty argument name")
			ok = false
		}
		return Ref{Arg: s}, ok
	}
	var r Ref
	ok := true
	p.Mapping(n, field, func(k, v *yaml.Node, f string) {
		switch k.Value {
		case "arg":
			s, sok := p.Str(v, f)
			if sok && s == "" {
				p.Errorf(v, f, "empty argument name")
				sok = false
			}
			r.Arg, ok = s, ok && sok
		case "as":
			s, sok := p.Str(v, f)
			if !sok {
				ok = false
				return
			}
			i := slices.Index(kindNames[:], s)
			if i < 0 {
				p.Errorf(v, f, "unknown kind %q (want %s)", s, yamlnode.Or(kindNames[:]))
				ok = false
				return
			}
			r.As = Kind(i)
		default:
			p.Unknown(k, f, fieldsRef)
			ok = false
		}
	})
	if r.Arg == "" && ok {
		p.Errorf(n, field, "missing arg (the name of the argument)")
		ok = false
	}
	return r, ok
}

func (p *parser) dryRun(n *yaml.Node, field string) DryRun {
	var d DryRun
	p.Mapping(n, field, func(k, v *yaml.Node, f string) {
		switch k.Value {
		case "tool":
			if s, ok := p.Str(v, f); ok {
				if s == "" {
					p.Errorf(v, f, "empty tool name")
					return
				}
				d.Tool = s
			}
		case "args":
			v = yamlnode.Resolve(v)
			if v.Kind != yaml.MappingNode {
				p.Errorf(v, f, "want a mapping of arguments to set, got %s", yamlnode.Describe(v))
				return
			}
			if len(v.Content) == 0 {
				p.Errorf(v, f, "empty argument patch")
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
				p.Errorf(v, f, "%v", err)
				return
			}
			d.Args = json.RawMessage(c)
		default:
			p.Unknown(k, f, fieldsDryRun)
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
	n = yamlnode.Resolve(n)
	*budget--
	if *budget < 0 || depth > 64 {
		p.Errorf(n, field, "argument patch too large or too deep")
		return buf, false
	}
	switch n.Kind {
	case yaml.MappingNode:
		buf = append(buf, '{')
		ok := true
		first := true
		keysOK := p.Mapping(n, field, func(k, v *yaml.Node, f string) {
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
		return append(buf, '}'), ok && keysOK
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
			p.Errorf(n, field, "number %s has no JSON form", n.Value)
			return buf, false
		}
	}
	p.Errorf(n, field, "%s has no JSON form", yamlnode.Describe(n))
	return buf, false
}

func (p *parser) ttl(n *yaml.Node, field string) time.Duration {
	n = yamlnode.Resolve(n)
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
		p.Errorf(n, field, "want a duration such as 30s or 5m, got %s", yamlnode.Describe(n))
		return 0
	}
	d, err := time.ParseDuration(n.Value)
	if err != nil {
		p.Errorf(n, field, "want a duration such as 30s or 5m, got %q", n.Value)
		return 0
	}
	if d <= 0 {
		// Zero would silently mean the engine's default.
		p.Errorf(n, field, "must be positive, got %s (omit ttl for the default)", n.Value)
		return 0
	}
	return d
}

func refsString(refs []Ref) string {
	s := make([]string, len(refs))
	for i, r := range refs {
		s[i] = r.String()
	}
	return strings.Join(s, ", ")
}
