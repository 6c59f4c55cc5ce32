package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ahead-dev/ahead/config"
	"github.com/ahead-dev/ahead/engine"
	"github.com/ahead-dev/ahead/mcpproxy"
	"github.com/ahead-dev/ahead/pattern"
	"github.com/ahead-dev/ahead/policy"
	"github.com/ahead-dev/ahead/predict"
	"github.com/ahead-dev/ahead/trace"
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
	configFile := fs.String("config", "", "ahead's YAML `file`: its mcpServers, speculation_policy, patterns, traces and trust_annotations are used")
	patternsFile := fs.String("patterns", "", "pattern pool `file` written by ahead mine (predictions); none: no speculation")
	policyFile := fs.String("policy", "", "speculation policy YAML `file` (overrides the config's); none: deny all, except what --trust-annotations allows")
	tracesDir := fs.String("traces", "", "record every call to JSONL traces in `dir`")
	trust := fs.Bool("trust-annotations", false, "let the upstreams' tool annotations feed the default policy: readOnlyHint tools that are not open-world speculate, the rest never")
	logLevel := fs.String("log-level", "warn", "stderr log `level`: debug, info, warn or error")
	// The upstream's command line is not ahead's: its flags (npx -y ...)
	// must not be parsed as ours.
	if err := parseFlagsUntilArg(fs, args); err != nil {
		return err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return usageErr("--log-level: %v", err)
	}
	logger := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: level}))

	var ups []mcpproxy.Upstream
	if fs.NArg() > 0 {
		ups = append(ups, commandUpstream(fs.Args()))
	}
	var pol *policy.Policy
	var maxPredictions int
	traceOpts := &trace.WriterOptions{Prefix: "mcp"}
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
		*trust = *trust || cfg.TrustAnnotations
		if *patternsFile == "" && cfg.Patterns != nil {
			*patternsFile = cfg.Patterns.Pool
			maxPredictions = cfg.Patterns.MaxPredictions
		}
		if *tracesDir == "" && cfg.Traces != nil {
			*tracesDir = cfg.Traces.Dir
			if cfg.Traces.Prefix != "" {
				traceOpts.Prefix = cfg.Traces.Prefix
			}
			traceOpts.MaxBytes = cfg.Traces.MaxFileBytes
		}
	}
	if len(ups) == 0 {
		return usageErr("no MCP server: give one after -- (ahead mcp -- npx -y SERVER ...) or in --config")
	}
	if *policyFile != "" {
		p, err := policy.Load(*policyFile)
		if err != nil {
			return err
		}
		pol = p
	}

	var pred engine.Predictor
	if *patternsFile != "" {
		pool, err := pattern.Load(*patternsFile)
		if err != nil {
			return fmt.Errorf("patterns: %w", err)
		}
		_, o, err := newPredictor(pool, &predict.OnlineOptions{MaxPredictions: maxPredictions})
		if err != nil {
			return fmt.Errorf("patterns: %s: %w", *patternsFile, err)
		}
		pred = o
	}
	var rec engine.Recorder
	if *tracesDir != "" {
		if err := os.MkdirAll(*tracesDir, 0o755); err != nil {
			return fmt.Errorf("traces: %w", err)
		}
		w, err := trace.NewWriter(*tracesDir, traceOpts)
		if err != nil {
			return fmt.Errorf("traces: %w", err)
		}
		defer w.Close()
		rec = w
	}

	proxy, pol, err := newMCPFront(ctx, ups, pol, *trust, logger, e.stderr)
	if err != nil {
		return err
	}
	defer proxy.Close()
	eng := engine.New(engine.Options{
		Backends:  proxy.Backends(),
		Route:     proxy.Route,
		Policy:    pol,
		Predictor: pred,
		Recorder:  rec,
		Logger:    logger,
	})
	defer eng.Close()
	proxy.Attach(eng)
	t := &mcp.IOTransport{Reader: io.NopCloser(e.stdin), Writer: nopWriteCloser{e.stdout}}
	return proxy.Serve(ctx, t)
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
