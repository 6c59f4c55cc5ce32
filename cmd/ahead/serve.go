package main

import (
	"context"
	"fmt"
	"net"

	"github.com/ahead-dev/ahead/config"
	"github.com/ahead-dev/ahead/server"
)

const fleetUsage = "join the fleet of ahead replicas on the NATS JetStream server at `URL` (nats://HOST:PORT or tls://HOST:PORT; the config's fleet block otherwise)"

// withFleetFlag applies --fleet URL to the configuration's fleet block: it
// joins that server instead (keeping the block's other settings).
func withFleetFlag(fc *config.Fleet, url string) (*config.Fleet, error) {
	if url == "" {
		return fc, nil
	}
	if msg, ok := config.CheckFleetURL(url); !ok {
		return nil, usageErr("--fleet: %s", msg)
	}
	if fc == nil {
		return &config.Fleet{URL: url, ShareConversation: true}, nil
	}
	c := *fc
	c.URL, c.Embedded = url, nil
	return &c, nil
}

const serveDescription = `Serve the HTTP tool API in front of the configured backends: agents POST
their tool calls to /v1/sessions/{session}/calls, ahead executes them (or
hands over a result it computed speculatively), records them, and runs the
predicted next calls the policy allows. Also serves /metrics, /healthz and
/v1/stats, and MCP over streamable HTTP at /mcp when the config has
mcpServers.

On SIGINT or SIGTERM it stops accepting connections, lets the calls in
flight finish (up to shutdown_grace), cancels speculative work, flushes the
traces and exits 0.`

func runServe(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "serve", "serve --config ahead.yaml [--listen ADDR]", serveDescription)
	configPath := fs.String("config", "", "the configuration `file` (required)")
	listen := fs.String("listen", "", "listen on `HOST:PORT` instead of the config's listen (port 0 picks a free port)")
	insecure := fs.Bool("insecure", false, "serve on an address other than loopback without auth_token_env (anyone who reaches it can run your tools)")
	logLevel := fs.String("log-level", "", fmt.Sprintf(logLevelUsage, "info"))
	quiet := fs.Bool("quiet", false, "no summary at exit")
	fleetURL := fs.String("fleet", "", fleetUsage)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErr("unexpected arguments %q", fs.Args())
	}
	if *configPath == "" {
		return usageErr("--config is required")
	}
	if *listen != "" {
		if _, _, err := net.SplitHostPort(*listen); err != nil {
			return usageErr("--listen: want HOST:PORT, got %q", *listen)
		}
	}
	logger, err := newLogger(e, *logLevel, "info")
	if err != nil {
		return err
	}
	cfg, err := config.Load(*configPath)
	if err != nil {
		return err
	}
	if *listen != "" {
		cfg.Listen = *listen
	}
	if cfg.Fleet, err = withFleetFlag(cfg.Fleet, *fleetURL); err != nil {
		return err
	}
	if cfg.AuthToken == "" && !*insecure && !loopback(cfg.Listen) {
		return usageErr("listening on %s, beyond this machine, without a token: set auth_token_env in the config (clients then send Authorization: Bearer TOKEN), or pass --insecure", cfg.Listen)
	}
	opts := &server.Options{Logger: logger, Stderr: e.stderr, Summary: e.stderr, Version: version}
	if *quiet {
		opts.Summary = nil
	}
	return server.Run(ctx, cfg, opts)
}

// loopback reports whether addr (HOST:PORT) listens on this machine only.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
