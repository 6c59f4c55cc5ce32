package main

// ahead's configuration file (ahead.yaml), read by `ahead serve` and
// `ahead mcp --config` (which uses its MCP parts). It is parsed here, in cmd/, from yaml.v3 nodes so that every error names the
// file, line, column and field; the result is translated into the library
// structs (engine.Options, sched.Limits, remote/command options, the
// policy) by serve.go. Unknown fields are errors: a typo must not silently
// turn a setting off.

import (
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/ahead-dev/ahead/mcpproxy"
	"github.com/ahead-dev/ahead/policy"
	"github.com/ahead-dev/ahead/sched"
	"github.com/ahead-dev/ahead/yamlnode"
)

// defaultListen is loopback only: ahead executes tools, so exposing it
// beyond the machine must be a deliberate choice.
const defaultListen = "127.0.0.1:7777"

// config is a parsed, checked configuration file. Relative paths in it are
// already resolved against the file's directory.
type config struct {
	file string // as given, for messages
	dir  string // the file's directory

	Listen string
	// MaxBody bounds a call's request body (0: the httpapi default).
	MaxBody int64
	// ShutdownGrace is how long in-flight calls may take to finish after
	// SIGTERM.
	ShutdownGrace time.Duration

	Patterns *patternsConfig // nil: no predictor
	Traces   *tracesConfig   // nil: nothing recorded
	Backends []backendConfig // in file order
	Policy   *policy.Policy  // nil: no speculation at all
	Engine   engineConfig

	// Upstreams are the MCP servers of the mcpServers block, in file
	// order (parsed by serve_mcp.go, in the shape agents' configurations
	// use); relative cwd paths are resolved.
	Upstreams []mcpproxy.Upstream
	// TrustAnnotations lets MCP upstreams' tool annotations feed the
	// default policy (issue 5, §3).
	TrustAnnotations bool
}

// defaultShutdownGrace bounds the wait for in-flight calls on SIGTERM.
const defaultShutdownGrace = 30 * time.Second

type patternsConfig struct {
	Pool string // the pattern pool file
	// Learn updates the pool's counts from live traffic and checkpoints
	// them to Checkpoint every CheckpointEvery and at shutdown.
	Learn           bool
	Checkpoint      string
	CheckpointEvery time.Duration
	MaxPredictions  int
}

type tracesConfig struct {
	Dir          string
	Prefix       string
	MaxFileBytes int64
}

type backendConfig struct {
	Name string
	pos  position // of the name, for errors found when building
	HTTP *httpBackendConfig
	Exec *execBackendConfig
	// Tools lists the tools the backend serves; empty means every tool no
	// other backend lists (at most one backend may say so).
	Tools  []string
	Limits sched.Limits
}

type httpBackendConfig struct {
	URL              string
	urlPos           position
	Timeout          time.Duration
	Headers          map[string]string
	MaxResponseBytes int64
}

type execBackendConfig struct {
	Command        []string
	commandPos     position
	Timeout        time.Duration
	Dir            string
	Env            map[string]string
	MaxOutputBytes int64
}

// engineConfig is the optional engine tuning; zero fields keep the
// engine's defaults.
type engineConfig struct {
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
	SweepInterval      time.Duration
}

// position locates a node for errors reported after parsing.
type position struct {
	line, col int
	field     string
}

// configError is one problem in a configuration file. Its text has the
// shape of the policy package's errors: FILE:LINE:COL: FIELD: MESSAGE.
type configError = yamlnode.Error

// errorAt returns an error located at pos in cfg's file.
func (c *config) errorAt(pos position, format string, args ...any) error {
	return &configError{File: c.file, Line: pos.line, Column: pos.col, Field: pos.field, Msg: fmt.Sprintf(format, args...)}
}

// configOptions says what a command needs of a configuration file beyond
// its being well formed. The zero value is ahead serve's needs.
type configOptions struct {
	// backendsOptional says the command needs no backend from the file:
	// ahead mcp takes its upstream from the command line too (ahead mcp
	// -- COMMAND), and says itself when it has none, so for it a file
	// with only a policy, patterns or traces is complete.
	backendsOptional bool
}

