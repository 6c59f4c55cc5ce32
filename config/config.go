// Package config reads ahead's configuration file (ahead.yaml): the file
// `ahead serve` runs from, and whose MCP parts `ahead mcp --config` uses
// (MCPCommand joins them with that command's flags).
//
// It owns the file's shape, its defaults and its checks, and nothing that
// runs: a *Config holds plain values (durations, byte counts, resolved
// paths, sched.Limits, mcpproxy.Upstream, the parsed *policy.Policy) from
// which package server builds backends, the engine and the MCP front. The file is read from yaml.v3 nodes with package yamlnode, so
// every problem is reported as FILE:LINE:COL: field: message, and all of a
// file's problems are reported at once. Unknown fields are errors: a typo
// must not silently turn a setting off. Relative paths are resolved against
// the file's directory, and ${VAR} in headers and environment values is
// expanded from the environment (unset is an error).
package config

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/ahead-dev/ahead/mcpproxy"
	"github.com/ahead-dev/ahead/policy"
	"github.com/ahead-dev/ahead/sched"
	"github.com/ahead-dev/ahead/yamlnode"
)

// Defaults of the settings a file may leave out.
const (
	// DefaultListen is loopback only: ahead executes tools, so exposing
	// it beyond the machine must be a deliberate choice.
	DefaultListen = "127.0.0.1:7777"
	// DefaultShutdownGrace bounds the wait for in-flight calls on SIGTERM.
	DefaultShutdownGrace = 30 * time.Second
	// DefaultCheckpointEvery is how often learnt pattern counts are saved.
	DefaultCheckpointEvery = 5 * time.Minute
	// DefaultReadTimeout and DefaultWriteTimeout bound slow clients.
	DefaultReadTimeout  = 30 * time.Second
	DefaultWriteTimeout = 30 * time.Second
	// DefaultIdleTimeout closes a keep-alive connection idle this long
	// (issue 23: a fixed 2 minutes let idle clients pin connections).
	DefaultIdleTimeout = 15 * time.Second
	// DefaultMaxAnswerBytes bounds the bytes of answers held while
	// clients take them; over it, the slowest reader is cut.
	DefaultMaxAnswerBytes = 64 << 20
)

// MCPServersKey is the block of MCP upstreams: the shape agents' MCP
// configurations use (Claude Code, gemini-cli, Cursor), so an existing
// block can be pasted in.
const MCPServersKey = "mcpServers"

// Config is a parsed, checked configuration file. Relative paths in it are
// already resolved against the file's directory.
type Config struct {
	file string // as given, for messages

	// Listen is the HOST:PORT ahead serve listens on (DefaultListen).
	Listen string
	// MaxBody bounds a request body of the tool API and /mcp (0: the
	// httpapi default).
	MaxBody int64
	// ShutdownGrace is how long in-flight calls may take to finish after
	// SIGTERM (DefaultShutdownGrace).
	ShutdownGrace time.Duration
	// ReadTimeout bounds reading a request, headers and body
	// (DefaultReadTimeout); WriteTimeout bounds each write of an answer
	// to a client that stops reading (DefaultWriteTimeout), renewed as
	// each write succeeds, so long calls and streams are never cut.
	ReadTimeout, WriteTimeout time.Duration
	// IdleTimeout closes a keep-alive connection that waits this long for
	// its next request (DefaultIdleTimeout).
	IdleTimeout time.Duration
	// MaxAnswerBytes bounds the bytes of answers being written to
	// clients, all connections together (DefaultMaxAnswerBytes); over it,
	// the clients that took their answers' bytes the least recently are
	// cut.
	MaxAnswerBytes int64
	// MaxConnections bounds concurrent client connections; 0 means no
	// limit. Idle keep-alive connections give way to new ones when it is
	// reached.
	MaxConnections int
	// MaxMCPSessions bounds the MCP sessions held at once: older clients'
	// protocol sessions, 2026-07-28 runs, and other fronts' sessions that
	// call MCP tools, each holding a connection (for a command upstream, a
	// process) to every upstream; 0 means mcpproxy.DefaultMaxSessions.
	// Over it, the least recently used idle run gives way; if none can,
	// the new session is refused (see mcpproxy.Options.MaxSessions).
	MaxMCPSessions int
	// AuthTokenEnv names the environment variable holding the bearer
	// token clients must send; "" means none. AuthToken is its value.
	AuthTokenEnv, AuthToken string

	// LLM is the gateway's upstreams; nil means no gateway.
	LLM *LLM
	// Speculator is the fast model asked for guesses; nil means none.
	Speculator *Speculator

	// Patterns is the predictor's pool. A file without a patterns block
	// gets InMemory (the built-in default, learning in memory); nil
	// (`patterns: none`) means no predictor at all.
	Patterns *Patterns
	Traces   *Traces        // nil: nothing recorded
	Backends []Backend      // in file order
	Policy   *policy.Policy // nil: no speculation at all
	Engine   Engine

	// Upstreams are the MCP servers of the mcpServers block, in file
	// order; relative cwd paths are resolved.
	Upstreams []mcpproxy.Upstream
	// TrustAnnotations lets MCP upstreams' tool annotations feed the
	// default policy (issue 5, §3).
	TrustAnnotations bool
	// Fleet is the fleet this replica joins; nil means it is alone (and
	// no NATS code runs).
	Fleet *Fleet
}

