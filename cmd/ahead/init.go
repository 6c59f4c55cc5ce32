package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	iofs "io/fs"
	"os"
	"time"

	"github.com/ahead-dev/ahead/config"
	"github.com/ahead-dev/ahead/doctor"
	"github.com/ahead-dev/ahead/starter"
)

const initHelp = `Write a commented starter configuration (ahead.yaml) for the backends and
MCP servers given: recording and learning on, and a default-deny
speculation policy. MCP servers are started once to read their tools: those
annotated read-only and closed-world are allowed, every other tool is
listed, denied, with the reason. Examples:

  ahead init -- npx -y @modelcontextprotocol/server-filesystem ~/project
  ahead init --http web=http://127.0.0.1:9000/tools/{tool} --exec local='./tool.sh {tool}' --tools local=lint,test

Then: ahead doctor --config ahead.yaml.`

func runInit(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "init", "init [flags] [-- MCP-SERVER-COMMAND ARGS...]", initHelp)
	out := fs.String("o", "ahead.yaml", "write the configuration to `file`; - for stdout")
	force := fs.Bool("force", false, "overwrite the file if it exists")
	var c starter.Config
	fs.Func("http", "an HTTP backend `NAME=URL` (URL with {tool}); repeatable", c.AddHTTP)
	fs.Func("exec", "a command backend `NAME=COMMAND` (split at spaces; {tool} is the tool); repeatable", c.AddExec)
	fs.Func("tools", "the tools of the backend given before, `NAME=TOOL,TOOL...` (all but one backend need a list); repeatable", c.AddTools)
	fs.Func("mcp-url", "an MCP server over streamable HTTP, `NAME=URL`; repeatable", c.AddMCPURL)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		c.Servers = append(c.Servers, starter.Server{Upstream: commandUpstream(fs.Args())})
	}
	if len(c.Backends) == 0 && len(c.Servers) == 0 {
		return usageErr("give an MCP server after --, or --http, --exec or --mcp-url")
	}
	// Each server is started once, to read its tools' annotations.
	for i := range c.Servers {
		s := &c.Servers[i]
		s.Tools, s.Err = doctor.ListTools(ctx, s.Upstream, 30*time.Second, e.stderr)
		if s.Err != nil {
			fmt.Fprintf(e.stderr, "ahead init: MCP server %s did not start (%v): its tools are left out of the policy\n", s.Upstream.Name, s.Err)
		}
	}
	var b bytes.Buffer
	if err := starter.Write(&b, c); err != nil {
		return usageErr("%v", err)
	}
	// What init writes must load as ahead serve will load it.
	if _, err := (&config.Loader{BackendsOptional: true}).Parse(*out, b.Bytes()); err != nil {
		return fmt.Errorf("the starter configuration does not load (a bug): %w", err)
	}
	if *out == "-" {
		_, err := e.stdout.Write(b.Bytes())
		return err
	}
	flags := os.O_WRONLY | os.O_CREATE | os.O_EXCL
	if *force {
		flags = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	}
	f, err := os.OpenFile(*out, flags, 0o644)
	if errors.Is(err, iofs.ErrExist) {
		return fmt.Errorf("%s exists: use --force to overwrite it, or -o another file", *out)
	}
	if err != nil {
		return err
	}
	if _, err := f.Write(b.Bytes()); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "wrote %s; check it with: ahead doctor --config %s\n", *out, *out)
	return nil
}
