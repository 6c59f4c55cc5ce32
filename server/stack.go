package server

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/ahead-dev/ahead/config"
	"github.com/ahead-dev/ahead/engine"
	"github.com/ahead-dev/ahead/fleet"
	"github.com/ahead-dev/ahead/gateway"
	"github.com/ahead-dev/ahead/httpapi"
	"github.com/ahead-dev/ahead/learn"
	"github.com/ahead-dev/ahead/mcpproxy"
	"github.com/ahead-dev/ahead/predict"
	"github.com/ahead-dev/ahead/speculator"
	"github.com/ahead-dev/ahead/trace"
)

// A Stack is the engine and everything it uses, built from a
// configuration: backends, policy, the pattern pool (with the conversation
// model), the trace recorder, the fast-model speculator, the MCP proxy,
// metrics and OpenTelemetry. Run serves one over HTTP.
type Stack struct {
	eng       *engine.Engine
	reg       *prometheus.Registry
	backends  map[string]engine.Backend
	closers   []interface{ Close() } // backends to close after the engine: remote's idle connections, exec's sweeps
	recorder  *trace.Writer
	predictor *learn.Predictor
	spec      *speculator.Speculator   // nil without a speculator block
	mcp       *mcpproxy.Proxy          // nil without mcpServers
	tracing   *sdktrace.TracerProvider // nil unless OTEL_EXPORTER_OTLP_* names an endpoint
	linker    *gateway.Linker          // nil without an llm block
	fleet     *fleet.Fleet             // nil without a fleet block
	learning  *fleet.Learning          // nil unless the pool learns with a fleet
}

