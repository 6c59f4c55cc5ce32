// Package doctor checks an ahead configuration before it is served: that
// its HTTP backends answer connections, its commands exist, its MCP
// upstreams start and list their tools, that the model APIs of the llm
// block and the speculator's answer connections, that the policy names
// tools the backends serve, that the pattern pool loads and its folder
// takes files, and what would be speculated (ahead doctor). It runs nothing but the MCP upstreams'
// start-up and tools/list, and no tool.
package doctor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ahead-dev/ahead/config"
	"github.com/ahead-dev/ahead/mcpproxy"
	"github.com/ahead-dev/ahead/pattern"
	"github.com/ahead-dev/ahead/policy"
)

// Severity grades a finding.
type Severity int

// Severities, from good to bad.
const (
	OK Severity = iota
	Warn
	Fail
)

func (s Severity) String() string { return [...]string{"ok", "warn", "FAIL"}[s] }

// Finding is the result of one check.
type Finding struct {
	Severity Severity
	Subject  string // what was checked: "backend web", "policy", "patterns"
	Message  string
}

// Speculated is a tool and how far it would be speculated.
type Speculated struct {
	Tool    string
	Backend string // "" when only the catch-all backend would serve it
	Level   policy.Level
	// FromAnnotations reports that the level comes from a trusted
	// upstream's annotations, not from the policy file.
	FromAnnotations bool
}

// Report is what Check found.
type Report struct {
	Findings []Finding
	// Tools are the tools the backends are known to serve, by name.
	Tools []Speculated
}

// Failed reports whether a check failed.
func (r *Report) Failed() bool {
	return slices.ContainsFunc(r.Findings, func(f Finding) bool { return f.Severity == Fail })
}

// Options tune Check. The zero value of each field means its default.
type Options struct {
	// Timeout bounds each network check and upstream start; 0 means 10s.
	Timeout time.Duration
	// Stderr receives the stderr of stdio upstreams; nil discards it.
	Stderr io.Writer
	// Dial connects to HTTP backends; nil means a net.Dialer.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// CreateFleet creates the fleet's streams and buckets as a replica of
	// the configuration does at start (with its bounds); false means the
	// fleet is only read.
	CreateFleet bool
}