// Patterns says where the pattern pool is and whether it learns.
type Patterns struct {
	// Pool is the pattern pool file (from ahead mine); "" means none: the
	// predictor starts from the built-in default and, with Learn, learns
	// both parts (patterns and the conversation model) in memory,
	// relearning every CheckpointEvery and writing nothing to disk.
	Pool string
	// Learn updates the pool's counts from live traffic and checkpoints
	// them to Checkpoint every CheckpointEvery and at shutdown. The short
	// form (patterns: FILE) learns into the pool file itself.
	Learn           bool
	Checkpoint      string
	CheckpointEvery time.Duration
	MaxPredictions  int // 0: the predictor's default
}

// InMemory is what a configuration without a patterns block predicts
// with (issue 24: a fresh install predicts from its first session): no
// pool file, the built-in default, learning in memory.
func InMemory() *Patterns {
	return &Patterns{Learn: true, CheckpointEvery: DefaultCheckpointEvery}
}

// Traces says where calls are recorded.
type Traces struct {
	Dir          string
	Prefix       string // "": the trace writer's default
	MaxFileBytes int64  // 0: the trace writer's default
	MaxFiles     int    // 0: keep every file
	// FailOnLoss (`fail_on_loss`) makes the command exit 1 at the end when
	// any record could not be written (a full disk); the loss is reported
	// either way.
	FailOnLoss bool
}

// The bound on the recent sessions RecentTraces keeps: recentFiles files of
// at most recentFileBytes, the oldest deleted first. Each process starts a
// file of its own, so the folder keeps the last recentFiles sessions (fewer
// if they are large); relearning reads at most the last 20,000 calls of
// them.
const (
	recentFileBytes = 4 << 20
	recentFiles     = 16
)

// RecentTraces is where `ahead mcp` records its session when it learns into
// the pool p and no traces folder is given: dir, or the pool's checkpoint
// path + ".recent". Each ahead mcp process serves one agent session:
// without the sessions before it, the pool could only learn what recurs
// within one (issue 24). They are the user's logs, kept bounded (64 MiB)
// beside the pool.
func RecentTraces(p *Patterns, dir string) *Traces {
	return &Traces{Dir: cmp.Or(dir, p.Checkpoint+".recent"), Prefix: "mcp", MaxFileBytes: recentFileBytes, MaxFiles: recentFiles}
}

// Backend is one entry of the backends block: exactly one of HTTP and
// Exec is set.
type Backend struct {
	Name string
	Pos  Pos // of the name
	HTTP *HTTPBackend
	Exec *ExecBackend
	// Tools lists the tools the backend serves; nil means every tool no
	// other backend lists (at most one backend may say so).
	Tools  []string
	Limits sched.Limits
	// PerSession says the backend keeps separate state per session
	// (`state: per_session`): a write then reaches only its own
	// session's speculative work. The default is shared state.
	PerSession bool
	// PathRoot is the absolute directory the backend resolves relative
	// path arguments against (`path_root`), so that they compare with
	// absolute ones; "" means its working directory for an exec backend
	// and unknown for an HTTP one.
	PathRoot string
}

// PathSpace returns how the backend's path arguments name files (policy
// `as: path`): an exec backend runs on this machine, in its Dir.
func (b Backend) PathSpace() policy.PathSpace {
	sp := policy.PathSpace{Root: b.PathRoot}
	if b.Exec != nil {
		sp.Local = true
		if sp.Root == "" {
			sp.Root, _ = filepath.Abs(b.Exec.Dir) // "" (unknown) if it fails
		}
	}
	return sp
}

