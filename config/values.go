package config

import (
	"fmt"
	"math"
	"path/filepath"
	"regexp"
	"strconv"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/ahead-dev/ahead/yamlnode"
)

// parser walks the YAML tree and collects every problem it finds. The
// value parsers below check a scalar's type and range and, on a problem,
// record it and return false.
type parser struct {
	yamlnode.Decoder
	dir string                      // where relative paths start
	env func(string) (string, bool) // expands ${VAR}
}

// path parses a file or directory name, resolved against the
// configuration's directory when relative.
func (p *parser) path(n *yaml.Node, field string) (string, bool) {
	s, ok := p.Str(n, field)
	if !ok {
		return "", false
	}
	if s == "" {
		p.Errorf(yamlnode.Resolve(n), field, "empty path")
		return "", false
	}
	if !filepath.IsAbs(s) {
		s = filepath.Join(p.dir, s)
	}
	return s, true
}

func (p *parser) positiveFloat(n *yaml.Node, field string) (float64, bool) {
	n = yamlnode.Resolve(n)
	var x float64
	tag := n.ShortTag()
	if n.Kind != yaml.ScalarNode || (tag != "!!int" && tag != "!!float") || n.Decode(&x) != nil {
		p.Errorf(n, field, "want a number, got %s", yamlnode.Describe(n))
		return 0, false
	}
	if !(x > 0) || math.IsInf(x, 0) {
		p.Errorf(n, field, "must be a positive number, got %s", n.Value)
		return 0, false
	}
	return x, true
}

// duration parses a positive Go duration with its unit ("10s", "1m30s").
// A bare number is an error: 30 could mean seconds or milliseconds.
func (p *parser) duration(n *yaml.Node, field string) (time.Duration, bool) {
	n = yamlnode.Resolve(n)
	if n.Kind != yaml.ScalarNode || (n.ShortTag() != "!!str" && n.ShortTag() != "!!int" && n.ShortTag() != "!!float") {
		p.Errorf(n, field, "want a duration such as 10s or 1m30s, got %s", yamlnode.Describe(n))
		return 0, false
	}
	d, err := time.ParseDuration(n.Value)
	if err != nil {
		if n.ShortTag() != "!!str" {
			p.Errorf(n, field, "want a duration with its unit, such as %ss, got %s", n.Value, n.Value)
		} else {
			p.Errorf(n, field, "want a duration such as 10s or 1m30s, got %q", n.Value)
		}
		return 0, false
	}
	if d <= 0 {
		p.Errorf(n, field, "must be positive, got %s", n.Value)
		return 0, false
	}
	return d, true
}

var byteSize = regexp.MustCompile(`^\s*([0-9]+)\s*([KMGT]i?B|B)?\s*$`)

var byteUnits = map[string]int64{
	"": 1, "B": 1,
	"KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12,
	"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40,
}

// bytes parses a positive byte count: a number, or a number with a unit
// (B, KB, MB, GB, KiB, MiB, GiB).
func (p *parser) bytes(n *yaml.Node, field string) (int64, bool) {
	n = yamlnode.Resolve(n)
	if n.Kind == yaml.ScalarNode && (n.ShortTag() == "!!str" || n.ShortTag() == "!!int") {
		if m := byteSize.FindStringSubmatch(n.Value); m != nil {
			v, err := strconv.ParseInt(m[1], 10, 64)
			unit := byteUnits[m[2]]
			if err == nil && v > 0 && v <= math.MaxInt64/unit {
				return v * unit, true
			}
			if err == nil && v == 0 {
				p.Errorf(n, field, "must be positive, got %s", n.Value)
				return 0, false
			}
		}
	}
	p.Errorf(n, field, "want a size such as 8MiB, 512KB or 1048576, got %s", yamlnode.Describe(n))
	return 0, false
}

// stringList parses a list of strings (a command's arguments).
func (p *parser) stringList(n *yaml.Node, field string) []string {
	n = yamlnode.Resolve(n)
	if n.Kind != yaml.SequenceNode {
		p.Errorf(n, field, "want a list of strings, got %s", yamlnode.Describe(n))
		return nil
	}
	out := make([]string, 0, len(n.Content))
	for i, item := range n.Content {
		if s, ok := p.Str(item, fmt.Sprintf("%s[%d]", field, i)); ok {
			out = append(out, s)
		}
	}
	return out
}

// stringMap parses a mapping of strings to strings (headers, environment).
// With expand, ${VAR} in values is replaced by the environment variable,
// which must be set: secrets belong in the environment, not in the file.
func (p *parser) stringMap(n *yaml.Node, field string, expand bool) map[string]string {
	m := map[string]string{}
	p.Mapping(n, field, func(k, v *yaml.Node, f string) {
		s, ok := p.Str(v, f)
		if !ok {
			return
		}
		if expand {
			s, ok = p.expand(v, f, s)
			if !ok {
				return
			}
		}
		m[k.Value] = s
	})
	return m
}

var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// expand replaces ${VAR} with the variable's value; $$ is not special, and
// a lone $ stays as is.
func (p *parser) expand(n *yaml.Node, field, s string) (string, bool) {
	ok := true
	out := envRef.ReplaceAllStringFunc(s, func(ref string) string {
		name := ref[2 : len(ref)-1]
		v, set := p.env(name)
		if !set {
			p.Errorf(yamlnode.Resolve(n), field, "environment variable %s is not set", name)
			ok = false
		}
		return v
	})
	return out, ok
}
