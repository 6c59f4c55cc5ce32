package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/ahead-dev/ahead/config"
	"github.com/ahead-dev/ahead/mcpproxy"
	"github.com/ahead-dev/ahead/sched"
	"github.com/ahead-dev/ahead/server"
	"github.com/ahead-dev/ahead/starter"
)

const mcpDescription = `Serve MCP over stdio in front of MCP servers: the upstream given after --
(the form an agent's MCP configuration launches), and the mcpServers of the
--config file. Every tools/call goes through ahead's engine (recorded with
--traces, predicted with --patterns, speculated as --policy allows) and its
result carries _meta.ahead.source (executed, reused or promoted); the rest
of MCP is forwarded. Without --patterns (nor a patterns block in --config)
predictions come from the built-in default, which learns the tools as
they are called, in memory only (nothing is written); --patterns none
turns predicting off. Example, in an agent's MCP configuration:

  "command": "ahead",
  "args": ["mcp", "--traces", "/var/lib/ahead/traces", "--",
           "npx", "-y", "@modelcontextprotocol/server-filesystem", "/srv"]

Logs go to stderr; stdout is the MCP channel.`

func runMCP(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "mcp", "mcp [flags] [-- COMMAND ARGS...]", mcpDescription)
	var c config.MCPCommand
	fs.StringVar(&c.File, "config", "", "ahead's YAML `file`: its mcpServers, speculation_policy, patterns, traces, trust_annotations and fleet are used")
	fs.StringVar(&c.Patterns, "patterns", "", "pattern pool `file`: predictions come from it, and what is learnt is written back every 5m and at exit (a file that does not exist yet starts empty); default: the built-in default, learning in memory; none: no predictions")
	fs.StringVar(&c.Policy, "policy", "", "speculation policy YAML `file` (overrides the config's); none: deny all, except what --trust-annotations allows")
	fs.StringVar(&c.Traces, "traces", "", "record every call to JSONL traces in `dir`")
	fs.BoolVar(&c.FailOnLoss, "traces-fail-on-loss", false, "exit 1 at the end if any trace record could not be written (a full disk; the loss is reported either way)")
	fs.StringVar(&c.Recent, "recent", "", "with a pool that learns and no --traces: keep the recent sessions in `dir` (files 0600, at most 64 MiB) so that the next process keeps learning from them; default: the pool file's name + .recent; none: keep nothing")
	fs.BoolVar(&c.TrustAnnotations, "trust-annotations", false, "let the upstreams' tool annotations feed the default policy: readOnlyHint tools that are not open-world speculate, the rest never")
	logLevel := fs.String("log-level", "", fmt.Sprintf(logLevelUsage, "warn"))
	quiet := fs.Bool("quiet", false, "no summary on stderr at exit")
	fleetURL := fs.String("fleet", "", fleetUsage)
	// The upstream's command line is not ahead's: its flags (npx -y ...)
	// must not be parsed as ours.
	if err := parseFlagsUntilArg(fs, args); err != nil {
		return err
	}
	logger, err := newLogger(e, *logLevel, "warn")
	if err != nil {
		return err
	}
	if fs.NArg() > 0 {
		u := commandUpstream(fs.Args())
		c.Upstream = &u
	}
	cfg, err := c.Config()
	if ue, ok := errors.AsType[*config.UsageError](err); ok {
		return usageErr("%s", ue.Msg)
	} else if err != nil {
		return err
	}
	if cfg.Fleet, err = withFleetFlag(cfg.Fleet, *fleetURL); err != nil {
		return err
	}
	opts := &server.Options{Logger: logger, Stderr: e.stderr, Summary: e.stderr, Version: version}
	if *quiet {
		opts.Summary = nil
	}
	return server.ServeMCP(ctx, cfg, e.stdin, e.stdout, opts)
}

// commandUpstream is the upstream given on the command line (ahead mcp,
// ahead init).
func commandUpstream(args []string) mcpproxy.Upstream {
	return mcpproxy.Upstream{Name: starter.ServerName(args), Command: args[0], Args: args[1:], Limits: sched.Limits{}}
}