// HTTPBackend is a backend reached by HTTP (package backend/remote).
type HTTPBackend struct {
	URL              string // a URL template, checked when it is built
	URLPos           Pos
	Timeout          time.Duration
	Headers          map[string]string // ${VAR} expanded
	MaxResponseBytes int64
}

// ExecBackend is a backend run as a local command (package
// backend/command).
type ExecBackend struct {
	// Command is the command line; a program named with a relative path
	// (./tool.sh) is resolved against the file's directory, a bare name
	// (python3) is looked up in PATH when run.
	Command        []string
	CommandPos     Pos
	Timeout        time.Duration
	Dir            string            // the file's directory unless set
	Env            map[string]string // added to ahead's environment; ${VAR} expanded
	MaxOutputBytes int64
}

// Engine is the optional engine tuning, field for field the engine
// options of the same names; zero fields keep the engine's defaults.
type Engine struct {
	SpecBudget         int
	MinProbability     float64
	Amplification      float64
	AmplificationBurst float64
	TTL                time.Duration
	IdleTimeout        time.Duration
	DefaultDuration    time.Duration
	DefaultThink       time.Duration
	StartDeadline      time.Duration
	MaxSessionEntries  int
	MaxSessionBytes    int64
	MaxEntries         int
	MaxBytes           int64
	MaxSessions        int
	SweepInterval      time.Duration
}

// A Pos locates a value in the file, for the errors that only building
// what it configures finds (a URL template package remote refuses).
type Pos struct {
	Line, Column int
	Field        string
}

// Error is one problem in a configuration file: FILE:LINE:COL: FIELD:
// MESSAGE. Problems in the speculation_policy block are the policy
// package's *policy.Error, of the same shape.
type Error = yamlnode.Error

// ErrorAt returns an error at pos in c's file, of the same shape as the
// errors found while parsing it.
func (c *Config) ErrorAt(pos Pos, format string, args ...any) error {
	return &Error{File: c.file, Line: pos.Line, Column: pos.Column, Field: pos.Field, Msg: fmt.Sprintf(format, args...)}
}

// A Loader reads configuration files. The zero Loader reads them as ahead
// serve needs them, with the process's environment; Load and Parse use it.
type Loader struct {
	// BackendsOptional says the command needs no backend from the file:
	// ahead mcp takes its upstream from the command line too (ahead mcp
	// -- COMMAND), and says itself when it has none, so for it a file
	// with only a policy, patterns or traces is complete.
	BackendsOptional bool
	// Dir is where relative paths start; empty means the directory of the
	// file (for Parse, of name).
	Dir string
	// LookupEnv expands ${VAR} in header and environment values; nil means
	// os.LookupEnv.
	LookupEnv func(string) (string, bool)
}

// Load reads and checks the configuration file at path, as ahead serve
// needs it.
func Load(path string) (*Config, error) { return new(Loader).Load(path) }

// Parse parses and checks a configuration file's contents, as ahead serve
// needs them. name is the file's name, for messages and relative paths.
func Parse(name string, data []byte) (*Config, error) { return new(Loader).Parse(name, data) }

// Load reads and checks the configuration file at path.
func (l *Loader) Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading config: %w", err)
	}
	return l.Parse(path, data)
}

