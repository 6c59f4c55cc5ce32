// Package starter writes the commented starter configuration `ahead init`
// gives a new user: the backends and MCP servers named on its command
// line, recording and learning switched on, and a default-deny speculation
// policy that allows exactly the tools an MCP server annotates as
// read-only and closed-world. Every other tool is listed, denied, with a
// comment saying why, so the user sees what to decide. The output parses
// with package config.
package starter

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ahead-dev/ahead/mcpproxy"
)

// Backend is an HTTP backend (URL) or a local command (Command).
type Backend struct {
	Name    string
	URL     string   // a URL template with {tool}, for an http backend
	Command []string // for an exec backend
	// Tools are the tools it serves; nil means every tool no other
	// backend lists, which only one backend may say.
	Tools []string
}

// Server is an MCP upstream, with the tools it listed (nil if it could
// not be started: Err says why).
type Server struct {
	Upstream mcpproxy.Upstream
	Tools    []*mcp.Tool
	Err      error
}

// Config is what to write.
type Config struct {
	Backends []Backend
	Servers  []Server
}

// The Add methods parse ahead init's flags, NAME=VALUE each.

// AddHTTP adds an HTTP backend from "NAME=URL".
func (c *Config) AddHTTP(spec string) error {
	name, url, err := cut(spec, "NAME=URL")
	c.Backends = append(c.Backends, Backend{Name: name, URL: url})
	return err
}

// AddExec adds a command backend from "NAME=COMMAND ARGS" (split at
// spaces).
func (c *Config) AddExec(spec string) error {
	name, cmd, err := cut(spec, "NAME=COMMAND")
	c.Backends = append(c.Backends, Backend{Name: name, Command: strings.Fields(cmd)})
	return err
}

// AddTools sets the tools of a backend added before from
// "NAME=TOOL,TOOL...".
func (c *Config) AddTools(spec string) error {
	name, list, err := cut(spec, "NAME=TOOL,TOOL...")
	i := slices.IndexFunc(c.Backends, func(b Backend) bool { return b.Name == name })
	if err == nil && i < 0 {
		return fmt.Errorf("no backend %q (give its --http or --exec first)", name)
	}
	if err == nil {
		c.Backends[i].Tools = strings.Split(list, ",")
	}
	return err
}

// AddMCPURL adds an MCP server over streamable HTTP from "NAME=URL"; it
// is not started (see Server).
func (c *Config) AddMCPURL(spec string) error {
	name, url, err := cut(spec, "NAME=URL")
	c.Servers = append(c.Servers, Server{Upstream: mcpproxy.Upstream{Name: name, URL: url}})
	return err
}

func cut(spec, want string) (name, value string, err error) {
	name, value, ok := strings.Cut(spec, "=")
	if !ok || name == "" || strings.TrimSpace(value) == "" {
		return "", "", fmt.Errorf("want %s, got %q", want, spec)
	}
	return name, value, nil
}