// loadConfig reads and checks the configuration file at path.
func loadConfig(path string) (*config, error) {
	return loadConfigWith(path, configOptions{})
}

// loadConfigWith is loadConfig for a command with other needs.
func loadConfigWith(path string, opts configOptions) (*config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading config: %w", err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	return parseConfigWith(data, path, filepath.Dir(abs), os.LookupEnv, opts)
}

// parseConfig parses a configuration file's contents. filename is for
// messages; dir is where relative paths start; lookupEnv expands ${VAR} in
// header and environment values. All problems found are reported together.
func parseConfig(data []byte, filename, dir string, lookupEnv func(string) (string, bool)) (*config, error) {
	return parseConfigWith(data, filename, dir, lookupEnv, configOptions{})
}

// parseConfigWith is parseConfig for a command with other needs.
func parseConfigWith(data []byte, filename, dir string, lookupEnv func(string) (string, bool), opts configOptions) (*config, error) {
	c := &config{file: filename, dir: dir, Listen: defaultListen, ShutdownGrace: defaultShutdownGrace}
	p := &cfgParser{Decoder: yamlnode.Decoder{File: filename}, dir: dir, env: lookupEnv}
	root, err := p.Document(data, "configuration file")
	if errors.Is(err, yamlnode.ErrEmpty) {
		return nil, &configError{File: filename, Line: 1, Msg: "empty configuration file"}
	}
	if err != nil {
		return nil, err
	}
	var policyNode *yaml.Node
	hasBackends, hasMCP := false, false
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
		case "patterns":
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
		case mcpServersKey:
			hasMCP = true
			c.Upstreams = p.mcpServers(v, f)
		case "trust_annotations":
			if b, ok := p.Bool(v, f); ok {
				c.TrustAnnotations = b
			}
		default:
			p.Unknown(k, f, fieldsTop)
		}
	})
	if policyNode != nil {
		pol, err := policy.FromNode(yamlnode.Resolve(policyNode), filename)
		p.Add(err)
		c.Policy = pol
	}
	if len(c.Backends) == 0 && !hasMCP && !opts.backendsOptional && root.Kind == yaml.MappingNode && (!hasBackends || p.Err() == nil) {
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
	fieldsTop = []string{"listen", "max_body", "shutdown_grace", "patterns", "traces", "backends",
		policy.Key, "engine", mcpServersKey, "trust_annotations"}
	fieldsPatterns = []string{"pool", "learn", "checkpoint", "checkpoint_every", "max_predictions"}
	fieldsTraces   = []string{"dir", "prefix", "max_file_bytes"}
	fieldsBackend  = []string{"http", "exec", "tools", "slots", "reserve", "spec_budget", "rate", "burst", "rate_reserve"}
	fieldsHTTP     = []string{"url", "timeout", "headers", "max_response_bytes"}
	fieldsExec     = []string{"command", "timeout", "dir", "env", "max_output_bytes"}
	fieldsEngine   = []string{"spec_budget", "min_probability", "amplification", "amplification_burst", "ttl", "idle_timeout", "default_duration",
		"default_think", "start_deadline", "max_session_entries", "max_session_bytes", "max_entries",
		"max_bytes", "sweep_interval"}
)

// defaultCheckpointEvery is how often learnt pattern counts are saved.
const defaultCheckpointEvery = 5 * time.Minute

// patterns parses `patterns: FILE` or `patterns: {pool: FILE, ...}`.
func (p *cfgParser) patterns(n *yaml.Node, field string) *patternsConfig {
	n = yamlnode.Resolve(n)
	pc := &patternsConfig{Learn: true, CheckpointEvery: defaultCheckpointEvery}
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
	if pc.Pool == "" {
		p.Errorf(n, yamlnode.Join(field, "pool"), "missing: the pattern pool file (from ahead mine)")
		return nil
	}
	if pc.Checkpoint == "" {
		pc.Checkpoint = pc.Pool
	}
	return pc
}

