package config

import (
	"cmp"
	"fmt"

	"github.com/ahead-dev/ahead/mcpproxy"
	"github.com/ahead-dev/ahead/policy"
)

// Off, given for a file (--patterns none, --policy none, --recent none),
// turns off what the file would give.
const Off = "none"

// UsageError is a contradiction among a command's settings: the command
// line's fault, not a file's (its exit code is a usage error's).
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

// MCPCommand is what `ahead mcp` is given: its --config file, whose MCP
// parts it uses (listen, backends and engine are ahead serve's), the
// upstream of its command line and the flags that override the file.
// Config joins them into what server.ServeMCP runs.
type MCPCommand struct {
	// File is ahead's YAML file, read as ahead serve reads it so that one
	// file serves both commands with the same errors; "" for none.
	File string
	// Upstream is the MCP server of the command line (after --); nil for
	// none.
	Upstream *mcpproxy.Upstream
	// Patterns is a pool file to predict from and learn into (the short
	// form of the file's patterns; a file that does not exist yet starts
	// empty); Off for no predictor at all; "" keeps the file's, or
	// without a file the built-in default learning in memory (InMemory).
	Patterns string
	// Policy is a speculation policy file; Off denies all; "" keeps the
	// file's.
	Policy string
	// Traces records every call in this folder (instead of the file's
	// traces block).
	Traces string
	// FailOnLoss makes a lost trace record fail the command at its end.
	FailOnLoss bool
	// Recent is where a pool that learns keeps the recent sessions when
	// nothing else records them (RecentTraces); "" the default beside the
	// pool, Off nowhere.
	Recent string
	// TrustAnnotations lets the upstreams' tool annotations feed the
	// default policy (or the file's trust_annotations does).
	TrustAnnotations bool
}

// Config is the configuration the command runs: the file's MCP parts with
// the command's settings over them. Contradicting settings are a
// *UsageError; a bad file or policy is the file's error.
func (c *MCPCommand) Config() (*Config, error) {
	cfg := &Config{TrustAnnotations: c.TrustAnnotations, Patterns: InMemory()}
	if c.Upstream != nil {
		cfg.Upstreams = append(cfg.Upstreams, *c.Upstream)
	}
	if c.File != "" {
		f, err := (&Loader{BackendsOptional: true}).Load(c.File)
		if err != nil {
			return nil, err
		}
		for _, u := range f.Upstreams {
			if c.Upstream != nil && c.Upstream.Name == u.Name {
				return nil, &UsageError{fmt.Sprintf("the command's upstream is named %q, like one in %s: rename that one", u.Name, c.File)}
			}
			cfg.Upstreams = append(cfg.Upstreams, u)
		}
		cfg.Policy, cfg.Fleet, cfg.Patterns = f.Policy, f.Fleet, f.Patterns
		cfg.TrustAnnotations = cfg.TrustAnnotations || f.TrustAnnotations
		if t := f.Traces; t != nil {
			// Its traces are named for the command unless it names them.
			cfg.Traces = &Traces{Dir: t.Dir, Prefix: cmp.Or(t.Prefix, "mcp"), MaxFileBytes: t.MaxFileBytes, FailOnLoss: t.FailOnLoss}
		}
	}
	if c.Traces != "" {
		cfg.Traces = &Traces{Dir: c.Traces, Prefix: "mcp"}
	}
	if cfg.Traces != nil && c.FailOnLoss {
		cfg.Traces.FailOnLoss = true
	}
	switch c.Patterns {
	case "":
	case Off:
		cfg.Patterns = nil
	default:
		// As the file's short form: learn, into the file itself.
		cfg.Patterns = &Patterns{Pool: c.Patterns, Learn: true, Checkpoint: c.Patterns, CheckpointEvery: DefaultCheckpointEvery}
	}
	switch {
	case c.Recent != "" && c.Traces != "":
		return nil, &UsageError{"--recent and --traces: give one (with --traces the recordings are what the pool learns from)"}
	case cfg.Patterns != nil && cfg.Patterns.Pool != "" && cfg.Patterns.Learn && cfg.Traces == nil && c.Recent != Off:
		cfg.Traces = RecentTraces(cfg.Patterns, c.Recent)
	}
	if len(cfg.Upstreams) == 0 {
		return nil, &UsageError{"no MCP server: give one after -- (ahead mcp -- npx -y SERVER ...) or in --config"}
	}
	switch c.Policy {
	case "":
	case Off:
		cfg.Policy = nil
	default:
		p, err := policy.Load(c.Policy)
		if err != nil {
			return nil, err
		}
		cfg.Policy = p
	}
	return cfg, nil
}