// Write writes the starter configuration.
func Write(w io.Writer, c Config) error {
	catchAll := ""
	for _, bk := range c.Backends {
		if bk.Tools != nil {
			continue
		}
		if catchAll != "" {
			return fmt.Errorf("starter: backends %s and %s list no tools: only one backend may serve every unlisted tool", catchAll, bk.Name)
		}
		catchAll = bk.Name
	}
	var b strings.Builder
	b.WriteString(`# ahead.yaml, written by ahead init. Check it, then serve it:
#   ahead doctor --config ahead.yaml   # backends reachable, servers start, what would be speculated
#   ahead serve --config ahead.yaml    # HTTP tool API (and MCP over HTTP at /mcp)
#   ahead mcp --config ahead.yaml      # MCP over stdio, for an agent's MCP configuration
# Every field is in README.md, "Configuration".

listen: 127.0.0.1:7777   # loopback only: ahead executes tools

# The pattern pool: ahead predicts the next calls from it, and learns from
# the calls it sees. A pool that does not exist yet is fine: ahead starts
# with no patterns and writes it every 5 minutes and at exit.
patterns: ./pool.json
# Record every call here (rotating JSONL): what the pool learns new
# patterns from, and what ahead stats reads.
traces: ./traces
`)
	if len(c.Backends) > 0 {
		b.WriteString("\nbackends:\n")
		for _, bk := range c.Backends {
			fmt.Fprintf(&b, "  %s:\n", bk.Name)
			if bk.URL != "" {
				fmt.Fprintf(&b, "    http:\n      url: %s   # POST the arguments JSON; {tool} is the tool's name\n      # timeout: 30s\n", strconv.Quote(bk.URL))
			} else {
				fmt.Fprintf(&b, "    exec:\n      command: %s   # the arguments JSON on stdin, the output on stdout\n      # timeout: 30s\n", quoteList(bk.Command))
			}
			if bk.Tools == nil {
				b.WriteString("    # tools: [search, fetch]   # the tools it serves; without a list, every tool no other backend lists\n")
			} else {
				fmt.Fprintf(&b, "    tools: %s\n", quoteList(bk.Tools))
			}
			b.WriteString("    # slots: 4                 # calls at once, real and speculative (default: real calls unlimited, speculation up to spec_budget: 4)\n")
		}
	}
	if len(c.Servers) > 0 {
		b.WriteString("\nmcpServers:\n")
		for _, s := range c.Servers {
			u := s.Upstream
			fmt.Fprintf(&b, "  %s:\n", u.Name)
			if u.URL != "" {
				fmt.Fprintf(&b, "    url: %s\n", strconv.Quote(u.URL))
			} else {
				fmt.Fprintf(&b, "    command: %s\n", strconv.Quote(u.Command))
				if len(u.Args) > 0 {
					fmt.Fprintf(&b, "    args: %s\n", quoteList(u.Args))
				}
			}
			if s.Err != nil {
				fmt.Fprintf(&b, "    # ahead init could not start it (%s): its tools are not in the policy below\n", oneLine(s.Err.Error()))
			}
		}
	}

	b.WriteString(`
# What may run ahead of the agent. Default deny: a tool is speculated only
# if a rule allows it. Allow only tools that are safe to call when the
# agent may not: reads without side effects. Say which argument a tool
# reads or writes (reads: path, writes: path) so a write cancels the
# speculative reads of the same resource.
speculation_policy:
  default: {allow: false}
  tools:
`)
	n := 0
	for _, s := range c.Servers {
		if len(s.Tools) == 0 {
			continue
		}
		fmt.Fprintf(&b, "    # MCP server %s\n", s.Upstream.Name)
		tools := slices.Clone(s.Tools)
		slices.SortFunc(tools, func(a, b *mcp.Tool) int { return strings.Compare(a.Name, b.Name) })
		for _, t := range tools {
			name := s.Upstream.Prefix + t.Name
			rule, why := ruleFor(t.Annotations)
			fmt.Fprintf(&b, "    %s: %s   # %s\n", strconv.Quote(name), rule, why)
			n++
		}
	}
	for _, bk := range c.Backends {
		if len(bk.Tools) == 0 {
			continue
		}
		fmt.Fprintf(&b, "    # backend %s\n", bk.Name)
		for _, t := range bk.Tools {
			fmt.Fprintf(&b, "    %s: {allow: false}   # decide: allow: true if calling it when unneeded is harmless (a read)\n", strconv.Quote(t))
			n++
		}
	}
	if len(c.Backends) > 0 {
		b.WriteString("    # the backends' tools, for example:\n")
		b.WriteString("    # search: {allow: true, shared: true, ttl: 30s}   # a pure read: every session may reuse it\n")
		b.WriteString("    # read_file: {allow: true, reads: path}\n")
		b.WriteString("    # write_file: {writes: path}                      # never speculated; cancels speculative reads of path\n")
	}
	if n == 0 {
		b.WriteString("    {}\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// ruleFor turns a tool's annotations into a rule and the reason, as
// mcpproxy.AnnotationPolicy reads them for trusted servers.
func ruleFor(a *mcp.ToolAnnotations) (rule, why string) {
	switch {
	case a == nil:
		return "{allow: false}", "no annotations: unknown side effects"
	case a.ReadOnlyHint && a.OpenWorldHint != nil && !*a.OpenWorldHint:
		return "{allow: true}", "read-only, closed world (its annotations)"
	case a.ReadOnlyHint:
		return "{allow: false}", "read-only but reaches third parties: allow it if an unneeded call is harmless"
	}
	return "{allow: false}", "may write: never speculate it (add writes: ARG if one argument names what it writes)"
}

func quoteList(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 120 {
		s = s[:120] + "…"
	}
	return s
}
