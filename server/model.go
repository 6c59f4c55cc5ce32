package server

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ahead-dev/ahead/config"
	"github.com/ahead-dev/ahead/engine"
	"github.com/ahead-dev/ahead/gateway"
	"github.com/ahead-dev/ahead/policy"
	"github.com/ahead-dev/ahead/speculator"
)

// The engine is what a speculator guesses for.
var _ speculator.Engine = (*engine.Engine)(nil)

// newSpeculator builds the fast-model speculator of cfg's speculator block;
// the engine, built after it, is attached to it (Speculator.Attach). It
// logs where conversation text will be sent.
// tools lists the tools it may guess: those the configuration's backends
// list (by name; MCP upstreams' tools come with their sessions' calls).
func newSpeculator(sc *config.Speculator, tools []string, pol *policy.Policy, reg prometheus.Registerer, logger *slog.Logger) (*speculator.Speculator, error) {
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
		Private:    func(tool string) bool { return pol.Lookup(tool).Private },
		Logger:     logger,
		Registerer: reg,
	})
	if err != nil {
		return nil, fmt.Errorf("speculator: %w", err)
	}
	logger.Info(s.Destination())
	return s, nil
}

// newGateway builds the model gateway of cfg's llm block in front of eng,
// linking sessions through linker (the engine's Linker).
func newGateway(l *config.LLM, eng *engine.Engine, linker *gateway.Linker, logger *slog.Logger) (*gateway.Gateway, error) {
	opts := &gateway.Options{Engine: eng, Linker: linker, Logger: logger, MaxBody: l.MaxBody}
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
	return gw, nil
}
