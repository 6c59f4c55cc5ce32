package config

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/ahead-dev/ahead/yamlnode"
)

var (
	fieldsBackend = []string{"http", "exec", "tools", "slots", "reserve", "spec_budget", "rate", "burst", "rate_reserve", "queue", "state", "path_root"}
	fieldsHTTP    = []string{"url", "timeout", "headers", "max_response_bytes"}
	fieldsExec    = []string{"command", "timeout", "dir", "env", "max_output_bytes"}
)

// backends parses the backends block: each backend's kind and limits, and
// who serves which tool (a tool has one backend; one backend at most
// serves the tools no other lists).
func (p *parser) backends(n *yaml.Node, field string) []Backend {
	var out []Backend
	owner := map[string]Pos{} // tool → the tools entry that claims it
	var fallback *Backend     // the backend without a tools list
	p.Mapping(n, field, func(k, v *yaml.Node, f string) {
		b := Backend{Name: k.Value, Pos: Pos{k.Line, k.Column, f}}
		if b.Name == "" || strings.HasPrefix(b.Name, "mcp:") {
			p.Errorf(k, f, "want a backend name not empty and not starting with \"mcp:\" (reserved for MCP upstreams)")
			return
		}
		var toolsNode *yaml.Node
		p.Mapping(v, f, func(k, v *yaml.Node, f string) {
			switch k.Value {
			case "http":
				b.HTTP = p.httpBackend(v, f)
			case "exec":
				b.Exec = p.execBackend(v, f)
			case "tools":
				toolsNode = yamlnode.Resolve(v)
				b.Tools = p.toolList(v, f, owner, b.Name)
			case "slots":
				b.Limits.Slots, _ = p.Int(v, f, 1)
			case "reserve":
				b.Limits.Reserve, _ = p.Int(v, f, 0)
			case "spec_budget":
				b.Limits.SpecBudget, _ = p.Int(v, f, 1)
			case "rate":
				b.Limits.Rate, _ = p.positiveFloat(v, f)
			case "burst":
				b.Limits.Burst, _ = p.Int(v, f, 1)
			case "rate_reserve":
				b.Limits.RateReserve, _ = p.Int(v, f, 0)
			case "queue":
				b.Limits.Queue, _ = p.Int(v, f, 1)
			case "state":
				if s, ok := p.Str(v, f); ok {
					switch s {
					case "shared":
					case "per_session":
						b.PerSession = true
					default:
						p.Errorf(v, f, "want shared (the default: every session sees the same data) or per_session, got %q", s)
					}
				}
			case "path_root":
				if s, ok := p.Str(v, f); ok {
					if !filepath.IsAbs(s) && !path.IsAbs(s) {
						p.Errorf(v, f, "want an absolute directory (where the backend resolves relative paths), got %q", s)
					} else {
						b.PathRoot = s
					}
				}
			default:
				p.Unknown(k, f, fieldsBackend)
			}
		})
		switch {
		case b.HTTP == nil && b.Exec == nil:
			p.Errorf(v, f, "want exactly one of http or exec")
			return
		case b.HTTP != nil && b.Exec != nil:
			p.Errorf(v, f, "want exactly one of http or exec, got both")
			return
		}
		if slots := b.Limits.Slots; slots == 0 {
			// Without slots, real calls are not limited and speculation
			// has its own spec_budget: there are no slots to reserve.
			if b.Limits.Reserve > 0 {
				p.Errorf(v, yamlnode.Join(f, "reserve"), "reserve needs slots: without slots, real calls are not limited and speculation keeps to spec_budget")
			}
		} else if b.Limits.Reserve > slots {
			p.Errorf(v, yamlnode.Join(f, "reserve"), "reserve %d is more than the backend's %d slots", b.Limits.Reserve, slots)
		} else if b.Limits.SpecBudget > slots-b.Limits.Reserve {
			p.Errorf(v, yamlnode.Join(f, "spec_budget"), "spec_budget %d is more than the %d slots outside the reserve", b.Limits.SpecBudget, slots-b.Limits.Reserve)
		}
		if b.Limits.Queue > 0 && b.Limits.Slots == 0 && b.Limits.Rate == 0 {
			p.Errorf(v, yamlnode.Join(f, "queue"), "queue needs slots or rate: without them calls never wait")
		}
		if (b.Limits.Burst > 0 || b.Limits.RateReserve > 0) && b.Limits.Rate == 0 {
			p.Errorf(v, f, "burst and rate_reserve need a rate")
		}
		if toolsNode == nil {
			if fallback != nil {
				p.Errorf(k, yamlnode.Join(f, "tools"), "missing: only one backend may serve all unlisted tools, and backend %q (line %d) already does", fallback.Name, fallback.Pos.Line)
				return
			}
			fallback = &b
		}
		out = append(out, b)
	})
	return out
}