// Check checks cfg. opts may be nil.
func Check(ctx context.Context, cfg *config.Config, opts *Options) *Report {
	var o Options
	if opts != nil {
		o = *opts
	}
	o.Timeout = cmp.Or(o.Timeout, 10*time.Second)
	if o.Stderr == nil {
		o.Stderr = io.Discard
	}
	if o.Dial == nil {
		o.Dial = (&net.Dialer{}).DialContext
	}
	r := &Report{}
	add := func(s Severity, subject, format string, args ...any) {
		r.Findings = append(r.Findings, Finding{s, subject, fmt.Sprintf(format, args...)})
	}

	served := map[string]string{} // tool → backend
	catchAll := ""
	for _, b := range cfg.Backends {
		subject := "backend " + b.Name
		switch {
		case b.HTTP != nil:
			if err := dialHTTP(ctx, b.HTTP.URL, o); err != nil {
				add(Fail, subject, "unreachable: %v", err)
			} else {
				add(OK, subject, "%s accepts connections", hostOf(b.HTTP.URL))
			}
		case b.Exec != nil:
			if err := findCommand(b.Exec.Command[0], b.Exec.Dir); err != nil {
				add(Fail, subject, "command: %v", err)
			} else {
				add(OK, subject, "command %s found", b.Exec.Command[0])
			}
		}
		if b.Tools == nil {
			catchAll = b.Name
		}
		for _, t := range b.Tools {
			served[t] = b.Name
		}
	}

	var trusted []*mcp.Tool
	for _, u := range cfg.Upstreams {
		subject := "mcp " + u.Name
		tools, err := ListTools(ctx, u, o.Timeout, o.Stderr)
		if err != nil {
			add(Fail, subject, "does not start: %v", err)
			continue
		}
		names := make([]string, len(tools))
		for i, t := range tools {
			names[i] = t.Name
			if _, ok := served[t.Name]; !ok {
				served[t.Name] = config.MCPServersKey + ":" + u.Name
			}
		}
		add(OK, subject, "started; %d tools: %s", len(tools), strings.Join(names, ", "))
		if u.TrustAnnotations || cfg.TrustAnnotations {
			trusted = append(trusted, tools...)
		}
	}

	pol := cfg.Policy
	switch {
	case pol == nil && len(trusted) == 0:
		add(Warn, "policy", "no speculation_policy and no trusted annotations: nothing will be speculated")
	case pol == nil:
		add(OK, "policy", "none: the trusted upstreams' annotations decide")
	default:
		checkPolicy(pol, served, catchAll, add)
	}
	eff := pol
	if len(trusted) > 0 {
		eff = mcpproxy.AnnotationPolicy(pol, trusted)
	}
	for _, tool := range slices.Sorted(maps.Keys(served)) {
		lvl := eff.Lookup(tool).Level()
		r.Tools = append(r.Tools, Speculated{Tool: tool, Backend: served[tool], Level: lvl,
			FromAnnotations: pol.Lookup(tool).Level() != lvl})
	}
	if catchAll != "" {
		add(OK, "backend "+catchAll, "serves every tool no other backend lists: those tools are not known here")
	}

	if cfg.Fleet != nil {
		checkFleet(ctx, cfg.Fleet, cfg.Patterns != nil && cfg.Patterns.Learn, eff.AnyShared(), o.CreateFleet, o.Timeout, add)
	}

	checkModels(ctx, cfg, o, add)
	switch {
	case cfg.Patterns != nil && cfg.Patterns.Pool == "":
		// Issue 24: a fresh install predicts from its first call.
		what := "the built-in default predicts, learning in memory (nothing is written; set patterns: FILE to keep what is learnt)"
		if !cfg.Patterns.Learn {
			what = "the built-in default predicts, learning nothing (learn: false)"
		}
		add(OK, "patterns", "no pool file: %s", what)
	case cfg.Patterns != nil:
		if cfg.Patterns.Learn {
			checkFolder(cfg.Patterns.Checkpoint, add)
		}
		p, err := pattern.Load(cfg.Patterns.Pool)
		switch {
		case errors.Is(err, fs.ErrNotExist) && cfg.Patterns.Learn:
			add(OK, "patterns", "%s does not exist yet: ahead starts with no patterns, learns, and writes it", cfg.Patterns.Pool)
		case err != nil:
			add(Fail, "patterns", "%v", err)
		default:
			allowed := 0
			for _, pt := range p.Patterns {
				if eff.Lookup(pt.Tool).Level() > policy.LevelNone {
					allowed++
				}
			}
			add(OK, "patterns", "%s: %d patterns, %d of them predict tools the policy allows", cfg.Patterns.Pool, len(p.Patterns), allowed)
			if allowed == 0 && len(p.Patterns) > 0 {
				add(Warn, "patterns", "no pattern predicts a tool the policy allows: nothing will be speculated")
			}
		}
	default:
		// Without a predictor, what the model's stream completes (the
		// gateway) and the speculator's guesses are still predictions.
		var others []string
		if cfg.LLM != nil {
			others = append(others, "the calls complete in the model's stream (llm)")
		}
		if cfg.Speculator != nil {
			others = append(others, "the speculator's guesses")
		}
		if len(others) > 0 {
			add(OK, "patterns", "none: only %s are predicted (leave patterns out or set patterns: FILE to learn the agents' patterns too)", strings.Join(others, " and "))
		} else {
			add(Warn, "patterns", "patterns: none: nothing is predicted (leave patterns out, or set patterns: FILE; it may not exist yet)")
		}
	}
	return r
}

// checkFolder checks that the folder of the pool's checkpoint exists and
// takes files, or can be made: ahead makes it at start (issue 27).
func checkFolder(file string, add func(Severity, string, string, ...any)) {
	dir := filepath.Dir(file)
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// The nearest folder that exists must be a folder.
		up := dir
		for {
			next := filepath.Dir(up)
			if next == up {
				break
			}
			up = next
			if fi, err := os.Stat(up); err == nil {
				if !fi.IsDir() {
					add(Fail, "patterns", "the checkpoint's folder %s cannot be made: %s is not a folder", dir, up)
					return
				}
				break
			}
		}
		add(OK, "patterns", "the checkpoint's folder %s does not exist yet: ahead makes it at start", dir)
	case err != nil:
		add(Fail, "patterns", "the checkpoint's folder: %v", err)
	case !fi.IsDir():
		add(Fail, "patterns", "the checkpoint's folder %s is not a folder", dir)
	default:
		// Saves write a temporary file there and rename it: try one.
		f, err := os.CreateTemp(dir, ".ahead-doctor-*")
		if err != nil {
			add(Fail, "patterns", "the checkpoint's folder %s takes no files: %v", dir, err)
			return
		}
		f.Close()
		os.Remove(f.Name())
	}
}

