package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strconv"

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
//	ups, err := parseMCPServers(cfg.MCPServers, cfg.file)
//	p, pol, err := newMCPFront(ctx, ups, cfg.Policy, cfg.TrustAnnotations, logger, os.Stderr)
//	eng := engine.New(engine.Options{Backends: <yours + p.Backends()>, Route: <yours, then p.Route>, Policy: pol, ...})
//	mountMCP(mux, p, eng)   // serves /mcp
//	...
//	eng.Close(); p.Close()

// mcpServersKey is the configuration block of MCP upstreams: the shape
// agents' MCP configurations use (Claude Code, gemini-cli, Cursor), so an
// existing block can be pasted in.
const mcpServersKey = "mcpServers"

// parseMCPServers reads the mcpServers block:
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
// agents' files and checked against the fields. Errors name file:line and
// the field; all of them are reported.
func parseMCPServers(n *yaml.Node, file string) ([]mcpproxy.Upstream, error) {
	// This block is read more loosely than config.go's fields: any scalar
	// is a string, keys are not checked for repeats, and yaml.v3's Decode
	// decides what slots and trust_annotations accept. Making it as strict
	// would change what ahead mcp and ahead serve accept, so it shares
	// only the positioned errors and the list of known fields.
	d := &yamlnode.Decoder{File: file}
	n = yamlnode.Resolve(n)
	if n.Kind != yaml.MappingNode {
		d.Errorf(n, mcpServersKey, "want a mapping of server names to servers")
		return nil, d.Err()
	}
	str := func(n *yaml.Node, f string) string {
		if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
			d.Errorf(n, f, "want a string")
			return ""
		}
		return n.Value
	}
	strMap := func(n *yaml.Node, f string) map[string]string {
		if n.Kind != yaml.MappingNode {
			d.Errorf(n, f, "want a mapping of strings")
			return nil
		}
		m := make(map[string]string)
		for j := 0; j+1 < len(n.Content); j += 2 {
			m[n.Content[j].Value] = str(n.Content[j+1], f+"."+n.Content[j].Value)
		}
		return m
	}
	var ups []mcpproxy.Upstream
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		name := k.Value
		field := mcpServersKey + "." + name
		if v.Kind != yaml.MappingNode {
			d.Errorf(v, field, "want a mapping (command/args/env or url/headers)")
			continue
		}
		u := mcpproxy.Upstream{Name: name}
		typ := ""
		for j := 0; j+1 < len(v.Content); j += 2 {
			fk, fv := v.Content[j], v.Content[j+1]
			f := field + "." + fk.Value
			switch fk.Value {
			case "command":
				u.Command = str(fv, f)
			case "args":
				if fv.Kind != yaml.SequenceNode {
					d.Errorf(fv, f, "want a list of strings")
					continue
				}
				for a, av := range fv.Content {
					u.Args = append(u.Args, str(av, f+"["+strconv.Itoa(a)+"]"))
				}
			case "env":
				u.Env = strMap(fv, f)
			case "cwd":
				u.Dir = str(fv, f)
			case "url":
				u.URL = str(fv, f)
			case "headers":
				u.Headers = strMap(fv, f)
			case "type":
				typ = str(fv, f)
				if typ != "stdio" && typ != "http" && typ != "streamable-http" {
					d.Errorf(fv, f, "unsupported transport %q (want stdio, http or streamable-http)", typ)
				}
			case "prefix":
				u.Prefix = str(fv, f)
			case "trust_annotations":
				if err := fv.Decode(&u.TrustAnnotations); err != nil {
					d.Errorf(fv, f, "want true or false")
				}
			case "slots":
				if err := fv.Decode(&u.Limits.Slots); err != nil || u.Limits.Slots < 1 {
					d.Errorf(fv, f, "want a positive integer")
				}
			default:
				d.Unknown(fk, f, fieldsMCPServer)
			}
		}
		switch {
		case u.Command == "" && u.URL == "":
			d.Errorf(v, field, "needs a command (stdio) or a url (streamable HTTP)")
		case u.Command != "" && u.URL != "":
			d.Errorf(v, field, "has both a command and a url")
		case typ == "stdio" && u.Command == "", typ != "" && typ != "stdio" && u.URL == "":
			d.Errorf(v, field, "type %q does not match the fields given", typ)
		}
		ups = append(ups, u)
	}
	if err := d.Err(); err != nil {
		return nil, err
	}
	return ups, nil
}

var fieldsMCPServer = []string{"command", "args", "env", "cwd", "url", "headers", "type", "prefix", "trust_annotations", "slots"}

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
	p, err := mcpproxy.New(mcpproxy.Options{Upstreams: ups, Logger: logger, Stderr: stderr, Version: version})
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