// toolList parses a backend's tools, which no other backend may list.
func (p *parser) toolList(n *yaml.Node, field string, owner map[string]Pos, backendName string) []string {
	n = yamlnode.Resolve(n)
	if n.Kind != yaml.SequenceNode {
		p.Errorf(n, field, "want a list of tool names, got %s", yamlnode.Describe(n))
		return nil
	}
	tools := make([]string, 0, len(n.Content))
	for i, item := range n.Content {
		f := fmt.Sprintf("%s[%d]", field, i)
		s, ok := p.Str(item, f)
		if !ok {
			continue
		}
		if s == "" {
			p.Errorf(item, f, "empty tool name")
			continue
		}
		if prev, dup := owner[s]; dup {
			p.Errorf(item, f, "tool %q is already listed at line %d (%s); a tool has one backend", s, prev.Line, prev.Field)
			continue
		}
		owner[s] = Pos{item.Line, item.Column, f}
		tools = append(tools, s)
	}
	if len(tools) == 0 && len(n.Content) == 0 {
		p.Errorf(n, field, "empty list: list the tools of backend %q, or remove tools to make it serve every unlisted tool", backendName)
	}
	return tools
}

func (p *parser) httpBackend(n *yaml.Node, field string) *HTTPBackend {
	h := &HTTPBackend{}
	p.Mapping(n, field, func(k, v *yaml.Node, f string) {
		switch k.Value {
		case "url":
			if s, ok := p.Str(v, f); ok {
				h.URL = s
				h.URLPos = Pos{v.Line, v.Column, f}
			}
		case "timeout":
			h.Timeout, _ = p.duration(v, f)
		case "headers":
			h.Headers = p.stringMap(v, f, true)
		case "max_response_bytes":
			h.MaxResponseBytes, _ = p.bytes(v, f)
		default:
			p.Unknown(k, f, fieldsHTTP)
		}
	})
	if h.URL == "" {
		p.Errorf(n, yamlnode.Join(field, "url"), `missing: the URL template, such as "http://127.0.0.1:9000/tools/{tool}"`)
	}
	return h
}

func (p *parser) execBackend(n *yaml.Node, field string) *ExecBackend {
	x := &ExecBackend{}
	hasCommand := false
	p.Mapping(n, field, func(k, v *yaml.Node, f string) {
		switch k.Value {
		case "command":
			hasCommand = true
			x.Command = p.command(v, f)
			x.CommandPos = Pos{v.Line, v.Column, f}
		case "timeout":
			x.Timeout, _ = p.duration(v, f)
		case "dir":
			if d, ok := p.path(v, f); ok {
				// Found now, not at the first call.
				if fi, err := os.Stat(d); err != nil {
					p.Errorf(yamlnode.Resolve(v), f, "%v", err)
				} else if !fi.IsDir() {
					p.Errorf(yamlnode.Resolve(v), f, "%s is not a directory", d)
				} else {
					x.Dir = d
				}
			}
		case "env":
			x.Env = p.stringMap(v, f, true)
		case "max_output_bytes":
			x.MaxOutputBytes, _ = p.bytes(v, f)
		default:
			p.Unknown(k, f, fieldsExec)
		}
	})
	if !hasCommand {
		p.Errorf(n, yamlnode.Join(field, "command"), `missing: the command as a list, such as ["./tool.sh", "{tool}"]`)
	}
	if x.Dir == "" {
		// Commands given relative to the configuration run where it is.
		x.Dir = p.dir
	}
	return x
}

// command parses a command line as a list of words. A program named with a
// relative path (./tool.sh) is resolved against the configuration's
// directory; a bare name (python3) is looked up in PATH when run.
func (p *parser) command(n *yaml.Node, field string) []string {
	n = yamlnode.Resolve(n)
	if n.Kind != yaml.SequenceNode || len(n.Content) == 0 {
		p.Errorf(n, field, `want the command as a non-empty list of words, such as ["./tool.sh", "{tool}"], got %s`, yamlnode.Describe(n))
		return nil
	}
	words := make([]string, 0, len(n.Content))
	for i, item := range n.Content {
		s, ok := p.Str(item, fmt.Sprintf("%s[%d]", field, i))
		if !ok {
			return nil
		}
		words = append(words, s)
	}
	if words[0] == "" {
		p.Errorf(n.Content[0], field+"[0]", "empty program name")
		return nil
	}
	if strings.ContainsRune(words[0], filepath.Separator) && !filepath.IsAbs(words[0]) {
		words[0] = filepath.Join(p.dir, words[0])
	}
	return words
}
