package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ahead-dev/ahead/config"
	"github.com/ahead-dev/ahead/engine"
	"github.com/ahead-dev/ahead/mcpproxy"
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
	patternsFile := fs.String("patterns", "", "pattern pool `file`: predictions come from it, and what is learnt is written back every 5m and at exit (a file that does not exist yet starts empty); none: no predictions")
	policyFile := fs.String("policy", "", "speculation policy YAML `file` (overrides the config's); none: deny all, except what --trust-annotations allows")
	tracesDir := fs.String("traces", "", "record every call to JSONL traces in `dir`")
	trust := fs.Bool("trust-annotations", false, "let the upstreams' tool annotations feed the default policy: readOnlyHint tools that are not open-world speculate, the rest never")
	logLevel := fs.String("log-level", "", fmt.Sprintf(logLevelUsage, "warn"))
	quiet := fs.Bool("quiet", false, "no summary on stderr at exit")
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
		patterns = cfg.Patterns
		if *tracesDir == "" && cfg.Traces != nil {
			*tracesDir = cfg.Traces.Dir
			if cfg.Traces.Prefix != "" {
				traceOpts.Prefix = cfg.Traces.Prefix
			}
			traceOpts.MaxBytes = cfg.Traces.MaxFileBytes
		}
	}
	switch *patternsFile {
	case "":
	case none:
		patterns = nil
	default:
		// As the config's short form: learn, into the file itself.
		patterns = &config.Patterns{Pool: *patternsFile, Learn: true, Checkpoint: *patternsFile, CheckpointEvery: config.DefaultCheckpointEvery}
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

	var pred *predict.Served
	if patterns != nil {
		if pred, err = loadPredictor(patterns, *tracesDir, 0, logger); err != nil {
			return err
		}
		if patterns.Learn && *tracesDir == "" {
			logger.Info("patterns: without --traces, new patterns are found only in this session's calls; record with --traces to learn across sessions")
		}
	}
	var rec *trace.Writer
	if *tracesDir != "" {
		if err := os.MkdirAll(*tracesDir, 0o755); err != nil {
			return fmt.Errorf("traces: %w", err)
		}
		if rec, err = trace.NewWriter(*tracesDir, traceOpts); err != nil {
			return fmt.Errorf("traces: %w", err)
		}
	}

	// Over stdio there is one session: the trusted upstreams' annotations
	// are read from its own connection when it starts, rather than from a
	// second launch at startup (issue 14).
	proxy, pol, err := newMCPFront(ctx, ups, pol, *trust, false, logger, e.stderr)
	if err != nil {
		return errors.Join(err, closeMCP(nil, nil, pred, rec))
	}
	opts := engine.Options{
		Backends: proxy.Backends(),
		Route:    proxy.Route,
		Policy:   pol,
		Logger:   logger,
	}
	// Interface fields stay nil (not a typed nil) when unset.
	if pred != nil {
		opts.Predictor = pred
	}
	if rec != nil {
		opts.Recorder = rec
	}
	eng := engine.New(opts)
	proxy.Attach(eng)
	t := &mcp.IOTransport{Reader: io.NopCloser(e.stdin), Writer: nopWriteCloser{e.stdout}}
	// The end of stdin is the agent hanging up: a clean exit, with what
	// was learnt checkpointed and the summary printed.
	err = proxy.Serve(ctx, t)
	err = errors.Join(err, closeMCP(eng, proxy, pred, rec))
	if !*quiet {
		fmt.Fprintln(e.stderr, eng.Stats().Summary())
	}
	return err
}

// closeMCP stops what ahead mcp started, in dependency order: the engine
// (cancelling speculative work and writing its records), the upstreams,
// then the final checkpoint and the traces. nil parts are skipped.
func closeMCP(eng *engine.Engine, proxy *mcpproxy.Proxy, pred *predict.Served, rec *trace.Writer) error {
	var errs []error
	if eng != nil {
		eng.Close()
	}
	if proxy != nil {
		errs = append(errs, proxy.Close())
	}
	if pred != nil {
		errs = append(errs, pred.Close())
	}
	if rec != nil {
		errs = append(errs, rec.Close())
	}
	return errors.Join(errs...)
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
