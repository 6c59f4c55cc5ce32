package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	neturl "net/url"
	"path/filepath"

	"go.yaml.in/yaml/v3"

	"github.com/ahead-dev/ahead/mcpproxy"
	"github.com/ahead-dev/ahead/policy"
	"github.com/ahead-dev/ahead/sched"
	"github.com/ahead-dev/ahead/yamlnode"
)

// The MCP front of ahead, shared by `ahead mcp` (stdio) and `ahead serve`
// (streamable HTTP at /mcp). The engine needs the proxy's backends and
// router when it is built, and the proxy needs the engine to serve, so the
// wiring has three steps:
//
//	cfg, err := loadConfig(file)   // cfg.Upstreams: the mcpServers block
//	p, pol, err := newMCPFront(ctx, cfg.Upstreams, cfg.Policy, cfg.TrustAnnotations, logger, os.Stderr)
//	eng := engine.New(engine.Options{Backends: <yours + p.Backends()>, Route: <yours, then p.Route>, Policy: pol, ...})
//	mountMCP(mux, p, eng)   // serves /mcp
//	...
//	eng.Close(); p.Close()

// mcpServersKey is the configuration block of MCP upstreams: the shape
// agents' MCP configurations use (Claude Code, gemini-cli, Cursor), so an
// existing block can be pasted in.
const mcpServersKey = "mcpServers"

// mcpServers parses the mcpServers block:
//
//	mcpServers:
//	  fs:
//	    command: npx
//	    args: [-y, "@modelcontextprotocol/server-filesystem", /srv/data]
//	    env: {NODE_OPTIONS: --max-old-space-size=512}
//	    cwd: /srv                 # optional working directory
//	    prefix: fs_               # optional: prepended to its tool names
//	    trust_annotations: true   # its readOnlyHint/openWorldHint feed the policy
//	    slots: 4                  # optional: concurrent calls
//	  search:
//	    url: https://mcp.example.com/mcp
//	    headers: {Authorization: "Bearer ..."}
//
// "type" (stdio, http, streamable-http) is accepted for compatibility with
// agents' files and checked against the fields. The block is read as
// strictly as the rest of the file: server names are unique, values have
// the type asked for (args: [--port, "8080"], quoted, as backends' env
// and headers want), fields the server's kind would ignore (headers on a
// command) and unknown fields are errors, and every error is reported
// with the file's others.
func (p *cfgParser) mcpServers(n *yaml.Node, field string) []mcpproxy.Upstream {
	var ups []mcpproxy.Upstream
	ok := p.Mapping(n, field, func(k, v *yaml.Node, f string) {
		if k.Value == "" {
			p.Errorf(k, f, "empty server name")
			return
		}
		ups = append(ups, p.mcpServer(k.Value, v, f))
	})
	if ok && len(yamlnode.Resolve(n).Content) == 0 {
		// mcpproxy refuses to run without upstreams; say so here, where
		// the line is known.
		p.Errorf(n, field, "empty: configure at least one MCP server, or remove %s", field)
	}
	return ups
}

var (
	fieldsMCPServer = []string{"command", "args", "env", "cwd", "url", "headers", "type", "prefix", "trust_annotations", "slots"}
	// The fields that only one kind of server uses: given to the other
	// kind, they would be ignored, so they are errors.
	fieldsStdioOnly = map[string]bool{"args": true, "env": true, "cwd": true}
	fieldsHTTPOnly  = map[string]bool{"headers": true}
)

