package main

import (
	"crypto/subtle"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ahead-dev/ahead/config"
	"github.com/ahead-dev/ahead/engine"
	"github.com/ahead-dev/ahead/gateway"
	"github.com/ahead-dev/ahead/policy"
	"github.com/ahead-dev/ahead/predict"
	"github.com/ahead-dev/ahead/speculator"
	"github.com/ahead-dev/ahead/trace"
)

// newSpeculator builds the fast-model speculator of cfg's speculator block;
// eng is read when its guesses arrive, after the engine is built. It logs
// where conversation text will be sent.
// tools lists the tools it may guess: those the configuration's backends
// list (by name; MCP upstreams' tools come with their sessions' calls).
func newSpeculator(sc *config.Speculator, tools []string, pol *policy.Policy, eng **engine.Engine, reg prometheus.Registerer, logger *slog.Logger) (*speculator.Speculator, error) {
	key := ""
	if sc.APIKeyEnv != "" {
		v, ok := os.LookupEnv(sc.APIKeyEnv)
		if !ok || v == "" {
			return nil, fmt.Errorf("speculator.api_key_env: environment variable %s is not set", sc.APIKeyEnv)
		}
		key = v
	}
	s, err := speculator.New(&speculator.Options{
		BaseURL:            sc.BaseURL,
		Model:              sc.Model,
		APIKey:             key,
		MaxBreadth:         sc.MaxBreadth,
		Timeout:            sc.Timeout,
		MaxConcurrency:     sc.MaxConcurrency,
		ContextTokens:      sc.ContextTokens,
		MaxTokensPerMinute: sc.MaxTokensPerMinute,
		Tools: func() []speculator.Tool {
			out := make([]speculator.Tool, len(tools))
			for i, t := range tools {
				out[i] = speculator.Tool{Name: t}
			}
			return out
		},
		Private: func(tool string) bool { return pol.Lookup(tool).Private },
		Offer: func(session string, seq int, preds []predict.Prediction) bool {
			return (*eng).Offer(session, seq, preds)
		},
		Conversation: func(session string) []trace.Event { return (*eng).Conversation(session) },
		Logger:       logger,
		Registerer:   reg,
	})
	if err != nil {
		return nil, fmt.Errorf("speculator: %w", err)
	}
	logger.Info(s.Destination())
	return s, nil
}

// newGateway builds the model gateway of cfg's llm block in front of eng.
func newGateway(l *config.LLM, eng *engine.Engine, logger *slog.Logger) (*gateway.Gateway, error) {
	opts := &gateway.Options{Engine: eng, Logger: logger, MaxBody: l.MaxBody}
	if l.OpenAI != "" {
		opts.OpenAI = &gateway.Upstream{BaseURL: l.OpenAI}
	}
	if l.Anthropic != "" {
		opts.Anthropic = &gateway.Upstream{BaseURL: l.Anthropic}
	}
	gw, err := gateway.New(opts)
	if err != nil {
		return nil, fmt.Errorf("llm: %w", err)
	}
	logger.Info("ahead serve: model gateway", "openai", l.OpenAI, "anthropic", l.Anthropic)
	return gw, nil
}

// guard wraps the server's handler with what keeps a client from pinning
// it and, with a token, from using it at all:
//   - reading a request (headers and body) must end within readTimeout;
//   - each write of an answer must be taken by the client within
//     writeTimeout, renewed as each write succeeds, so that long tool calls
//     and model or MCP streams are never cut while they flow;
//   - with a token, every route but /healthz wants "Authorization: Bearer
//     TOKEN", or "Ahead-Authorization: Bearer TOKEN" (the model gateway's
//     Authorization header belongs to the model API and passes through).
func guard(h http.Handler, readTimeout, writeTimeout time.Duration, token string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		if token != "" && r.URL.Path != "/healthz" && !authorized(r, token) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="ahead"`)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprintln(w, `{"error":"missing or wrong token: send Authorization: Bearer TOKEN (or Ahead-Authorization on model API routes)"}`)
			return
		}
		r.Header.Del("Ahead-Authorization") // never forwarded
		if readTimeout > 0 && r.Body != nil && r.Body != http.NoBody {
			_ = rc.SetReadDeadline(time.Now().Add(readTimeout))
			r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc}
		}
		if writeTimeout > 0 {
			w = &deadlineWriter{ResponseWriter: w, rc: rc, d: writeTimeout}
		}
		h.ServeHTTP(w, r)
		// The connection may serve another request: no deadline of this
		// one may outlive it.
		_ = rc.SetWriteDeadline(time.Time{})
	})
}

func authorized(r *http.Request, token string) bool {
	for _, h := range []string{"Ahead-Authorization", "Authorization"} {
		got, ok := strings.CutPrefix(r.Header.Get(h), "Bearer ")
		if ok && subtle.ConstantTimeCompare([]byte(got), []byte(token)) == 1 {
			return true
		}
	}
	return false
}

// deadlineBody lifts the read deadline once the body is read whole: the
// time a tool takes afterwards is not the client's. A body that failed
// (the deadline passed) keeps it, so the server cannot wait on the rest.
type deadlineBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	done bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && !b.done {
		b.done = true
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// deadlineWriter gives each write its own deadline.
type deadlineWriter struct {
	http.ResponseWriter
	rc *http.ResponseController
	d  time.Duration
}

func (w *deadlineWriter) Write(p []byte) (int, error) {
	_ = w.rc.SetWriteDeadline(time.Now().Add(w.d))
	return w.ResponseWriter.Write(p)
}

func (w *deadlineWriter) Flush() {
	_ = w.rc.SetWriteDeadline(time.Now().Add(w.d))
	_ = w.rc.Flush()
}

// Unwrap lets http.ResponseController reach the connection.
func (w *deadlineWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