// checkModels checks the llm block (the model APIs the gateway relays to)
// and the speculator block: that their hosts accept connections and that
// the speculator's API key is set. Nothing is sent to a model.
func checkModels(ctx context.Context, cfg *config.Config, o Options, add func(Severity, string, string, ...any)) {
	if l := cfg.LLM; l != nil {
		for _, m := range []struct{ name, url string }{{"openai", l.OpenAI}, {"anthropic", l.Anthropic}} {
			if m.url == "" {
				continue
			}
			if err := dialHTTP(ctx, m.url, o); err != nil {
				add(Fail, "llm "+m.name, "%s unreachable: %v", m.url, err)
			} else {
				add(OK, "llm "+m.name, "%s accepts connections; agents use ahead's %s as their base URL", hostOf(m.url), map[string]string{"openai": "/v1", "anthropic": "root"}[m.name])
			}
		}
	}
	if sp := cfg.Speculator; sp != nil {
		if sp.APIKeyEnv != "" {
			if v, ok := os.LookupEnv(sp.APIKeyEnv); !ok || v == "" {
				add(Fail, "speculator", "api_key_env: environment variable %s is not set", sp.APIKeyEnv)
			}
		}
		if err := dialHTTP(ctx, sp.BaseURL, o); err != nil {
			add(Fail, "speculator", "%s unreachable: %v", sp.BaseURL, err)
		} else {
			add(OK, "speculator", "%s accepts connections (model %s; conversation text is sent there)", hostOf(sp.BaseURL), sp.Model)
		}
	}
}

// checkPolicy reports rules that name no tool the backends serve: a typo
// there silently turns speculation off.
func checkPolicy(pol *policy.Policy, served map[string]string, catchAll string, add func(Severity, string, string, ...any)) {
	sev := Warn
	hint := ""
	if catchAll != "" {
		hint = fmt.Sprintf(" (unless backend %s serves it)", catchAll)
	}
	for _, name := range slices.Sorted(maps.Keys(pol.Tools)) {
		if _, ok := served[name]; !ok {
			add(sev, "policy", "tools.%s: no backend lists this tool%s", name, hint)
		}
	}
	for _, g := range pol.Globs {
		if !slices.ContainsFunc(slices.Collect(maps.Keys(served)), func(t string) bool { ok, _ := path.Match(g.Pattern, t); return ok }) {
			add(sev, "policy", "tools.%q: matches no tool the backends list%s", g.Pattern, hint)
		}
	}
}

func hostOf(tmpl string) string {
	u, err := url.Parse(strings.NewReplacer("{tool}", "x").Replace(tmpl))
	if err != nil {
		return tmpl
	}
	return u.Host
}

func dialHTTP(ctx context.Context, tmpl string, o Options) error {
	u, err := url.Parse(strings.NewReplacer("{tool}", "x").Replace(tmpl))
	if err != nil {
		return err
	}
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), map[string]string{"https": "443"}[u.Scheme]+map[string]string{"http": "80"}[u.Scheme])
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	c, err := o.Dial(ctx, "tcp", host)
	if err != nil {
		return err
	}
	return c.Close()
}

func findCommand(name, dir string) error {
	if !strings.Contains(name, "/") {
		_, err := exec.LookPath(name)
		return err
	}
	if !path.IsAbs(name) && dir != "" {
		name = path.Join(dir, name)
	}
	fi, err := os.Stat(name)
	if err != nil {
		return err
	}
	if fi.IsDir() || fi.Mode()&0o111 == 0 {
		return fmt.Errorf("%s is not executable", name)
	}
	return nil
}

// ListTools starts an MCP upstream once, within timeout (0: the proxy's
// default), and lists its tools (names with the upstream's prefix,
// annotations as given). stderr receives a stdio upstream's stderr.
func ListTools(ctx context.Context, u mcpproxy.Upstream, timeout time.Duration, stderr io.Writer) ([]*mcp.Tool, error) {
	u.TrustAnnotations = true // to be listed by TrustedTools
	p, err := mcpproxy.New(&mcpproxy.Options{Upstreams: []mcpproxy.Upstream{u}, Stderr: stderr, StartTimeout: timeout,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, err
	}
	defer p.Close()
	return p.TrustedTools(ctx)
}

// Write prints the findings, then the tools and how far each would be
// speculated.
func (r *Report) Write(w io.Writer) error {
	for _, f := range r.Findings {
		fmt.Fprintf(w, "%-4s  %-16s %s\n", f.Severity, f.Subject, f.Message)
	}
	if len(r.Tools) > 0 {
		fmt.Fprintln(w, "\nWhat would be speculated (when predicted):")
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  tool\tbackend\tspeculation\t")
		for _, t := range r.Tools {
			lvl := t.Level.String()
			if t.Level == policy.LevelNone {
				lvl = "never"
			}
			if t.FromAnnotations {
				lvl += " (annotations)"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t\n", t.Tool, t.Backend, lvl)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	verdict := "ok: ahead serve can start with this configuration"
	if r.Failed() {
		verdict = "some checks failed"
	}
	_, err := fmt.Fprintf(w, "\n%s\n", verdict)
	return err
}
