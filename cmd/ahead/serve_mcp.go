package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"

	"github.com/ahead-dev/ahead/mcpproxy"
	"github.com/ahead-dev/ahead/policy"
	"github.com/ahead-dev/ahead/sched"
)

// The MCP front of ahead, shared by `ahead mcp` (stdio) and `ahead serve`
// (streamable HTTP at /mcp). The engine needs the proxy's backends and
// router when it is built, and the proxy needs the engine to serve, so the
// wiring has three steps:
//
//	cfg, err := config.Load(file)  // cfg.Upstreams: the mcpServers block
//	p, pol, err := newMCPFront(ctx, cfg.Upstreams, cfg.Policy, cfg.TrustAnnotations, true, logger, os.Stderr)
//	eng := engine.New(engine.Options{Backends: <yours + p.Backends()>, Route: <yours, then p.Route>, Policy: pol, ...})
//	mountMCP(mux, p, eng)   // serves /mcp
//	...
//	eng.Close(); p.Close()

// commandUpstream is the upstream given on ahead mcp's command line.
func commandUpstream(args []string) mcpproxy.Upstream {
	return mcpproxy.Upstream{Name: filepath.Base(args[0]), Command: args[0], Args: args[1:], Limits: sched.Limits{}}
}

// newMCPFront builds the proxy for the upstreams and returns the engine's
// policy: base (the operator's; nil denies all) with the annotations of
// trusted upstreams folded in under it. trustAll trusts every upstream
// (--trust-annotations, or the configuration's trust_annotations).
func newMCPFront(ctx context.Context, ups []mcpproxy.Upstream, base *policy.Policy, trustAll, probe bool, logger *slog.Logger, stderr io.Writer) (*mcpproxy.Proxy, *policy.Policy, error) {
	if trustAll {
		for i := range ups {
			ups[i].TrustAnnotations = true
		}
	}
	// The operator's policy is the base of the annotation rules, at
	// startup (below) and when sessions list new or changed tools.
	p, err := mcpproxy.New(mcpproxy.Options{Upstreams: ups, Logger: logger, Stderr: stderr, Version: version, Policy: base})
	if err != nil {
		return nil, nil, err
	}
	if !probe {
		return p, base, nil
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
