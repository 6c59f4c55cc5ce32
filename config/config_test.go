package config_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/ahead-dev/ahead/config"
	"github.com/ahead-dev/ahead/mcpproxy"
	"github.com/ahead-dev/ahead/sched"
)

// testEnv is the environment ${VAR} references are expanded from.
func testEnv(name string) (string, bool) {
	v, ok := map[string]string{"TOKEN": "s3cret", "EMPTY": ""}[name]
	return v, ok
}

// parse parses data as the file a.yaml in /d, as ahead serve needs it.
func parse(data string) (*config.Config, error) {
	return (&config.Loader{Dir: "/d", LookupEnv: testEnv}).Parse("a.yaml", []byte(data))
}

// ignorePos leaves out what only the error messages use.
var ignorePos = []cmp.Option{
	cmpopts.IgnoreUnexported(config.Config{}),
	cmpopts.IgnoreFields(config.Backend{}, "Pos"),
	cmpopts.IgnoreFields(config.HTTPBackend{}, "URLPos"),
	cmpopts.IgnoreFields(config.ExecBackend{}, "CommandPos"),
	cmpopts.IgnoreFields(mcpproxy.Upstream{}, "Transport"),
}

func TestParseIssueExample(t *testing.T) {
	// The shape of issue 2, §8, plus the brief's options.
	const file = `
listen: 127.0.0.1:7777
patterns: ./pool.json        # optional: the pattern pool
traces: ./traces             # optional: where to record
backends:
  web:
    http: {url: "http://127.0.0.1:9000/{tool}", timeout: 10s, headers: {Authorization: "Bearer ${TOKEN}"}}
    tools: [search, fetch, delete]
    slots: 8
    reserve: 1
    spec_budget: 4
    rate: 20
    burst: 5
  local:
    exec: {command: ["./tool.sh", "{tool}"], timeout: 30s}
speculation_policy:
  default: {allow: false}
  tools:
    search: {allow: true, max_speculation: full, shared: true, ttl: 30s}
    fetch: {allow: true, reads: url}
    delete: {writes: url}
  deduplication: {strategy: max_expected_speculative_utility}
engine: {spec_budget: 8, ttl: 60s, idle_timeout: 10m, max_bytes: 64MiB, max_sessions: 500, min_probability: 0.1, amplification: 1.5, amplification_burst: 20}
max_body: 1MiB
shutdown_grace: 5s
`
	c, err := (&config.Loader{Dir: "/etc/ahead", LookupEnv: testEnv}).Parse("ahead.yaml", []byte(file))
	if err != nil {
		t.Fatal(err)
	}
	want := &config.Config{
		Listen:         "127.0.0.1:7777",
		MaxBody:        1 << 20,
		ShutdownGrace:  5 * time.Second,
		ReadTimeout:    config.DefaultReadTimeout,
		WriteTimeout:   config.DefaultWriteTimeout,
		IdleTimeout:    config.DefaultIdleTimeout,
		MaxAnswerBytes: config.DefaultMaxAnswerBytes,
		Patterns:       &config.Patterns{Pool: "/etc/ahead/pool.json", Learn: true, Checkpoint: "/etc/ahead/pool.json", CheckpointEvery: config.DefaultCheckpointEvery},
		Traces:         &config.Traces{Dir: "/etc/ahead/traces"},
		Backends: []config.Backend{
			{
				Name: "web",
				HTTP: &config.HTTPBackend{URL: "http://127.0.0.1:9000/{tool}", Timeout: 10 * time.Second,
					Headers: map[string]string{"Authorization": "Bearer s3cret"}},
				Tools:  []string{"search", "fetch", "delete"},
				Limits: sched.Limits{Slots: 8, Reserve: 1, SpecBudget: 4, Rate: 20, Burst: 5},
			},
			{
				Name: "local",
				Exec: &config.ExecBackend{Command: []string{"/etc/ahead/tool.sh", "{tool}"}, Timeout: 30 * time.Second, Dir: "/etc/ahead"},
			},
		},
		Engine: config.Engine{SpecBudget: 8, TTL: time.Minute, IdleTimeout: 10 * time.Minute, MaxBytes: 64 << 20, MaxSessions: 500, MinProbability: 0.1, Amplification: 1.5, AmplificationBurst: 20},
	}
	pol := c.Policy
	c.Policy = nil // checked below: the policy package owns its parsing
	if diff := cmp.Diff(want, c, ignorePos...); diff != "" {
		t.Errorf("config differs (-want +got):\n%s", diff)
	}
	if got := pol.Lookup("search"); !got.Allow || !got.Shared || got.TTL != 30*time.Second {
		t.Errorf("policy for search = %+v", got)
	}
	if got := pol.Lookup("delete"); got.Allow || got.IsReadOnly() {
		t.Errorf("policy for delete = %+v, want a write that is never speculated", got)
	}
	for _, tc := range []struct {
		name string
		got  config.Pos
		want config.Pos
	}{
		{"backend name", c.Backends[0].Pos, config.Pos{Line: 6, Column: 3, Field: "backends.web"}},
		{"url", c.Backends[0].HTTP.URLPos, config.Pos{Line: 7, Column: 17, Field: "backends.web.http.url"}},
		{"command", c.Backends[1].Exec.CommandPos, config.Pos{Line: 15, Column: 21, Field: "backends.local.exec.command"}},
	} {
		if tc.got != tc.want {
			t.Errorf("%s position = %+v, want %+v", tc.name, tc.got, tc.want)
		}
	}
	// Errors found when building what the file configures are placed like
	// the parse errors.
	if got, want := c.ErrorAt(c.Backends[0].HTTP.URLPos, "bad %s", "template").Error(), "ahead.yaml:7:17: backends.web.http.url: bad template"; got != want {
		t.Errorf("ErrorAt = %q, want %q", got, want)
	}
}

