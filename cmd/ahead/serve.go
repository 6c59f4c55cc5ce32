package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"golang.org/x/net/netutil"

	"github.com/ahead-dev/ahead/backend/remote"
	"github.com/ahead-dev/ahead/config"
	"github.com/ahead-dev/ahead/engine"
	"github.com/ahead-dev/ahead/httpapi"
	"github.com/ahead-dev/ahead/mcpproxy"
	"github.com/ahead-dev/ahead/predict"
	"github.com/ahead-dev/ahead/speculator"
	"github.com/ahead-dev/ahead/trace"
)

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
	if cfg.AuthToken == "" && !*insecure && !loopback(cfg.Listen) {
		return usageErr("listening on %s, beyond this machine, without a token: set auth_token_env in the config (clients then send Authorization: Bearer TOKEN), or pass --insecure", cfg.Listen)
	}
	summary := e.stderr
	if *quiet {
		summary = nil
	}
	return serve(ctx, cfg, logger, e.stderr, summary)
}

// serve runs ahead's server for cfg until ctx is done, then shuts down
// gracefully. Its log announces the address it listens on; stderr receives
// the stderr of MCP upstream processes. At exit the engine's summary goes
// to summary, unless it is nil.
func serve(ctx context.Context, cfg *config.Config, logger *slog.Logger, stderr, summary io.Writer) (err error) {
	// Listen first: a port in use should fail before upstreams start.
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return err
	}
	if cfg.MaxConnections > 0 {
		ln = netutil.LimitListener(ln, cfg.MaxConnections)
	}
	st, err := openStack(ctx, cfg, logger, stderr)
	if err != nil {
		ln.Close()
		return err
	}
	defer func() {
		err = errors.Join(err, st.close())
		if summary != nil {
			fmt.Fprintln(summary, st.eng.Stats().Summary())
		}
	}()

	mux := http.NewServeMux()
	api := httpapi.New(st.eng, &httpapi.Options{MaxBodyBytes: cfg.MaxBody, Gatherer: st.reg, Logger: logger})
	mux.Handle("/", api)
	if cfg.LLM != nil {
		gw, err := newGateway(cfg.LLM, st.eng, logger)
		if err != nil {
			return err
		}
		defer gw.Close() // after the server stops: its parsers are done
		// The API's own /v1/sessions/… and /v1/stats routes are more
		// specific and win; every other /v1/ path is the models'.
		mux.Handle("/v1/", gw.Handler())
		mux.Handle("/v1/sessions/", api)
		mux.Handle("/v1/stats", api)
	}
	if st.mcp != nil {
		mountMCP(mux, st.mcp, st.eng)
	}
	// Requests live in a context the end of the grace period cancels, with
	// a cause the API answers 503 for.
	reqCtx, cutOff := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cutOff(nil)
	srv := &http.Server{
		BaseContext: func(net.Listener) context.Context { return reqCtx },
		// Reading a request and each write of an answer are bounded per
		// request (guard); calls and streams themselves may take as long
		// as the tools and models do.
		Handler:           guard(mux, cfg.ReadTimeout, cfg.WriteTimeout, cfg.AuthToken),
		ReadHeaderTimeout: cmp.Or(cfg.ReadTimeout, 10*time.Second),
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }() // owned: joined below on every path
	logger.Info("ahead serve: listening", "addr", "http://"+ln.Addr().String(),
		"backends", len(st.backends), "patterns", st.patternCount(), "traces", tracesDir(cfg))

	select {
	case err := <-served:
		// The listener failed; nothing more will be accepted.
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
	}
	logger.Info("ahead serve: shutting down", "grace", cfg.ShutdownGrace)
	// No speculation from here on: nothing will claim it. Promoted runs
	// (calls in flight are waiting for them) are authoritative and go on.
	st.quiesce()
	// Shutdown closes the listener at once and waits for the calls in
	// flight; their contexts stay live, so they finish normally.
	grace, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownGrace)
	defer cancel()
	if err := srv.Shutdown(grace); err != nil {
		// Calls still running after the grace period are cut off: their
		// contexts are cancelled, which cancels their tool calls; they
		// are answered 503 and recorded as failed. A moment to answer,
		// then the connections close.
		cutOff(httpapi.ErrShutdown)
		answer, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		if srv.Shutdown(answer) != nil {
			srv.Close()
		}
		<-served
		return fmt.Errorf("shutdown: calls still in flight after %v were cancelled", cfg.ShutdownGrace)
	}
	<-served // http.ErrServerClosed
	logger.Info("ahead serve: stopped")
	return nil
}

// stack is everything serve runs besides the HTTP server.
type stack struct {
	eng       *engine.Engine
	reg       *prometheus.Registry
	backends  map[string]engine.Backend
	remotes   []*remote.Backend
	recorder  *trace.Writer
	predictor *predict.Served
	spec      *speculator.Speculator   // nil without a speculator block
	mcp       *mcpproxy.Proxy          // nil without mcpServers
	tracing   *sdktrace.TracerProvider // nil unless OTEL_EXPORTER_OTLP_* names an endpoint
}

