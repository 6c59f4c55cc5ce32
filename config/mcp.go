package config

import (
	neturl "net/url"

	"go.yaml.in/yaml/v3"

	"github.com/ahead-dev/ahead/mcpproxy"
	"github.com/ahead-dev/ahead/yamlnode"
)

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
//	    slots: 4                  # optional: concurrent calls, real and speculative (default: real calls unlimited)
//	    queue: 256                # optional, with slots: calls that may wait for one
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
func (p *parser) mcpServers(n *yaml.Node, field string) []mcpproxy.Upstream {
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
	fieldsMCPServer = []string{"command", "args", "env", "cwd", "url", "headers", "type", "prefix", "trust_annotations", "slots", "queue"}
	// The fields that only one kind of server uses: given to the other
	// kind, they would be ignored, so they are errors.
	fieldsStdioOnly = map[string]bool{"args": true, "env": true, "cwd": true}
	fieldsHTTPOnly  = map[string]bool{"headers": true}
)

// mcpServer parses one server of the mcpServers block.
func (p *parser) mcpServer(name string, n *yaml.Node, field string) mcpproxy.Upstream {
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
		case "queue":
			u.Limits.Queue, _ = p.Int(v, f, 1)
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
		case k.Value == "queue" && u.Limits.Slots == 0:
			p.Errorf(k, yamlnode.Join(field, k.Value), "queue needs slots: without them calls never wait")
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
