package main

import (
	"cmp"
	"context"
	"fmt"

	"github.com/ahead-dev/ahead/config"
	"github.com/ahead-dev/ahead/mcpproxy"
	"github.com/ahead-dev/ahead/policy"
	"github.com/ahead-dev/ahead/sched"
	"github.com/ahead-dev/ahead/server"
	"github.com/ahead-dev/ahead/starter"
)

const mcpDescription = `Serve MCP over stdio in front of MCP servers: the upstream given after --
(the form an agent's MCP configuration launches), and the mcpServers of the
--config file. Every tools/call goes through ahead's engine (recorded with
--traces, predicted with --patterns, speculated as --policy allows) and its
result carries _meta.ahead.source (executed, reused or promoted); the rest
of MCP is forwarded. Example, in an agent's MCP configuration:

  "command": "ahead",
  "args": ["mcp", "--traces", "/var/lib/ahead/traces", "--",
           "npx", "-y", "@modelcontextprotocol/server-filesystem", "/srv"]

Logs go to stderr; stdout is the MCP channel.`

func runMCP(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "mcp", "mcp [flags] [-- COMMAND ARGS...]", mcpDescription)
	configFile := fs.String("config", "", "ahead's YAML `file`: its mcpServers, speculation_policy, patterns, traces, trust_annotations and fleet are used")
	patternsFile := fs.String("patterns", "", "pattern pool `file`: predictions come from it, and what is learnt is written back every 5m and at exit (a file that does not exist yet starts empty); none: no predictions")
	policyFile := fs.String("policy", "", "speculation policy YAML `file` (overrides the config's); none: deny all, except what --trust-annotations allows")
	tracesDir := fs.String("traces", "", "record every call to JSONL traces in `dir`")
	failOnLoss := fs.Bool("traces-fail-on-loss", false, "exit 1 at the end if any trace record could not be written (a full disk; the loss is reported either way)")
	recentDir := fs.String("recent", "", "with a pool that learns and no --traces: keep the recent sessions in `dir` (files 0600, at most 64 MiB) so that the next process keeps learning from them; default: the pool file's name + .recent; none: keep nothing")
	trust := fs.Bool("trust-annotations", false, "let the upstreams' tool annotations feed the default policy: readOnlyHint tools that are not open-world speculate, the rest never")
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

	var ups []mcpproxy.Upstream
	if fs.NArg() > 0 {
		ups = append(ups, commandUpstream(fs.Args()))
	}
	var pol *policy.Policy
	var patterns *config.Patterns
	var traces *config.Traces
	var fleet *config.Fleet
	if *configFile != "" {
		// The file is read as ahead serve reads it, so one file serves
		// both commands and its errors are the same. Of it, ahead mcp uses
		// the MCP parts; listen, backends and engine are ahead serve's.
		cfg, err := (&config.Loader{BackendsOptional: true}).Load(*configFile)
		if err != nil {
			return err
		}
		for _, u := range cfg.Upstreams {
			for _, v := range ups {
				if v.Name == u.Name {
					return usageErr("the command's upstream is named %q, like one in %s: rename that one", u.Name, *configFile)
				}
			}
			ups = append(ups, u)
		}
		pol = cfg.Policy
		fleet = cfg.Fleet
		*trust = *trust || cfg.TrustAnnotations
		patterns = cfg.Patterns
		if t := cfg.Traces; t != nil {
			// Its traces are named for the command unless it names them.
			traces = &config.Traces{Dir: t.Dir, Prefix: cmp.Or(t.Prefix, "mcp"), MaxFileBytes: t.MaxFileBytes, FailOnLoss: t.FailOnLoss}
		}
	}
	if *tracesDir != "" {
		traces = &config.Traces{Dir: *tracesDir, Prefix: "mcp"}
	}
	if traces != nil && *failOnLoss {
		traces.FailOnLoss = true
	}
	switch *patternsFile {
	case "":
	case none:
		patterns = nil
	default:
		// As the config's short form: learn, into the file itself.
		patterns = &config.Patterns{Pool: *patternsFile, Learn: true, Checkpoint: *patternsFile, CheckpointEvery: config.DefaultCheckpointEvery}
	}
	switch {
	case *recentDir != "" && *tracesDir != "":
		return usageErr("--recent and --traces: give one (with --traces the recordings are what the pool learns from)")
	case patterns != nil && patterns.Learn && traces == nil && *recentDir != none:
		traces = config.RecentTraces(patterns, *recentDir)
	}
	if len(ups) == 0 {
		return usageErr("no MCP server: give one after -- (ahead mcp -- npx -y SERVER ...) or in --config")
	}
	if *policyFile != "" && *policyFile != none {
		p, err := policy.Load(*policyFile)
		if err != nil {
			return err
		}
		pol = p
	} else if *policyFile == none {
		pol = nil
	}

	if fleet, err = withFleetFlag(fleet, *fleetURL); err != nil {
		return err
	}
	cfg := &config.Config{Upstreams: ups, Policy: pol, TrustAnnotations: *trust, Patterns: patterns, Traces: traces, Fleet: fleet}
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