// traces parses `traces: DIR` or `traces: {dir: DIR, ...}`.
func (p *cfgParser) traces(n *yaml.Node, field string) *tracesConfig {
	n = yamlnode.Resolve(n)
	tc := &tracesConfig{}
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

func (p *cfgParser) backends(n *yaml.Node, field string) []backendConfig {
	var out []backendConfig
	owner := map[string]position{} // tool → the tools entry that claims it
	var fallback *backendConfig    // the backend without a tools list
	p.Mapping(n, field, func(k, v *yaml.Node, f string) {
		b := backendConfig{Name: k.Value, pos: position{k.Line, k.Column, f}}
		if b.Name == "" || strings.HasPrefix(b.Name, "mcp:") {
			p.Errorf(k, f, "want a backend name not empty and not starting with \"mcp:\" (reserved for MCP upstreams)")
			return
		}
		var toolsNode *yaml.Node
		p.Mapping(v, f, func(k, v *yaml.Node, f string) {
			switch k.Value {
			case "http":
				b.HTTP = p.httpBackend(v, f)
			case "exec":
				b.Exec = p.execBackend(v, f)
			case "tools":
				toolsNode = yamlnode.Resolve(v)
				b.Tools = p.toolList(v, f, owner, b.Name)
			case "slots":
				b.Limits.Slots, _ = p.Int(v, f, 1)
			case "reserve":
				b.Limits.Reserve, _ = p.Int(v, f, 0)
			case "spec_budget":
				b.Limits.SpecBudget, _ = p.Int(v, f, 1)
			case "rate":
				b.Limits.Rate, _ = p.positiveFloat(v, f)
			case "burst":
				b.Limits.Burst, _ = p.Int(v, f, 1)
			case "rate_reserve":
				b.Limits.RateReserve, _ = p.Int(v, f, 0)
			default:
				p.Unknown(k, f, fieldsBackend)
			}
		})
		switch {
		case b.HTTP == nil && b.Exec == nil:
			p.Errorf(v, f, "want exactly one of http or exec")
			return
		case b.HTTP != nil && b.Exec != nil:
			p.Errorf(v, f, "want exactly one of http or exec, got both")
			return
		}
		slots := b.Limits.Slots
		if slots == 0 {
			slots = 4 // sched's default
		}
		if b.Limits.Reserve > slots {
			p.Errorf(v, yamlnode.Join(f, "reserve"), "reserve %d is more than the backend's %d slots", b.Limits.Reserve, slots)
		} else if b.Limits.SpecBudget > slots-b.Limits.Reserve {
			p.Errorf(v, yamlnode.Join(f, "spec_budget"), "spec_budget %d is more than the %d slots outside the reserve", b.Limits.SpecBudget, slots-b.Limits.Reserve)
		}
		if (b.Limits.Burst > 0 || b.Limits.RateReserve > 0) && b.Limits.Rate == 0 {
			p.Errorf(v, f, "burst and rate_reserve need a rate")
		}
		if toolsNode == nil {
			if fallback != nil {
				p.Errorf(k, yamlnode.Join(f, "tools"), "missing: only one backend may serve all unlisted tools, and backend %q (line %d) already does", fallback.Name, fallback.pos.line)
				return
			}
			fallback = &b
		}
		out = append(out, b)
	})
	return out
}

// toolList parses a backend's tools, which no other backend may list.
func (p *cfgParser) toolList(n *yaml.Node, field string, owner map[string]position, backendName string) []string {
	n = yamlnode.Resolve(n)
	if n.Kind != yaml.SequenceNode {
		p.Errorf(n, field, "want a list of tool names, got %s", yamlnode.Describe(n))
		return nil
	}
	tools := make([]string, 0, len(n.Content))
	for i, item := range n.Content {
		f := fmt.Sprintf("%s[%d]", field, i)
		s, ok := p.Str(item, f)
		if !ok {
			continue
		}
		if s == "" {
			p.Errorf(item, f, "empty tool name")
			continue
		}
		if prev, dup := owner[s]; dup {
			p.Errorf(item, f, "tool %q is already listed at line %d (%s); a tool has one backend", s, prev.line, prev.field)
			continue
		}
		owner[s] = position{item.Line, item.Column, f}
		tools = append(tools, s)
	}
	if len(tools) == 0 && len(n.Content) == 0 {
		p.Errorf(n, field, "empty list: list the tools of backend %q, or remove tools to make it serve every unlisted tool", backendName)
	}
	return tools
}

func (p *cfgParser) httpBackend(n *yaml.Node, field string) *httpBackendConfig {
	h := &httpBackendConfig{}
	p.Mapping(n, field, func(k, v *yaml.Node, f string) {
		switch k.Value {
		case "url":
			if s, ok := p.Str(v, f); ok {
				h.URL = s
				h.urlPos = position{v.Line, v.Column, f}
			}
		case "timeout":
			h.Timeout, _ = p.duration(v, f)
		case "headers":
			h.Headers = p.stringMap(v, f, true)
		case "max_response_bytes":
			h.MaxResponseBytes, _ = p.bytes(v, f)
		default:
			p.Unknown(k, f, fieldsHTTP)
		}
	})
	if h.URL == "" {
		p.Errorf(n, yamlnode.Join(field, "url"), `missing: the URL template, such as "http://127.0.0.1:9000/tools/{tool}"`)
	}
	return h
}

func (p *cfgParser) execBackend(n *yaml.Node, field string) *execBackendConfig {
	x := &execBackendConfig{}
	hasCommand := false
	p.Mapping(n, field, func(k, v *yaml.Node, f string) {
		switch k.Value {
		case "command":
			hasCommand = true
			x.Command = p.command(v, f)
			x.commandPos = position{v.Line, v.Column, f}
		case "timeout":
			x.Timeout, _ = p.duration(v, f)
		case "dir":
			x.Dir, _ = p.path(v, f)
		case "env":
			x.Env = p.stringMap(v, f, true)
		case "max_output_bytes":
			x.MaxOutputBytes, _ = p.bytes(v, f)
		default:
			p.Unknown(k, f, fieldsExec)
		}
	})
	if !hasCommand {
		p.Errorf(n, yamlnode.Join(field, "command"), `missing: the command as a list, such as ["./tool.sh", "{tool}"]`)
	}
	if x.Dir == "" {
		// Commands given relative to the configuration run where it is.
		x.Dir = p.dir
	}
	return x
}

// command parses a command line as a list of words. A program named with a
// relative path (./tool.sh) is resolved against the configuration's
// directory; a bare name (python3) is looked up in PATH when run.
func (p *cfgParser) command(n *yaml.Node, field string) []string {
	n = yamlnode.Resolve(n)
	if n.Kind != yaml.SequenceNode || len(n.Content) == 0 {
		p.Errorf(n, field, `want the command as a non-empty list of words, such as ["./tool.sh", "{tool}"], got %s`, yamlnode.Describe(n))
		return nil
	}
	words := make([]string, 0, len(n.Content))
	for i, item := range n.Content {
		s, ok := p.Str(item, fmt.Sprintf("%s[%d]", field, i))
		if !ok {
			return nil
		}
		words = append(words, s)
	}
	if words[0] == "" {
		p.Errorf(n.Content[0], field+"[0]", "empty program name")
		return nil
	}
	if strings.ContainsRune(words[0], filepath.Separator) && !filepath.IsAbs(words[0]) {
		words[0] = filepath.Join(p.dir, words[0])
	}
	return words
}

func (p *cfgParser) engine(n *yaml.Node, field string) engineConfig {
	var e engineConfig
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
		case "sweep_interval":
			e.SweepInterval, _ = p.duration(v, f)
		default:
			p.Unknown(k, f, fieldsEngine)
		}
	})
	return e
}