// Parse parses and checks a configuration file's contents. name is the
// file's name, for messages and (unless l.Dir is set) relative paths. All
// problems found are reported together, joined in file order.
func (l *Loader) Parse(name string, data []byte) (*Config, error) {
	dir := l.Dir
	if dir == "" {
		abs, err := filepath.Abs(name)
		if err != nil {
			return nil, err
		}
		dir = filepath.Dir(abs)
	}
	env := l.LookupEnv
	if env == nil {
		env = os.LookupEnv
	}
	c := &Config{file: name, Listen: DefaultListen, ShutdownGrace: DefaultShutdownGrace,
		ReadTimeout: DefaultReadTimeout, WriteTimeout: DefaultWriteTimeout,
		IdleTimeout: DefaultIdleTimeout, MaxAnswerBytes: DefaultMaxAnswerBytes}
	p := &parser{Decoder: yamlnode.Decoder{File: name}, dir: dir, env: env}
	root, err := p.Document(data, "configuration file")
	if errors.Is(err, yamlnode.ErrEmpty) {
		return nil, &Error{File: name, Line: 1, Msg: "empty configuration file"}
	}
	if err != nil {
		return nil, err
	}
	var policyNode *yaml.Node
	hasBackends, hasMCP, hasPatterns := false, false, false
	var backendsNode *yaml.Node
	p.Mapping(root, "", func(k, v *yaml.Node, f string) {
		switch k.Value {
		case "listen":
			if s, ok := p.Str(v, f); ok {
				if _, _, err := net.SplitHostPort(s); err != nil {
					p.Errorf(v, f, "want HOST:PORT, got %q", s)
					return
				}
				c.Listen = s
			}
		case "max_body":
			if n, ok := p.bytes(v, f); ok {
				c.MaxBody = n
			}
		case "shutdown_grace":
			if d, ok := p.duration(v, f); ok {
				c.ShutdownGrace = d
			}
		case "read_timeout":
			c.ReadTimeout, _ = p.duration(v, f)
		case "write_timeout":
			c.WriteTimeout, _ = p.duration(v, f)
		case "idle_timeout":
			if d, ok := p.duration(v, f); ok {
				c.IdleTimeout = d
			}
		case "max_answer_bytes":
			if n, ok := p.bytes(v, f); ok {
				c.MaxAnswerBytes = n
			}
		case "max_connections":
			c.MaxConnections, _ = p.Int(v, f, 1)
		case "max_mcp_sessions":
			c.MaxMCPSessions, _ = p.Int(v, f, 1)
		case "auth_token_env":
			if name, ok := p.Str(v, f); ok {
				tok, set := env(name)
				switch {
				case !set:
					p.Errorf(v, f, "environment variable %s is not set", name)
				case strings.TrimSpace(tok) == "":
					p.Errorf(v, f, "environment variable %s is empty", name)
				default:
					c.AuthTokenEnv, c.AuthToken = name, tok
				}
			}
		case "llm":
			c.LLM = p.llm(v, f)
		case "speculator":
			c.Speculator = p.speculator(v, f)
		case "patterns":
			hasPatterns = true
			c.Patterns = p.patterns(v, f)
		case "traces":
			c.Traces = p.traces(v, f)
		case "backends":
			hasBackends = true
			backendsNode = yamlnode.Resolve(v)
			c.Backends = p.backends(v, f)
		case policy.Key:
			policyNode = v
		case "engine":
			c.Engine = p.engine(v, f)
		case MCPServersKey:
			hasMCP = true
			c.Upstreams = p.mcpServers(v, f)
		case "trust_annotations":
			if b, ok := p.Bool(v, f); ok {
				c.TrustAnnotations = b
			}
		case "fleet":
			c.Fleet = p.fleet(v, f)
		default:
			p.Unknown(k, f, fieldsTop)
		}
	})
	if !hasPatterns {
		c.Patterns = InMemory()
	}
	if policyNode != nil {
		pol, err := policy.FromNode(yamlnode.Resolve(policyNode), name)
		p.Add(err)
		c.Policy = pol
	}
	if len(c.Backends) == 0 && !hasMCP && !l.BackendsOptional && root.Kind == yaml.MappingNode && (!hasBackends || p.Err() == nil) {
		// Without any backend every call would be refused. (When the
		// backends block has errors, those say what is wrong; an
		// mcpServers block has at least one server or an error.)
		at := root
		if backendsNode != nil {
			at = backendsNode
		}
		p.Errorf(at, "backends", "no backends: configure at least one under backends (or MCP upstreams under mcpServers)")
	}
	if err := p.Err(); err != nil {
		return nil, err
	}
	return c, nil
}

var (
	fieldsTop = []string{"listen", "max_body", "shutdown_grace", "read_timeout", "write_timeout", "idle_timeout",
		"max_answer_bytes", "max_connections", "max_mcp_sessions",
		"auth_token_env", "llm", "speculator", "patterns", "traces", "backends",
		policy.Key, "engine", MCPServersKey, "trust_annotations", "fleet"}
	fieldsPatterns = []string{"pool", "learn", "checkpoint", "checkpoint_every", "max_predictions"}
	fieldsTraces   = []string{"dir", "prefix", "max_file_bytes", "max_files", "fail_on_loss"}
	fieldsEngine   = []string{"spec_budget", "min_probability", "amplification", "amplification_burst", "ttl", "idle_timeout", "default_duration",
		"default_think", "start_deadline", "max_session_entries", "max_session_bytes", "max_entries",
		"max_bytes", "max_sessions", "sweep_interval"}
)