// Open builds the engine and what it needs from cfg, starting cfg's MCP
// upstreams to read the annotations of the trusted ones into the policy.
// On error, whatever was started is stopped. Close the Stack when done.
func Open(ctx context.Context, cfg *config.Config, opts *Options) (_ *Stack, err error) {
	o := opts.withDefaults()
	logger := o.Logger
	st := &Stack{reg: prometheus.NewRegistry(), backends: make(map[string]engine.Backend)}
	defer func() {
		if err != nil {
			err = errors.Join(err, st.Close())
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
		if c, ok := b.(interface{ Close() }); ok {
			st.closers = append(st.closers, c)
		}
		st.backends[bc.Name] = engine.Backend{Backend: b, Tools: bc.Tools, Limits: bc.Limits, PerSession: bc.PerSession, Paths: bc.PathSpace()}
		for _, t := range bc.Tools {
			routes[t] = bc.Name
		}
		if bc.Tools == nil {
			fallback = bc.Name
		}
	}
	if cfg.Traces != nil {
		st.recorder, err = trace.NewWriter(cfg.Traces.Dir, &trace.WriterOptions{Prefix: cfg.Traces.Prefix, MaxBytes: cfg.Traces.MaxFileBytes, MaxFiles: cfg.Traces.MaxFiles,
			Logger: o.Logger, FailOnLoss: cfg.Traces.FailOnLoss})
		if err != nil {
			return nil, fmt.Errorf("traces: %w", err)
		}
	}
	pol := cfg.Policy
	var mcpRoute func(string) (string, bool)
	if len(cfg.Upstreams) > 0 {
		// The MCP front (mcp.go) starts the trusted upstreams here to
		// read their annotations into the policy.
		if st.mcp, pol, err = newMCPFront(ctx, cfg.Upstreams, pol, cfg.TrustAnnotations, true, cfg.MaxBody, cfg.MaxMCPSessions, o); err != nil {
			return nil, fmt.Errorf("%s: %w", config.MCPServersKey, err)
		}
		maps.Copy(st.backends, st.mcp.Backends())
		mcpRoute = st.mcp.Route
	}
	// The fleet is joined once every backend is known (its shared ones are
	// fenced), and before the pool is loaded (it may learn with the fleet).
	if st.fleet, err = joinFleet(ctx, cfg.Fleet, st.backends, pol, st.reg, logger); err != nil {
		return nil, err
	}
	if st.learning, err = learnWithFleet(ctx, st.fleet, cfg.Fleet, cfg.Patterns); err != nil {
		return nil, err
	}
	if cfg.Patterns != nil {
		dir := ""
		if cfg.Traces != nil {
			dir = cfg.Traces.Dir
		}
		_, keep := learnShare(cfg.Patterns, cfg.Engine.MaxBytes)
		if st.predictor, err = loadPredictor(cfg.Patterns, dir, cfg.Engine.MaxSessions, keep, st.learning, logger); err != nil {
			return nil, err
		}
		p := st.predictor
		if st.learning != nil {
			if err := adoptFleetPool(ctx, st.learning, p, logger); err != nil {
				return nil, err
			}
		}
		st.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "ahead_checkpoint_failures_total", Help: "Periodic checkpoints of the pattern pool that failed (each is logged).",
		}, func() float64 { return float64(p.CheckpointFailures()) }))
	}

	eo := cfg.Engine.Options()
	eo.MaxBytes, _ = learnShare(cfg.Patterns, cfg.Engine.MaxBytes)
	eo.Backends = st.backends
	// One router for every kind of backend, so that the configuration's
	// lists win, MCP upstreams come next and the catch-all backend last,
	// whatever the map order.
	eo.Route = func(tool string) (string, bool) {
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
	eo.Policy, eo.Registerer, eo.Logger = pol, st.reg, logger
	// Interface fields stay nil (not a typed nil) when unset.
	if st.predictor != nil {
		eo.Predictor = st.predictor
	}
	if cfg.Speculator != nil {
		if st.spec, err = newSpeculator(cfg.Speculator, slices.Sorted(maps.Keys(routes)), pol, st.reg, logger); err != nil {
			return nil, err
		}
		if st.predictor != nil {
			eo.Predictor = predict.Join(st.predictor, st.spec)
		} else {
			eo.Predictor = st.spec
		}
	}
	switch {
	case st.recorder != nil && st.learning != nil:
		eo.Recorder = recorders{st.recorder, st.learning}
	case st.recorder != nil:
		eo.Recorder = st.recorder
	case st.learning != nil:
		eo.Recorder = st.learning
	}
	if st.tracing, err = newTracerProvider(ctx, os.LookupEnv, o.Version); err != nil {
		return nil, err
	}
	if st.tracing != nil {
		eo.TracerProvider = st.tracing
	}
	if cfg.LLM != nil {
		// One Linker for the gateway and the engine: the model's calls
		// link the gateway's sessions to the tool side's (gateway.Linker).
		st.linker = gateway.NewLinker(0)
		eo.Linker = st.linker
		if st.mcp != nil {
			// A 2026-07-28 call that names no run joins the run of
			// the conversation whose model emitted it.
			st.mcp.SetLinker(st.linker)
		}
	}
	if st.fleet != nil {
		eo.Fleet = st.fleet
	}
	if st.mcp != nil {
		// An HTTP API session's upstream connections end with the
		// session (mcpproxy.Proxy.EndSession).
		eo.SessionEnded = st.mcp.EndSession
	}
	st.eng = engine.New(&eo)
	if st.fleet != nil {
		st.fleet.Start(st.eng)
	}
	if st.spec != nil {
		st.spec.Attach(st.eng) // its guesses go to the engine
	}
	return st, nil
}

// statsEngine is the engine as the HTTP API serves it: /v1/stats counts
// the calls the Learner keeps for mining too.
func (st *Stack) statsEngine() httpapi.Engine {
	if st.predictor == nil {
		return st.eng
	}
	return counted{st.eng, st.predictor}
}

// Engine returns the stack's engine, for the fronts to call.
func (st *Stack) Engine() *engine.Engine { return st.eng }

// Close stops the stack in dependency order: the engine first (cancelling
// speculative work and writing its records), then what it used. Call it
// after the fronts have stopped.
func (st *Stack) Close() error {
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
		// Its final checkpoint may mine for the fleet: before leaving it.
		errs = append(errs, st.predictor.Close())
	}
	if st.learning != nil {
		st.learning.Close()
	}
	if st.fleet != nil {
		st.fleet.Close()
	}
	if st.recorder != nil {
		errs = append(errs, st.recorder.Close())
	}
	for _, c := range st.closers {
		c.Close()
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

// Quiesce stops speculation (queued and running work is cancelled, none
// starts) while the calls in flight are still served; the predictor keeps
// learning from them.
func (st *Stack) Quiesce() { st.eng.Quiesce() }

// Patterns is the number of patterns the predictor serves (0 without one).
func (st *Stack) Patterns() int {
	if st.predictor == nil {
		return 0
	}
	return st.predictor.Patterns()
}