// cfgParser walks the YAML tree and collects every problem it finds.
type cfgParser struct {
	yamlnode.Decoder
	dir string
	env func(string) (string, bool)
}

// path parses a file or directory name, resolved against the
// configuration's directory when relative.
func (p *cfgParser) path(n *yaml.Node, field string) (string, bool) {
	s, ok := p.Str(n, field)
	if !ok {
		return "", false
	}
	if s == "" {
		p.Errorf(yamlnode.Resolve(n), field, "empty path")
		return "", false
	}
	if !filepath.IsAbs(s) {
		s = filepath.Join(p.dir, s)
	}
	return s, true
}

func (p *cfgParser) positiveFloat(n *yaml.Node, field string) (float64, bool) {
	n = yamlnode.Resolve(n)
	var x float64
	tag := n.ShortTag()
	if n.Kind != yaml.ScalarNode || (tag != "!!int" && tag != "!!float") || n.Decode(&x) != nil {
		p.Errorf(n, field, "want a number, got %s", yamlnode.Describe(n))
		return 0, false
	}
	if !(x > 0) || math.IsInf(x, 0) {
		p.Errorf(n, field, "must be a positive number, got %s", n.Value)
		return 0, false
	}
	return x, true
}

// duration parses a positive Go duration with its unit ("10s", "1m30s").
// A bare number is an error: 30 could mean seconds or milliseconds.
func (p *cfgParser) duration(n *yaml.Node, field string) (time.Duration, bool) {
	n = yamlnode.Resolve(n)
	if n.Kind != yaml.ScalarNode || (n.ShortTag() != "!!str" && n.ShortTag() != "!!int" && n.ShortTag() != "!!float") {
		p.Errorf(n, field, "want a duration such as 10s or 1m30s, got %s", yamlnode.Describe(n))
		return 0, false
	}
	d, err := time.ParseDuration(n.Value)
	if err != nil {
		if n.ShortTag() != "!!str" {
			p.Errorf(n, field, "want a duration with its unit, such as %ss, got %s", n.Value, n.Value)
		} else {
			p.Errorf(n, field, "want a duration such as 10s or 1m30s, got %q", n.Value)
		}
		return 0, false
	}
	if d <= 0 {
		p.Errorf(n, field, "must be positive, got %s", n.Value)
		return 0, false
	}
	return d, true
}

