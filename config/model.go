package config

import (
	"net/url"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/ahead-dev/ahead/yamlnode"
)

// LLM is the llm block: the model APIs ahead serve relays (the gateway).
// Either or both upstreams may be set. API keys are never configured here:
// they pass through from the agent's own request headers.
type LLM struct {
	// OpenAI is the OpenAI-compatible upstream's base URL, /v1 included
	// (https://api.openai.com/v1), as the OpenAI SDKs take it; "" means
	// none.
	OpenAI string
	// Anthropic is the Anthropic upstream's base URL, without /v1
	// (https://api.anthropic.com), as the Anthropic SDKs take it; ""
	// means none.
	Anthropic string
	// MaxBody bounds a model request's body; 0 means the gateway's
	// default (32 MiB).
	MaxBody int64
}

// Speculator is the speculator block: a fast model asked for guesses of
// the next calls (package speculator). Nil in Config means none.
type Speculator struct {
	BaseURL string // an OpenAI-compatible base URL, /v1 included
	Model   string
	// APIKeyEnv names the environment variable holding the API key; ""
	// means no Authorization header (a local server). The key itself is
	// never in the file.
	APIKeyEnv          string
	MaxBreadth         int
	Timeout            time.Duration
	MaxConcurrency     int
	ContextTokens      int
	MaxTokensPerMinute int
}

var (
	fieldsLLM         = []string{"openai", "anthropic", "max_body"}
	fieldsUpstream    = []string{"base_url"}
	fieldsSpeculator  = []string{"base_url", "model", "api_key_env", "max_breadth", "timeout", "max_concurrency", "context_tokens", "max_tokens_per_minute"}
	defaultSpeculator = Speculator{MaxBreadth: 3, Timeout: 2 * time.Second, MaxConcurrency: 4, ContextTokens: 4000}
)

// llm parses `llm: {openai: {base_url: URL}, anthropic: {base_url: URL}}`.
func (p *parser) llm(n *yaml.Node, field string) *LLM {
	l := &LLM{}
	p.Mapping(n, field, func(k, v *yaml.Node, f string) {
		switch k.Value {
		case "openai":
			l.OpenAI = p.upstream(v, f)
		case "anthropic":
			l.Anthropic = p.upstream(v, f)
		case "max_body":
			l.MaxBody, _ = p.bytes(v, f)
		default:
			p.Unknown(k, f, fieldsLLM)
		}
	})
	if l.OpenAI == "" && l.Anthropic == "" {
		p.Errorf(n, field, "want at least one of openai and anthropic, each {base_url: URL}")
		return nil
	}
	return l
}

// upstream parses {base_url: URL}.
func (p *parser) upstream(n *yaml.Node, field string) string {
	var u string
	p.Mapping(n, field, func(k, v *yaml.Node, f string) {
		switch k.Value {
		case "base_url":
			u, _ = p.baseURL(v, f)
		default:
			p.Unknown(k, f, fieldsUpstream)
		}
	})
	if u == "" {
		p.Errorf(n, yamlnode.Join(field, "base_url"), "missing: the upstream's base URL")
	}
	return u
}

// baseURL parses an http(s) URL with a host, ${VAR} expanded.
func (p *parser) baseURL(n *yaml.Node, field string) (string, bool) {
	s, ok := p.Str(n, field)
	if !ok {
		return "", false
	}
	if s, ok = p.expand(n, field, s); !ok {
		return "", false
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		p.Errorf(n, field, "want an http:// or https:// URL with a host, got %q", s)
		return "", false
	}
	return strings.TrimRight(s, "/"), true
}

// speculator parses the speculator block; base_url and model are required.
func (p *parser) speculator(n *yaml.Node, field string) *Speculator {
	s := defaultSpeculator
	p.Mapping(n, field, func(k, v *yaml.Node, f string) {
		switch k.Value {
		case "base_url":
			s.BaseURL, _ = p.baseURL(v, f)
		case "model":
			s.Model, _ = p.Str(v, f)
		case "api_key_env":
			if name, ok := p.Str(v, f); ok {
				if name == "" || strings.ContainsAny(name, "=$ ") {
					p.Errorf(v, f, "want the name of an environment variable, got %q", name)
					return
				}
				s.APIKeyEnv = name
			}
		case "max_breadth":
			s.MaxBreadth, _ = p.Int(v, f, 1)
		case "timeout":
			s.Timeout, _ = p.duration(v, f)
		case "max_concurrency":
			s.MaxConcurrency, _ = p.Int(v, f, 1)
		case "context_tokens":
			s.ContextTokens, _ = p.Int(v, f, 1)
		case "max_tokens_per_minute":
			s.MaxTokensPerMinute, _ = p.Int(v, f, 1)
		default:
			p.Unknown(k, f, fieldsSpeculator)
		}
	})
	if s.BaseURL == "" {
		p.Errorf(n, yamlnode.Join(field, "base_url"), "missing: the speculator's OpenAI-compatible base URL (…/v1)")
	}
	if s.Model == "" {
		p.Errorf(n, yamlnode.Join(field, "model"), "missing: the model to ask")
	}
	return &s
}