// mcpServer parses one server of the mcpServers block.
func (p *cfgParser) mcpServer(name string, n *yaml.Node, field string) mcpproxy.Upstream {
	u := mcpproxy.Upstream{Name: name}
	if r := yamlnode.Resolve(n); r.Kind != yaml.MappingNode {
		p.Errorf(r, field, "want a mapping (command/args/env or url/headers), got %s", yamlnode.Describe(r))
		return u
	}
	var command, url, typ *yaml.Node // the command and url keys, the type value
	var keys []*yaml.Node            // every key, for the kind checks
	typName := ""
	p.Mapping(n, field, func(k, v *yaml.Node, f string) {
		keys = append(keys, k)
		switch k.Value {
		case "command":
			command = k
			if s, ok := p.Str(v, f); ok {
				if s == "" {
					p.Errorf(yamlnode.Resolve(v), f, "empty program name")
					return
				}
				u.Command = s
			}
		case "args":
			u.Args = p.stringList(v, f)
		case "env":
			u.Env = p.stringMap(v, f, false)
		case "cwd":
			u.Dir, _ = p.path(v, f)
		case "url":
			url = k
			if s, ok := p.Str(v, f); ok {
				if !validURL(s) {
					p.Errorf(yamlnode.Resolve(v), f, "want an http:// or https:// URL, such as https://mcp.example.com/mcp, got %q", s)
					return
				}
				u.URL = s
			}
		case "headers":
			u.Headers = p.stringMap(v, f, false)
		case "type":
			typ = yamlnode.Resolve(v)
			if s, ok := p.Str(v, f); ok {
				if s != "stdio" && s != "http" && s != "streamable-http" {
					p.Errorf(yamlnode.Resolve(v), f, "unsupported transport %q (want stdio, http or streamable-http)", s)
					return
				}
				typName = s
			}
		case "prefix":
			u.Prefix, _ = p.Str(v, f)
		case "trust_annotations":
			u.TrustAnnotations, _ = p.Bool(v, f)
		case "slots":
			u.Limits.Slots, _ = p.Int(v, f, 1)
		default:
			p.Unknown(k, f, fieldsMCPServer)
		}
	})
	switch {
	case command == nil && url == nil:
		p.Errorf(n, field, "needs a command (stdio) or a url (streamable HTTP)")
		return u
	case command != nil && url != nil:
		p.Errorf(url, yamlnode.Join(field, "url"), "want a command (stdio) or a url (streamable HTTP), got both (command at line %d)", command.Line)
		return u
	case typName == "stdio" && command == nil:
		p.Errorf(typ, yamlnode.Join(field, "type"), "type stdio needs a command, got a url")
	case typName != "" && typName != "stdio" && url == nil:
		p.Errorf(typ, yamlnode.Join(field, "type"), "type %s needs a url, got a command", typName)
	}
	for _, k := range keys {
		switch {
		case command == nil && fieldsStdioOnly[k.Value]:
			p.Errorf(k, yamlnode.Join(field, k.Value), "only for a server started by a command (stdio), and this one has a url")
		case url == nil && fieldsHTTPOnly[k.Value]:
			p.Errorf(k, yamlnode.Join(field, k.Value), "only for a server reached by a url (HTTP), and this one has a command")
		}
	}
	return u
}

// validURL reports whether s is an absolute http or https URL, the only
// kind the streamable HTTP transport can reach.
func validURL(s string) bool {
	u, err := neturl.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

// stringList parses a list of strings (a command's arguments).
func (p *cfgParser) stringList(n *yaml.Node, field string) []string {
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

// commandUpstream is the upstream given on ahead mcp's command line.
func commandUpstream(args []string) mcpproxy.Upstream {
	return mcpproxy.Upstream{Name: filepath.Base(args[0]), Command: args[0], Args: args[1:], Limits: sched.Limits{}}
}

// newMCPFront builds the proxy for the upstreams and returns the engine's
// policy: base (the operator's; nil denies all) with the annotations of
// trusted upstreams folded in under it. trustAll trusts every upstream
// (--trust-annotations, or the configuration's trust_annotations). Trusted
// upstreams are started once here to read their tools' annotations.
func newMCPFront(ctx context.Context, ups []mcpproxy.Upstream, base *policy.Policy, trustAll bool, logger *slog.Logger, stderr io.Writer) (*mcpproxy.Proxy, *policy.Policy, error) {
	if trustAll {
		for i := range ups {
			ups[i].TrustAnnotations = true
		}
	}
	// The operator's policy is the base of the annotation rules, at
	// startup (below) and when sessions list new or changed tools.
	p, err := mcpproxy.New(mcpproxy.Options{Upstreams: ups, Logger: logger, Stderr: stderr, Version: version, Policy: base})
	if err != nil {
		return nil, nil, err
	}
	tools, err := p.TrustedTools(ctx)
	if err != nil {
		p.Close()
		return nil, nil, err
	}
	pol := base
	if len(tools) > 0 {
		pol = mcpproxy.AnnotationPolicy(base, tools)
	}
	return p, pol, nil
}

// mountMCP serves the proxy over streamable HTTP at /mcp of mux, with
// tools/call going through eng (built with the proxy's backends and route).
func mountMCP(mux *http.ServeMux, p *mcpproxy.Proxy, eng mcpproxy.Caller) {
	p.Attach(eng)
	mux.Handle("/mcp", p.Handler())
}
