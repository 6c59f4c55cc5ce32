// Package server builds what ahead serves from a configuration and serves
// it: the backends, the speculation policy, the pattern pool and the
// conversation model, the trace recorder, the fast-model speculator, the
// MCP proxy, metrics and OpenTelemetry, around one engine (a Stack); and
// the HTTP server in front of it (Run: the tool API, MCP over streamable
// HTTP, the model gateway), with per-request timeouts, an optional token,
// a connection limit idle connections give way under (conns.go), a budget
// of answer bytes in flight to clients (answers.go) and a graceful
// shutdown. ServeMCP serves one MCP session over stdio.
//
// The command line stays in cmd/ahead: flags and what they override of the
// configuration, and exit codes. Every goroutine Run or a Stack starts is
// stopped and waited for before Run returns or Close does.
package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/ahead-dev/ahead/config"
	"github.com/ahead-dev/ahead/httpapi"
)

// Options are what Run, Open and ServeMCP take besides the configuration.
// A nil *Options is the zero value.
type Options struct {
	// Logger receives the log; nil discards it.
	Logger *slog.Logger
	// Stderr receives the stderr of MCP upstream processes; nil discards
	// it.
	Stderr io.Writer
	// Summary receives the engine's one-paragraph summary at exit (Run and
	// ServeMCP); nil: none.
	Summary io.Writer
	// Version is ahead's, told to MCP clients and upstreams and put on
	// spans; "" is "dev".
	Version string
}

func (o *Options) withDefaults() *Options {
	var c Options
	if o != nil {
		c = *o
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Stderr == nil {
		c.Stderr = io.Discard
	}
	c.Version = cmp.Or(c.Version, "dev")
	return &c
}

// Run serves cfg over HTTP (ahead serve) on cfg.Listen until ctx is done,
// then shuts down gracefully: no more connections and no more speculation,
// the calls in flight finish within cfg.ShutdownGrace (those still running
// then are cut off, answered 503 and recorded as failed: an error), and the
// stack closes. Its log announces the address it listens on. At exit the
// engine's summary goes to opts.Summary.
//
// Run mounts the HTTP tool API at /, /metrics, /healthz and /v1/stats; MCP
// over streamable HTTP at /mcp with cfg.Upstreams; and the model gateway at
// every other /v1/ path with cfg.LLM.
func Run(ctx context.Context, cfg *config.Config, opts *Options) (err error) {
	o := opts.withDefaults()
	logger := o.Logger
	// Listen first: a port in use should fail before upstreams start.
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return err
	}
	var limit *connLimit
	if cfg.MaxConnections > 0 {
		limit = newConnLimit(ln, cfg.MaxConnections)
		ln = limit
	}
	st, err := Open(ctx, cfg, opts)
	if err != nil {
		ln.Close()
		return err
	}
	defer func() {
		err = errors.Join(err, st.Close())
		if o.Summary != nil {
			fmt.Fprintln(o.Summary, st.eng.Stats().Summary())
		}
	}()

	mux := http.NewServeMux()
	apiOpts := &httpapi.Options{MaxBodyBytes: cfg.MaxBody, Gatherer: st.reg, Logger: logger}
	if st.fleet != nil {
		apiOpts.Fleet = fleetStats(st.fleet, st.learning)
	}
	if st.mcp != nil {
		apiOpts.Upstreams = upstreamStats(st.mcp)
	}
	answerBudget := newAnswers(cmp.Or(cfg.MaxAnswerBytes, config.DefaultMaxAnswerBytes))
	apiOpts.Answers = answerBudget.stats
	api := httpapi.New(st.statsEngine(), apiOpts)
	mux.Handle("/", api)
	if cfg.LLM != nil {
		gw, err := newGateway(cfg.LLM, st.eng, st.linker, logger)
		if err != nil {
			return err
		}
		defer gw.Close() // after the server stops: its parsers are done
		// The API's own /v1/sessions/… and /v1/stats routes are more
		// specific and win; every other /v1/ path is the models'.
		mux.Handle("/v1/", providerOnly(gw.Handler(), cfg.AuthToken))
		mux.Handle("/v1/sessions/", api)
		mux.Handle("/v1/stats", api)
	}
	if st.mcp != nil {
		mountMCP(mux, st.mcp, st.eng, cfg.MaxBody)
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
		Handler: guard(mux, guardOptions{ReadTimeout: cfg.ReadTimeout, WriteTimeout: cfg.WriteTimeout,
			Token: cfg.AuthToken, Answers: answerBudget}),
		ReadHeaderTimeout: cmp.Or(cfg.ReadTimeout, 10*time.Second),
		IdleTimeout:       cmp.Or(cfg.IdleTimeout, config.DefaultIdleTimeout),
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	if limit != nil {
		srv.ConnState = limit.track
		limit.answers = answerBudget
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }() // owned: joined below on every path
	base := "http://" + ln.Addr().String()
	logger.Info("ahead serve: listening", "addr", base,
		"backends", len(st.backends), "patterns", st.Patterns(), "traces", tracesDir(cfg))
	for _, u := range servedURLs(base, cfg, st.mcp != nil) {
		logger.Info("ahead serve: "+u.what, "url", u.url)
	}

	select {
	case err := <-served:
		// The listener failed; nothing more will be accepted.
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
	}
	logger.Info("ahead serve: shutting down", "grace", cfg.ShutdownGrace)
	// No speculation from here on: nothing will claim it. Promoted runs
	// (calls in flight are waiting for them) are authoritative and go on.
	st.Quiesce()
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

// servedURL is a URL Run serves and what it serves there.
type servedURL struct{ what, url string }

// servedURLs are the URLs a client is given (issue 27: a user of the MCP
// drop-in looked for the /mcp URL in vain), base being http://HOST:PORT:
// the tool API, MCP when there are MCP servers, and the base URLs of the
// model gateway for the SDKs of the configured model APIs, with where it
// relays them.
func servedURLs(base string, cfg *config.Config, mcp bool) []servedURL {
	us := []servedURL{{"tool API (POST /v1/sessions/{session}/calls)", base + "/v1"}}
	if mcp {
		us = append(us, servedURL{"MCP over streamable HTTP", base + "/mcp"})
	}
	if l := cfg.LLM; l != nil {
		if l.OpenAI != "" {
			us = append(us, servedURL{"OpenAI base URL for agents (relayed to " + l.OpenAI + ")", base + "/v1"})
		}
		if l.Anthropic != "" {
			us = append(us, servedURL{"Anthropic base URL for agents (relayed to " + l.Anthropic + ")", base})
		}
	}
	return us
}

func tracesDir(cfg *config.Config) string {
	if cfg.Traces == nil {
		return "off"
	}
	return cfg.Traces.Dir
}