// patterns parses `patterns: FILE`, `patterns: {pool: FILE, ...}` or
// `patterns: none` (nil: no predictor). Without pool (and checkpoint)
// the mapping configures the in-memory predictor (InMemory).
func (p *parser) patterns(n *yaml.Node, field string) *Patterns {
	n = yamlnode.Resolve(n)
	pc := &Patterns{Learn: true, CheckpointEvery: DefaultCheckpointEvery}
	if n.Kind == yaml.ScalarNode && n.Value == Off {
		return nil
	}
	if n.Kind == yaml.ScalarNode {
		s, ok := p.path(n, field)
		if !ok {
			return nil
		}
		pc.Pool, pc.Checkpoint = s, s
		return pc
	}
	p.Mapping(n, field, func(k, v *yaml.Node, f string) {
		switch k.Value {
		case "pool":
			pc.Pool, _ = p.path(v, f)
		case "learn":
			pc.Learn, _ = p.Bool(v, f)
		case "checkpoint":
			pc.Checkpoint, _ = p.path(v, f)
		case "checkpoint_every":
			if d, ok := p.duration(v, f); ok {
				pc.CheckpointEvery = d
			}
		case "max_predictions":
			pc.MaxPredictions, _ = p.Int(v, f, 1)
		default:
			p.Unknown(k, f, fieldsPatterns)
		}
	})
	if pc.Pool == "" && pc.Checkpoint != "" {
		p.Errorf(n, yamlnode.Join(field, "pool"), "missing: the pattern pool file the checkpoint continues (a file that does not exist yet starts empty)")
		return nil
	}
	if pc.Checkpoint == "" {
		pc.Checkpoint = pc.Pool
	}
	return pc
}

// traces parses `traces: DIR` or `traces: {dir: DIR, ...}`.
func (p *parser) traces(n *yaml.Node, field string) *Traces {
	n = yamlnode.Resolve(n)
	tc := &Traces{}
	if n.Kind == yaml.ScalarNode {
		s, ok := p.path(n, field)
		if !ok {
			return nil
		}
		tc.Dir = s
		return tc
	}
	p.Mapping(n, field, func(k, v *yaml.Node, f string) {
		switch k.Value {
		case "dir":
			tc.Dir, _ = p.path(v, f)
		case "prefix":
			if s, ok := p.Str(v, f); ok {
				if s == "" || strings.ContainsAny(s, `/\`) {
					p.Errorf(v, f, "want a file name prefix without slashes, got %q", s)
					return
				}
				tc.Prefix = s
			}
		case "max_file_bytes":
			tc.MaxFileBytes, _ = p.bytes(v, f)
		case "max_files":
			tc.MaxFiles, _ = p.Int(v, f, 1)
		case "fail_on_loss":
			tc.FailOnLoss, _ = p.Bool(v, f)
		default:
			p.Unknown(k, f, fieldsTraces)
		}
	})
	if tc.Dir == "" {
		p.Errorf(n, yamlnode.Join(field, "dir"), "missing: the directory to record traces in")
		return nil
	}
	return tc
}

func (p *parser) engine(n *yaml.Node, field string) Engine {
	var e Engine
	p.Mapping(n, field, func(k, v *yaml.Node, f string) {
		switch k.Value {
		case "spec_budget":
			e.SpecBudget, _ = p.Int(v, f, 1)
		case "min_probability":
			if x, ok := p.positiveFloat(v, f); ok {
				if x > 1 {
					p.Errorf(v, f, "want a probability in (0, 1], got %v", x)
					return
				}
				e.MinProbability = x
			}
		case "amplification":
			e.Amplification, _ = p.positiveFloat(v, f)
		case "amplification_burst":
			e.AmplificationBurst, _ = p.positiveFloat(v, f)
		case "ttl":
			e.TTL, _ = p.duration(v, f)
		case "idle_timeout":
			e.IdleTimeout, _ = p.duration(v, f)
		case "default_duration":
			e.DefaultDuration, _ = p.duration(v, f)
		case "default_think":
			e.DefaultThink, _ = p.duration(v, f)
		case "start_deadline":
			e.StartDeadline, _ = p.duration(v, f)
		case "max_session_entries":
			e.MaxSessionEntries, _ = p.Int(v, f, 1)
		case "max_session_bytes":
			e.MaxSessionBytes, _ = p.bytes(v, f)
		case "max_entries":
			e.MaxEntries, _ = p.Int(v, f, 1)
		case "max_bytes":
			e.MaxBytes, _ = p.bytes(v, f)
		case "max_sessions":
			e.MaxSessions, _ = p.Int(v, f, 1)
		case "sweep_interval":
			e.SweepInterval, _ = p.duration(v, f)
		default:
			p.Unknown(k, f, fieldsEngine)
		}
	})
	return e
}