var byteSize = regexp.MustCompile(`^\s*([0-9]+)\s*([KMGT]i?B|B)?\s*$`)

var byteUnits = map[string]int64{
	"": 1, "B": 1,
	"KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12,
	"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40,
}

// bytes parses a positive byte count: a number, or a number with a unit
// (B, KB, MB, GB, KiB, MiB, GiB).
func (p *cfgParser) bytes(n *yaml.Node, field string) (int64, bool) {
	n = yamlnode.Resolve(n)
	if n.Kind == yaml.ScalarNode && (n.ShortTag() == "!!str" || n.ShortTag() == "!!int") {
		if m := byteSize.FindStringSubmatch(n.Value); m != nil {
			v, err := strconv.ParseInt(m[1], 10, 64)
			unit := byteUnits[m[2]]
			if err == nil && v > 0 && v <= math.MaxInt64/unit {
				return v * unit, true
			}
			if err == nil && v == 0 {
				p.Errorf(n, field, "must be positive, got %s", n.Value)
				return 0, false
			}
		}
	}
	p.Errorf(n, field, "want a size such as 8MiB, 512KB or 1048576, got %s", yamlnode.Describe(n))
	return 0, false
}

// stringMap parses a mapping of strings to strings (headers, environment).
// With expand, ${VAR} in values is replaced by the environment variable,
// which must be set: secrets belong in the environment, not in the file.
func (p *cfgParser) stringMap(n *yaml.Node, field string, expand bool) map[string]string {
	m := map[string]string{}
	p.Mapping(n, field, func(k, v *yaml.Node, f string) {
		s, ok := p.Str(v, f)
		if !ok {
			return
		}
		if expand {
			s, ok = p.expand(v, f, s)
			if !ok {
				return
			}
		}
		m[k.Value] = s
	})
	return m
}

var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// expand replaces ${VAR} with the variable's value; $$ is not special, and
// a lone $ stays as is.
func (p *cfgParser) expand(n *yaml.Node, field, s string) (string, bool) {
	ok := true
	out := envRef.ReplaceAllStringFunc(s, func(ref string) string {
		name := ref[2 : len(ref)-1]
		v, set := p.env(name)
		if !set {
			p.Errorf(yamlnode.Resolve(n), field, "environment variable %s is not set", name)
			ok = false
		}
		return v
	})
	return out, ok
}