// openStack builds the engine and what it needs from cfg. On error,
// whatever was started is stopped.
func openStack(ctx context.Context, cfg *config.Config, logger *slog.Logger, stderr io.Writer) (_ *stack, err error) {
	st := &stack{reg: prometheus.NewRegistry(), backends: make(map[string]engine.Backend)}
	defer func() {
		if err != nil {
			err = errors.Join(err, st.close())
		}
	}()
	st.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	routes := make(map[string]string) // tool → backend name
	fallback := ""                    // the backend without a tools list
	for _, bc := range cfg.Backends {
		b, err := cfg.NewBackend(bc)
		if err != nil {
			return nil, err
		}
		if r, ok := b.(*remote.Backend); ok {
			st.remotes = append(st.remotes, r)
		}
		st.backends[bc.Name] = engine.Backend{Backend: b, Tools: bc.Tools, Limits: bc.Limits, PerSession: bc.PerSession}
		for _, t := range bc.Tools {
			routes[t] = bc.Name
		}
		if bc.Tools == nil {
			fallback = bc.Name
		}
	}
	if cfg.Traces != nil {
		st.recorder, err = trace.NewWriter(cfg.Traces.Dir, &trace.WriterOptions{Prefix: cfg.Traces.Prefix, MaxBytes: cfg.Traces.MaxFileBytes, MaxFiles: cfg.Traces.MaxFiles})
		if err != nil {
			return nil, fmt.Errorf("traces: %w", err)
		}
	}
	if cfg.Patterns != nil {
		dir := ""
		if cfg.Traces != nil {
			dir = cfg.Traces.Dir
		}
		if st.predictor, err = loadPredictor(cfg.Patterns, dir, cfg.Engine.MaxSessions, logger); err != nil {
			return nil, err
		}
		p := st.predictor
		st.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "ahead_checkpoint_failures_total", Help: "Periodic checkpoints of the pattern pool that failed (each is logged).",
		}, func() float64 { return float64(p.CheckpointFailures()) }))
	}
	pol := cfg.Policy
	var mcpRoute func(string) (string, bool)
	if len(cfg.Upstreams) > 0 {
		// The MCP front (serve_mcp.go) starts the trusted upstreams here
		// to read their annotations into the policy.
		if st.mcp, pol, err = newMCPFront(ctx, cfg.Upstreams, pol, cfg.TrustAnnotations, true, logger, stderr); err != nil {
			return nil, fmt.Errorf("%s: %w", config.MCPServersKey, err)
		}
		maps.Copy(st.backends, st.mcp.Backends())
		mcpRoute = st.mcp.Route
	}

	opts := cfg.Engine.Options()
	opts.Backends = st.backends
	// One router for every kind of backend, so that the configuration's
	// lists win, MCP upstreams come next and the catch-all backend last,
	// whatever the map order.
	opts.Route = func(tool string) (string, bool) {
		if b, ok := routes[tool]; ok {
			return b, true
		}
		if mcpRoute != nil {
			if b, ok := mcpRoute(tool); ok {
				return b, true
			}
		}
		return fallback, fallback != ""
	}
	opts.Policy, opts.Registerer, opts.Logger = pol, st.reg, logger
	// Interface fields stay nil (not a typed nil) when unset.
	if st.predictor != nil {
		opts.Predictor = st.predictor
	}
	if cfg.Speculator != nil {
		if st.spec, err = newSpeculator(cfg.Speculator, slices.Sorted(maps.Keys(routes)), pol, &st.eng, st.reg, logger); err != nil {
			return nil, err
		}
		if st.predictor != nil {
			opts.Predictor = predict.Join(st.predictor, st.spec)
		} else {
			opts.Predictor = st.spec
		}
	}
	if st.recorder != nil {
		opts.Recorder = st.recorder
	}
	if st.tracing, err = newTracerProvider(ctx, os.LookupEnv); err != nil {
		return nil, err
	}
	if st.tracing != nil {
		opts.TracerProvider = st.tracing
	}
	st.eng = engine.New(opts)
	return st, nil
}

// close stops the stack in dependency order: the engine first (cancelling
// speculative work and writing its records), then what it used. Call it
// after the HTTP server has stopped.
func (st *stack) close() error {
	var errs []error
	if st.eng != nil {
		st.eng.Close()
	}
	if st.spec != nil {
		st.spec.Close()
	}
	if st.mcp != nil {
		errs = append(errs, st.mcp.Close())
	}
	if st.predictor != nil {
		errs = append(errs, st.predictor.Close())
	}
	if st.recorder != nil {
		errs = append(errs, st.recorder.Close())
	}
	for _, r := range st.remotes {
		r.Close()
	}
	if st.tracing != nil {
		// Flush the last spans; a collector that is gone must not hold
		// the shutdown for long.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		errs = append(errs, st.tracing.Shutdown(ctx))
	}
	return errors.Join(errs...)
}

// quiesce stops speculation (queued and running work is cancelled, none
// starts) while the calls in flight are still served; the predictor keeps
// learning from them.
func (st *stack) quiesce() { st.eng.Quiesce() }

func (st *stack) patternCount() int {
	if st.predictor == nil {
		return 0
	}
	return st.predictor.Patterns()
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

func tracesDir(cfg *config.Config) string {
	if cfg.Traces == nil {
		return "off"
	}
	return cfg.Traces.Dir
}
