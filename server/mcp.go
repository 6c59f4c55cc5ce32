package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ahead-dev/ahead/config"
	"github.com/ahead-dev/ahead/engine"
	"github.com/ahead-dev/ahead/httpapi"
	"github.com/ahead-dev/ahead/learn"
	"github.com/ahead-dev/ahead/mcpproxy"
	"github.com/ahead-dev/ahead/policy"
	"github.com/ahead-dev/ahead/trace"
)

// The MCP front of ahead, shared by ServeMCP (ahead mcp, stdio) and Run
// (ahead serve, streamable HTTP at /mcp). The engine needs the proxy's
// backends and router when it is built, and the proxy needs the engine to
// serve, so the wiring has three steps:
//
//	p, pol, err := newMCPFront(ctx, cfg.Upstreams, cfg.Policy, cfg.TrustAnnotations, true, cfg.MaxBody, cfg.MaxMCPSessions, opts)
//	eng := engine.New(&engine.Options{Backends: <yours + p.Backends()>, Route: <yours, then p.Route>, Policy: pol, ...})
//	mountMCP(mux, p, eng, cfg.MaxBody)   // serves /mcp
//	...
//	eng.Close(); p.Close()

// newMCPFront builds the proxy for the upstreams and returns the engine's
// policy: base (the operator's; nil denies all) with the annotations of
// trusted upstreams folded in under it. trustAll trusts every upstream
// (--trust-annotations, or the configuration's trust_annotations). With
// probe, the trusted upstreams are started now to read their annotations;
// without, they are read from each session's own connection. maxBody
// bounds a request body over streamable HTTP (0: httpapi's default, as
// for max_body); maxSessions the sessions held at once (0: the proxy's
// default, as for max_mcp_sessions).
func newMCPFront(ctx context.Context, ups []mcpproxy.Upstream, base *policy.Policy, trustAll, probe bool, maxBody int64, maxSessions int, o *Options) (*mcpproxy.Proxy, *policy.Policy, error) {
	if trustAll {
		for i := range ups {
			ups[i].TrustAnnotations = true
		}
	}
	// The operator's policy is the base of the annotation rules, at
	// startup (below) and when sessions list new or changed tools.
	p, err := mcpproxy.New(&mcpproxy.Options{Upstreams: ups, Logger: o.Logger, Stderr: o.Stderr, Version: o.Version, Policy: base,
		MaxBodyBytes: mcpMaxBody(maxBody), MaxSessions: maxSessions})
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

// upstreamStats returns the MCP upstreams' state for /v1/stats.
func upstreamStats(p *mcpproxy.Proxy) func() []httpapi.UpstreamStats {
	return func() []httpapi.UpstreamStats {
		var out []httpapi.UpstreamStats
		for _, u := range p.Upstreams() {
			out = append(out, httpapi.UpstreamStats{Name: u.Name, Revision: u.Revision, Shared: u.Shared, Connections: u.Connections})
		}
		return out
	}
}

// mountMCP serves the proxy over streamable HTTP at /mcp of mux, with
// tools/call going through eng (built with the proxy's backends and route),
// and request bodies bounded by maxBody (max_body, as the tool API's).
func mountMCP(mux *http.ServeMux, p *mcpproxy.Proxy, eng mcpproxy.Caller, maxBody int64) {
	p.Attach(eng)
	mux.Handle("/mcp", mcpBodyLimit(p.Handler(), mcpMaxBody(maxBody)))
}

func mcpMaxBody(n int64) int64 {
	if n <= 0 {
		return httpapi.DefaultMaxBodyBytes
	}
	return n
}

// mcpBodyLimit answers a body declared larger than limit with 413 and a
// JSON-RPC error, before anything is read (issue 23: /mcp took the SDK's
// 4 MiB, whatever max_body said). A body that does not declare its length
// is cut by the SDK at the same limit, which answers 413 "request body
// exceeds N bytes".
func mcpBodyLimit(h http.Handler, limit int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > limit {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Connection", "close") // the body is not read
			w.WriteHeader(http.StatusRequestEntityTooLarge)
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"request body of %d bytes is larger than max_body (%d bytes)"}}`+"\n", r.ContentLength, limit)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// ServeMCP serves one MCP session reading in and writing out (ahead mcp:
// stdin and stdout) in front of cfg's upstreams, until in ends or ctx is
// done, then stops what it started and writes the engine's summary to
// opts.Summary. Neither in nor out is closed. Of cfg it uses Upstreams,
// Policy, TrustAnnotations, Patterns, Traces (Dir, Prefix, MaxFileBytes)
// and Fleet;
// the engine runs with its defaults. There is one session, so the trusted
// upstreams' annotations are read from its own connection when it starts,
// rather than from a second launch (issue 14).
func ServeMCP(ctx context.Context, cfg *config.Config, in io.Reader, out io.Writer, opts *Options) error {
	o := opts.withDefaults()
	var pred *learn.Predictor
	var rec *trace.Writer
	var err error
	dir := ""
	if cfg.Traces != nil {
		dir = cfg.Traces.Dir
	}
	if dir != "" {
		err := os.MkdirAll(dir, 0o755)
		if err == nil {
			rec, err = trace.NewWriter(dir, &trace.WriterOptions{Prefix: cfg.Traces.Prefix, MaxBytes: cfg.Traces.MaxFileBytes,
				Logger: o.Logger, FailOnLoss: cfg.Traces.FailOnLoss})
		}
		if err != nil {
			return fmt.Errorf("traces: %w", err)
		}
	}
	proxy, pol, err := newMCPFront(ctx, cfg.Upstreams, cfg.Policy, cfg.TrustAnnotations, false, 0, 0, o)
	if err != nil {
		return errors.Join(err, closeMCP(nil, nil, nil, rec))
	}
	// The fleet first: the pool may learn with it (one session per
	// process is where learning together pays most).
	fl, err := joinFleet(ctx, cfg.Fleet, proxy.Backends(), pol, nil, o.Logger)
	if err != nil {
		return errors.Join(err, closeMCP(nil, proxy, nil, rec))
	}
	if fl != nil {
		defer fl.Close() // after the engine and the final checkpoint (closeMCP)
	}
	lrn, err := learnWithFleet(ctx, fl, cfg.Fleet, cfg.Patterns)
	if err != nil {
		return errors.Join(err, closeMCP(nil, proxy, nil, rec))
	}
	if lrn != nil {
		defer lrn.Close()
	}
	if cfg.Patterns != nil {
		if pred, err = loadPredictor(cfg.Patterns, dir, 0, 0, lrn, o.Logger); err != nil {
			return errors.Join(err, closeMCP(nil, proxy, nil, rec))
		}
		if lrn != nil {
			if err := adoptFleetPool(ctx, lrn, pred, o.Logger); err != nil {
				return errors.Join(err, closeMCP(nil, proxy, pred, rec))
			}
		} else if cfg.Patterns.Learn && cfg.Patterns.Pool != "" && dir == "" {
			o.Logger.Info("patterns: without --traces, new patterns are found only in this session's calls; record with --traces to learn across sessions")
		}
	}
	eo := engine.Options{
		Backends: proxy.Backends(),
		Route:    proxy.Route,
		Policy:   pol,
		Logger:   o.Logger,
	}
	// Interface fields stay nil (not a typed nil) when unset.
	if pred != nil {
		eo.Predictor = pred
	}
	switch {
	case rec != nil && lrn != nil:
		eo.Recorder = recorders{rec, lrn}
	case rec != nil:
		eo.Recorder = rec
	case lrn != nil:
		eo.Recorder = lrn
	}
	if fl != nil {
		eo.Fleet = fl
	}
	eng := engine.New(&eo)
	if fl != nil {
		fl.Start(eng)
		// One session per process, whose first calls come at once: the
		// replica catches up with the fleet first, within a bound (a
		// fleet down or slow only delays the start by it; the calls then
		// fail closed), so that they may reuse what the fleet shares.
		rctx, cancel := context.WithTimeout(ctx, mcpCatchUp)
		if err := fl.Ready(rctx); err != nil {
			o.Logger.Warn("fleet: not caught up at start-up; shared results are not reused until it is", "fleet", fl.Name(), "err", err)
		}
		cancel()
	}
	proxy.Attach(eng)
	// The end of the input is the agent hanging up: a clean exit, with
	// what was learnt checkpointed.
	err = proxy.Serve(ctx, &mcp.IOTransport{Reader: io.NopCloser(in), Writer: nopWriteCloser{out}})
	err = errors.Join(err, closeMCP(eng, proxy, pred, rec))
	if o.Summary != nil {
		fmt.Fprintln(o.Summary, eng.Stats().Summary())
	}
	return err
}

// mcpCatchUp bounds how long ahead mcp waits, at start-up, for its replica
// to catch up with the fleet.
const mcpCatchUp = time.Second

// closeMCP stops what ServeMCP started, in dependency order: the engine
// (cancelling speculative work and writing its records), the upstreams,
// then the final checkpoint and the traces. nil parts are skipped.
func closeMCP(eng *engine.Engine, proxy *mcpproxy.Proxy, pred *learn.Predictor, rec *trace.Writer) error {
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