func TestParseDefaults(t *testing.T) {
	c, err := parse("backends:\n  all:\n    http: {url: 'http://h/{tool}'}\n")
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != config.DefaultListen || c.ShutdownGrace != config.DefaultShutdownGrace || c.Traces != nil || c.Policy != nil || c.MaxBody != 0 {
		t.Errorf("defaults: %+v", c)
	}
	// Issue 24: a fresh install predicts from the built-in default and
	// learns in memory.
	if diff := cmp.Diff(config.InMemory(), c.Patterns); diff != "" {
		t.Errorf("patterns without a patterns block (-want +got):\n%s", diff)
	}
	if c.Backends[0].Tools != nil {
		t.Errorf("a backend without tools serves every tool; got tools %q", c.Backends[0].Tools)
	}
}

func TestParseLongForms(t *testing.T) {
	const file = `
patterns: {pool: /p/pool.json, learn: false, checkpoint: learnt.json, checkpoint_every: 1m, max_predictions: 5}
traces: {dir: /var/ahead, prefix: web, max_file_bytes: 10MB}
mcpServers:
  fs: {command: npx}
trust_annotations: true
`
	c, err := parse(file)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&config.Patterns{Pool: "/p/pool.json", Learn: false, Checkpoint: "/d/learnt.json", CheckpointEvery: time.Minute, MaxPredictions: 5}, c.Patterns); diff != "" {
		t.Errorf("patterns (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(&config.Traces{Dir: "/var/ahead", Prefix: "web", MaxFileBytes: 10e6}, c.Traces); diff != "" {
		t.Errorf("traces (-want +got):\n%s", diff)
	}
	if !c.TrustAnnotations {
		t.Errorf("trust_annotations = false, want true")
	}
	if len(c.Upstreams) != 1 || c.Upstreams[0].Name != "fs" || c.Upstreams[0].Command != "npx" {
		t.Errorf("upstreams = %+v, want fs running npx", c.Upstreams)
	}
}

