package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.yaml.in/yaml/v3"

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
	if err := parseFlags(fs, args); err != nil {
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
	if *configFile != "" {
		mc, err := loadMCPConfig(*configFile)
		if err != nil {
			return err
		}
		for _, u := range mc.upstreams {
			for _, v := range ups {
				if v.Name == u.Name {
					return usageErr("the command's upstream is named %q, like one in %s: rename that one", u.Name, *configFile)
				}
			}
			ups = append(ups, u)
		}
		pol = mc.policy
		*trust = *trust || mc.trust
		if *patternsFile == "" {
			*patternsFile = mc.patterns
		}
		if *tracesDir == "" {
			*tracesDir = mc.traces
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
		o, err := predict.NewOnline(pool, nil)
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
		w, err := trace.NewWriter(*tracesDir, &trace.WriterOptions{Prefix: "mcp"})
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

// mcpConfig is what ahead mcp takes from ahead's configuration file; the
// rest of the file (listen, backends, engine) belongs to ahead serve, which
// checks it.
type mcpConfig struct {
	upstreams []mcpproxy.Upstream
	policy    *policy.Policy
	trust     bool
	patterns  string
	traces    string
}

func loadMCPConfig(file string) (*mcpConfig, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if len(doc.Content) == 0 {
		return nil, fmt.Errorf("%s: empty configuration", file)
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s:%d:%d: want a mapping at the top level", file, root.Line, root.Column)
	}
	dir := filepath.Dir(file)
	abs := func(p string) string {
		if p == "" || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(dir, p)
	}
	mc := &mcpConfig{}
	var errs []error
	path := func(v *yaml.Node, field, sub string) string {
		// A path, or a mapping with the path under sub (serve's shape).
		if v.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(v.Content); i += 2 {
				if v.Content[i].Value == sub {
					v = v.Content[i+1]
					break
				}
			}
		}
		if v.Kind != yaml.ScalarNode {
			errs = append(errs, fmt.Errorf("%s:%d:%d: %s: want a path", file, v.Line, v.Column, field))
			return ""
		}
		return abs(v.Value)
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		switch k.Value {
		case mcpServersKey:
			ups, err := parseMCPServers(v, file)
			if err != nil {
				errs = append(errs, err)
			}
			for i := range ups {
				ups[i].Dir = abs(ups[i].Dir)
			}
			mc.upstreams = ups
		case policy.Key:
			p, err := policy.FromNode(v, file)
			if err != nil {
				errs = append(errs, err)
			}
			mc.policy = p
		case "trust_annotations":
			if err := v.Decode(&mc.trust); err != nil {
				errs = append(errs, fmt.Errorf("%s:%d:%d: trust_annotations: want true or false", file, v.Line, v.Column))
			}
		case "patterns":
			mc.patterns = path(v, "patterns", "pool")
		case "traces":
			mc.traces = path(v, "traces", "dir")
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return mc, nil
}