// TestParseMCPOnly: the file ahead mcp --config reads (MCP servers and
// what goes around them, no backends) is a complete configuration for
// ahead serve too.
func TestParseMCPOnly(t *testing.T) {
	const file = `
mcpServers:
  fs:
    command: npx
    args: [-y, "@modelcontextprotocol/server-filesystem", /srv]
  search: {type: http, url: "https://mcp.example.com/mcp", headers: {Authorization: Bearer x}}
speculation_policy:
  tools:
    read_text_file: {allow: true}
patterns: pool.json
traces: {dir: traces, prefix: agent}
trust_annotations: true
`
	c, err := parse(file)
	if err != nil {
		t.Fatal(err)
	}
	want := []mcpproxy.Upstream{
		{Name: "fs", Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-filesystem", "/srv"}},
		{Name: "search", URL: "https://mcp.example.com/mcp", Headers: map[string]string{"Authorization": "Bearer x"}},
	}
	if diff := cmp.Diff(want, c.Upstreams, ignorePos...); diff != "" {
		t.Errorf("upstreams (-want +got):\n%s", diff)
	}
	if c.Patterns == nil || c.Patterns.Pool != "/d/pool.json" || c.Traces == nil || c.Traces.Dir != "/d/traces" || c.Traces.Prefix != "agent" ||
		!c.TrustAnnotations || !c.Policy.Lookup("read_text_file").Allow || len(c.Backends) != 0 {
		t.Errorf("config = %+v", c)
	}
}

// TestParseBackendsOptional: ahead mcp may take its only upstream from the
// command line, so a file without backends is complete for it.
func TestParseBackendsOptional(t *testing.T) {
	const file = "speculation_policy: {default: {allow: false}}\ntraces: t\n"
	if _, err := parse(file); err == nil || err.Error() != "a.yaml:1:1: backends: no backends: configure at least one under backends (or MCP upstreams under mcpServers)" {
		t.Errorf("ahead serve's parse: error %v, want no backends", err)
	}
	mcp := &config.Loader{BackendsOptional: true, Dir: "/d", LookupEnv: testEnv}
	c, err := mcp.Parse("a.yaml", []byte(file))
	if err != nil {
		t.Fatal(err)
	}
	if c.Traces == nil || c.Traces.Dir != "/d/t" || c.Policy == nil {
		t.Errorf("config = %+v", c)
	}
	// Everything else is checked as strictly.
	_, err = mcp.Parse("a.yaml", []byte("traces: t\nlisten: x\n"))
	if err == nil || err.Error() != `a.yaml:2:9: listen: want HOST:PORT, got "x"` {
		t.Errorf("bad listen: error %v", err)
	}
}

func TestParseErrors(t *testing.T) {
	const backend = "backends:\n  b:\n    http: {url: 'http://h/{tool}'}\n"
	for _, tc := range []struct {
		name, file string
		want       []string // each error, in order
	}{
		{"empty", "", []string{"a.yaml:1: empty configuration file"}},
		{"only comments", "# nothing\n", []string{"a.yaml:1: empty configuration file"}},
		{"not yaml", "listen: [", []string{"a.yaml:1: invalid YAML: did not find expected node content"}},
		{"two documents", backend + "---\nlisten: x\n", []string{"a.yaml:4:1: a configuration file holds one YAML document, found a second"}},
		{"not a mapping", "- a\n", []string{"a.yaml:1:1: want a mapping, got a list"}},
		{"no backends", "listen: 127.0.0.1:1\n", []string{"a.yaml:1:1: backends: no backends: configure at least one under backends (or MCP upstreams under mcpServers)"}},
		{"unknown top-level field", backend + "listn: x\n", []string{
			"a.yaml:4:1: listn: unknown field (want listen, max_body, shutdown_grace, read_timeout, write_timeout, idle_timeout, max_answer_bytes, max_connections, max_mcp_sessions, auth_token_env, llm, speculator, patterns, traces, backends, speculation_policy, engine, mcpServers, trust_annotations or fleet)"}},
		{"duplicate key", backend + "listen: a:1\nlisten: b:2\n", []string{"a.yaml:5:1: listen: duplicate key (first at line 4)"}},
		{"bad listen", backend + "listen: 7777\n", []string{`a.yaml:4:9: listen: want a string, got a number (7777)`}},
		{"bad listen string", backend + "listen: localhost\n", []string{`a.yaml:4:9: listen: want HOST:PORT, got "localhost"`}},
		{"duration without unit", backend + "shutdown_grace: 30\n", []string{"a.yaml:4:17: shutdown_grace: want a duration with its unit, such as 30s, got 30"}},
		{"bad duration", backend + "shutdown_grace: soon\n", []string{`a.yaml:4:17: shutdown_grace: want a duration such as 10s or 1m30s, got "soon"`}},
		{"negative duration", backend + "shutdown_grace: -1s\n", []string{"a.yaml:4:17: shutdown_grace: must be positive, got -1s"}},
		{"bad size", backend + "max_body: 8 mebibytes\n", []string{`a.yaml:4:11: max_body: want a size such as 8MiB, 512KB or 1048576, got "8 mebibytes"`}},
		{"zero size", backend + "max_body: 0\n", []string{"a.yaml:4:11: max_body: must be positive, got 0"}},
		{"overflowing size", backend + "max_body: 99999999999TiB\n", []string{`a.yaml:4:11: max_body: want a size such as 8MiB, 512KB or 1048576, got "99999999999TiB"`}},
		{"empty backends", "backends: {}\n", []string{"a.yaml:1:11: backends: no backends: configure at least one under backends (or MCP upstreams under mcpServers)"}},
		{"backend without kind", "backends:\n  b: {tools: [x]}\n", []string{"a.yaml:2:6: backends.b: want exactly one of http or exec"}},
		{"backend with both kinds", "backends:\n  b:\n    http: {url: 'http://h/'}\n    exec: {command: [x]}\n", []string{
			"a.yaml:3:5: backends.b: want exactly one of http or exec, got both"}},
		{"unknown backend field", "backends:\n  b:\n    http: {url: 'http://h/'}\n    slot: 3\n", []string{
			"a.yaml:4:5: backends.b.slot: unknown field (want http, exec, tools, slots, reserve, spec_budget, rate, burst, rate_reserve, queue, state or path_root)"}},
		{"unknown http field", "backends:\n  b:\n    http: {url: 'http://h/', timout: 1s}\n", []string{
			"a.yaml:3:30: backends.b.http.timout: unknown field (want url, timeout, headers or max_response_bytes)"}},
		{"missing url", "backends:\n  b:\n    http: {timeout: 1s}\n", []string{
			`a.yaml:3:11: backends.b.http.url: missing: the URL template, such as "http://127.0.0.1:9000/tools/{tool}"`}},
		{"command not a list", "backends:\n  b:\n    exec: {command: ./tool.sh}\n", []string{
			`a.yaml:3:21: backends.b.exec.command: want the command as a non-empty list of words, such as ["./tool.sh", "{tool}"], got "./tool.sh"`}},
		{"zero slots", "backends:\n  b:\n    http: {url: 'http://h/'}\n    slots: 0\n", []string{"a.yaml:4:12: backends.b.slots: must be at least 1, got 0"}},
		{"reserve over slots", "backends:\n  b:\n    http: {url: 'http://h/'}\n    slots: 2\n    reserve: 3\n", []string{
			"a.yaml:3:5: backends.b.reserve: reserve 3 is more than the backend's 2 slots"}},
		{"spec_budget over free slots", "backends:\n  b:\n    http: {url: 'http://h/'}\n    slots: 4\n    reserve: 1\n    spec_budget: 4\n", []string{
			"a.yaml:3:5: backends.b.spec_budget: spec_budget 4 is more than the 3 slots outside the reserve"}},
		{"reserve without slots", "backends:\n  b:\n    http: {url: 'http://h/'}\n    reserve: 1\n", []string{
			"a.yaml:3:5: backends.b.reserve: reserve needs slots: without slots, real calls are not limited and speculation keeps to spec_budget"}},
		{"queue without slots or rate", "backends:\n  b:\n    http: {url: 'http://h/'}\n    queue: 8\n", []string{
			"a.yaml:3:5: backends.b.queue: queue needs slots or rate: without them calls never wait"}},
		{"mcp queue without slots", "mcpServers:\n  fs: {command: x, queue: 8}\n", []string{
			"a.yaml:2:20: mcpServers.fs.queue: queue needs slots: without them calls never wait"}},
		{"burst without rate", "backends:\n  b:\n    http: {url: 'http://h/'}\n    burst: 3\n", []string{"a.yaml:3:5: backends.b: burst and rate_reserve need a rate"}},
		{"negative rate", "backends:\n  b:\n    http: {url: 'http://h/'}\n    rate: -1\n", []string{"a.yaml:4:11: backends.b.rate: must be a positive number, got -1"}},
		{"tool listed twice", "backends:\n  a:\n    http: {url: 'http://h/'}\n    tools: [x, y]\n  b:\n    http: {url: 'http://h/'}\n    tools: [y]\n", []string{
			`a.yaml:7:13: backends.b.tools[0]: tool "y" is already listed at line 4 (backends.a.tools[1]); a tool has one backend`}},
		{"two catch-all backends", "backends:\n  a:\n    http: {url: 'http://h/'}\n  b:\n    http: {url: 'http://h/'}\n", []string{
			`a.yaml:4:3: backends.b.tools: missing: only one backend may serve all unlisted tools, and backend "a" (line 2) already does`}},
		{"empty tools", "backends:\n  a:\n    http: {url: 'http://h/'}\n    tools: []\n", []string{
			`a.yaml:4:12: backends.a.tools: empty list: list the tools of backend "a", or remove tools to make it serve every unlisted tool`}},
		{"reserved backend name", "backends:\n  'mcp:x':\n    http: {url: 'http://h/'}\n", []string{
			`a.yaml:2:3: backends.mcp:x: want a backend name not empty and not starting with "mcp:" (reserved for MCP upstreams)`}},
		{"unset env var", "backends:\n  a:\n    http: {url: 'http://h/', headers: {Authorization: 'Bearer ${NOPE}'}}\n", []string{
			"a.yaml:3:55: backends.a.http.headers.Authorization: environment variable NOPE is not set"}},
		{"bad engine field", backend + "engine: {ttl: 60, spec_budget: many, min_probability: 2, turbo: true}\n", []string{
			"a.yaml:4:15: engine.ttl: want a duration with its unit, such as 60s, got 60",
			`a.yaml:4:32: engine.spec_budget: want a whole number, got "many"`,
			"a.yaml:4:55: engine.min_probability: want a probability in (0, 1], got 2",
			"a.yaml:4:58: engine.turbo: unknown field (want spec_budget, min_probability, amplification, amplification_burst, ttl, idle_timeout, default_duration, default_think, start_deadline, max_session_entries, max_session_bytes, max_entries, max_bytes, max_sessions or sweep_interval)"}},
		{"checkpoint without pool", backend + "patterns: {checkpoint: c.json}\n", []string{"a.yaml:4:11: patterns.pool: missing: the pattern pool file the checkpoint continues (a file that does not exist yet starts empty)"}},
		{"patterns empty", backend + "patterns: ''\n", []string{"a.yaml:4:11: patterns: empty path"}},
		{"traces without dir", backend + "traces: {prefix: a}\n", []string{"a.yaml:4:9: traces.dir: missing: the directory to record traces in"}},
		{"traces prefix with slash", backend + "traces: {dir: t, prefix: a/b}\n", []string{`a.yaml:4:26: traces.prefix: want a file name prefix without slashes, got "a/b"`}},
		{"bad policy", backend + "speculation_policy:\n  tools:\n    x: {allow: maybe}\n", []string{
			`a.yaml:6:16: speculation_policy.tools.x.allow: want true or false, got "maybe"`}},
		{"several errors at once", "listen: x\nbackends: {b: {exec: {command: []}}}\nmax_body: -3\n", []string{
			`a.yaml:1:9: listen: want HOST:PORT, got "x"`,
			`a.yaml:2:32: backends.b.exec.command: want the command as a non-empty list of words, such as ["./tool.sh", "{tool}"], got a list`,
			"a.yaml:3:11: max_body: want a size such as 8MiB, 512KB or 1048576, got a number (-3)"}},
		{"alias", "x: &a {url: 'http://h/'}\nbackends: {b: {http: *a}}\n", []string{
			"a.yaml:1:1: x: unknown field (want listen, max_body, shutdown_grace, read_timeout, write_timeout, idle_timeout, max_answer_bytes, max_connections, max_mcp_sessions, auth_token_env, llm, speculator, patterns, traces, backends, speculation_policy, engine, mcpServers, trust_annotations or fleet)"}},
		{"mcpServers errors with the others", "listen: x\nmcpServers:\n  fs: {command: x}\n  fs: {url: 'http://h/', slots: many}\n", []string{
			`a.yaml:1:9: listen: want HOST:PORT, got "x"`,
			"a.yaml:4:3: mcpServers.fs: duplicate key (first at line 3)"}},
		{"mcpServers field errors", "mcpServers:\n  fs: {command: x, args: [--port, 8080], env: {DEBUG: true}, timeout: 10}\n", []string{
			"a.yaml:2:35: mcpServers.fs.args[1]: want a string, got a number (8080)",
			"a.yaml:2:55: mcpServers.fs.env.DEBUG: want a string, got a boolean (true)",
			"a.yaml:2:62: mcpServers.fs.timeout: unknown field (want command, args, env, cwd, url, headers, type, prefix, trust_annotations, slots or queue)"}},
		{"empty mcpServers", "mcpServers: {}\n", []string{"a.yaml:1:13: mcpServers: empty: configure at least one MCP server, or remove mcpServers"}},
		{"merge key", "backends:\n  b:\n    <<: {http: {url: 'http://h/'}}\n", []string{
			"a.yaml:3:5: backends.b: merge keys (<<) are not supported; write the fields out",
			"a.yaml:3:5: backends.b: want exactly one of http or exec"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parse(tc.file)
			if err == nil {
				t.Fatalf("Parse accepted it: %+v", c)
			}
			if diff := cmp.Diff(tc.want, strings.Split(err.Error(), "\n")); diff != "" {
				t.Errorf("errors differ (-want +got):\n%s", diff)
			}
		})
	}
}

// TestLoad reads a file from disk: relative paths start at its directory,
// and ${VAR} comes from the process's environment.
func TestLoad(t *testing.T) {
	t.Setenv("AHEAD_CONFIG_TEST_TOKEN", "s3cret")
	c, err := config.Load(filepath.Join("testdata", "ahead.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dir, err := filepath.Abs("testdata")
	if err != nil {
		t.Fatal(err)
	}
	want := &config.Config{
		Listen:         "127.0.0.1:7777",
		MaxBody:        1 << 20,
		ShutdownGrace:  5 * time.Second,
		ReadTimeout:    config.DefaultReadTimeout,
		WriteTimeout:   config.DefaultWriteTimeout,
		IdleTimeout:    config.DefaultIdleTimeout,
		MaxAnswerBytes: config.DefaultMaxAnswerBytes,
		Patterns: &config.Patterns{Pool: filepath.Join(dir, "pool.json"), Learn: true, Checkpoint: filepath.Join(dir, "learnt", "pool.json"),
			CheckpointEvery: time.Minute, MaxPredictions: 5},
		Traces: &config.Traces{Dir: filepath.Join(dir, "traces"), Prefix: "web", MaxFileBytes: 10e6},
		Backends: []config.Backend{
			{
				Name: "web",
				HTTP: &config.HTTPBackend{URL: "http://127.0.0.1:9000/tools/{tool}", Timeout: 10 * time.Second,
					Headers: map[string]string{"Authorization": "Bearer s3cret"}, MaxResponseBytes: 8 << 20},
				Tools:  []string{"search", "fetch", "delete"},
				Limits: sched.Limits{Slots: 8, Reserve: 1, SpecBudget: 4, Rate: 20, Burst: 5, RateReserve: 1},
			},
			{
				Name: "local",
				Exec: &config.ExecBackend{Command: []string{filepath.Join(dir, "tool.sh"), "{tool}"}, Timeout: 30 * time.Second, Dir: dir,
					Env: map[string]string{"PYTHONUNBUFFERED": "1"}, MaxOutputBytes: 1 << 20},
			},
		},
		Engine: config.Engine{SpecBudget: 16, MinProbability: 0.05, TTL: time.Minute, MaxBytes: 64 << 20},
		Upstreams: []mcpproxy.Upstream{{Name: "fs", Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-filesystem", "data"},
			Dir: filepath.Join(dir, "data"), Prefix: "fs_"}},
		TrustAnnotations: true,
	}
	if diff := cmp.Diff(want, c, append(ignorePos, cmpopts.IgnoreFields(config.Config{}, "Policy"))...); diff != "" {
		t.Errorf("config differs (-want +got):\n%s", diff)
	}
	if !c.Policy.Lookup("fetch").Allow {
		t.Errorf("policy for fetch = %+v, want allowed", c.Policy.Lookup("fetch"))
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := config.Load(filepath.Join(dir, "none.yaml")); err == nil || !errors.Is(err, os.ErrNotExist) || !strings.HasPrefix(err.Error(), "reading config: ") {
		t.Errorf("missing file: error %v, want reading config: ... not exist", err)
	}
	file := filepath.Join(dir, "ahead.yaml")
	if err := os.WriteFile(file, []byte("backends:\n  web:\n    http: {url: 'http://h/', headers: {A: '${AHEAD_CONFIG_TEST_UNSET}'}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := config.Load(file)
	if want := file + ":3:43: backends.web.http.headers.A: environment variable AHEAD_CONFIG_TEST_UNSET is not set"; err == nil || err.Error() != want {
		t.Errorf("unset variable: error %v, want %s", err, want)
	}
	if e, ok := errors.AsType[*config.Error](err); !ok || e.Line != 3 || e.Field != "backends.web.http.headers.A" {
		t.Errorf("error %#v, want a *config.Error on line 3", err)
	}
	if _, err := (&config.Loader{BackendsOptional: true}).Load(file); err == nil {
		t.Errorf("a Loader for ahead mcp accepted the unset variable")
	}
}

// TestREADMEExample: the configuration README.md shows is one ahead serve
// accepts.
func TestREADMEExample(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "## Configuration")
	_, block, ok2 := strings.Cut(section, "```yaml\n")
	block, _, ok3 := strings.Cut(block, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("README.md has no yaml block under ## Configuration")
	}
	env := func(name string) (string, bool) { return "x", name == "SEARCH_TOKEN" }
	c, err := (&config.Loader{Dir: t.TempDir(), LookupEnv: env}).Parse("README.md", []byte(block))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Backends) != 2 || c.Policy == nil || c.Patterns == nil || c.Traces == nil {
		t.Errorf("README example: %+v", c)
	}
}

// TestPatternsOptOut: `patterns: none` predicts nothing; a block without
// pool is the in-memory predictor, with its settings (issue 24).
func TestPatternsOptOut(t *testing.T) {
	const backend = "backends:\n  b:\n    http: {url: 'http://h/{tool}'}\n"
	c, err := parse(backend + "patterns: none\n")
	if err != nil || c.Patterns != nil {
		t.Errorf("patterns: none: %+v, %v; want no predictor", c.Patterns, err)
	}
	c, err = parse(backend + "patterns: {learn: false, max_predictions: 3}\n")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&config.Patterns{CheckpointEvery: config.DefaultCheckpointEvery, MaxPredictions: 3}, c.Patterns); diff != "" {
		t.Errorf("a block without pool (-want +got):\n%s", diff)
	}
}
