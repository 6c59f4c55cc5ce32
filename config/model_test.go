package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ahead-dev/ahead/config"
	"github.com/ahead-dev/ahead/policy"
)

func TestParseModelSide(t *testing.T) {
	const backend = "backends:\n  b:\n    http: {url: 'http://h/{tool}'}\n    state: per_session\n"
	env := func(k string) (string, bool) {
		v, ok := map[string]string{"AHEAD_TOKEN": "t0k", "EMPTY": " "}[k]
		return v, ok
	}
	parse := func(s string) (*config.Config, error) {
		return (&config.Loader{Dir: "/d", LookupEnv: env}).Parse("a.yaml", []byte(backend+s))
	}
	c, err := parse(`
llm: {openai: {base_url: "https://api.openai.com/v1/"}, anthropic: {base_url: "https://api.anthropic.com"}}
speculator: {base_url: "http://127.0.0.1:11434/v1", model: qwen3:0.6b, api_key_env: SPEC_KEY, timeout: 1s}
read_timeout: 10s
write_timeout: 1m
idle_timeout: 5s
max_answer_bytes: 16MiB
max_connections: 100
max_mcp_sessions: 50
auth_token_env: AHEAD_TOKEN
traces: {dir: t, max_files: 20, fail_on_loss: true}
`)
	if err != nil {
		t.Fatal(err)
	}
	if want := (&config.LLM{OpenAI: "https://api.openai.com/v1", Anthropic: "https://api.anthropic.com"}); !cmp.Equal(want, c.LLM) {
		t.Errorf("llm = %+v, want %+v", c.LLM, want)
	}
	wantSpec := &config.Speculator{BaseURL: "http://127.0.0.1:11434/v1", Model: "qwen3:0.6b", APIKeyEnv: "SPEC_KEY",
		MaxBreadth: 3, Timeout: time.Second, MaxConcurrency: 4, ContextTokens: 4000}
	if d := cmp.Diff(wantSpec, c.Speculator); d != "" {
		t.Errorf("speculator (-want +got):\n%s", d)
	}
	if c.ReadTimeout != 10*time.Second || c.WriteTimeout != time.Minute || c.MaxConnections != 100 || c.MaxMCPSessions != 50 {
		t.Errorf("timeouts %v %v, connections %d, MCP sessions %d", c.ReadTimeout, c.WriteTimeout, c.MaxConnections, c.MaxMCPSessions)
	}
	if c.IdleTimeout != 5*time.Second || c.MaxAnswerBytes != 16<<20 {
		t.Errorf("idle_timeout %v, max_answer_bytes %d; want 5s and 16 MiB", c.IdleTimeout, c.MaxAnswerBytes)
	}
	if c.AuthToken != "t0k" || c.AuthTokenEnv != "AHEAD_TOKEN" {
		t.Errorf("auth token %q from %q", c.AuthToken, c.AuthTokenEnv)
	}
	if !c.Backends[0].PerSession || c.Traces.MaxFiles != 20 || !c.Traces.FailOnLoss {
		t.Errorf("per session %v, max files %d", c.Backends[0].PerSession, c.Traces.MaxFiles)
	}

	for _, tc := range []struct{ in, want string }{
		{"llm: {}\n", "a.yaml:5:6: llm: want at least one of openai and anthropic"},
		{"llm: {openai: {base_url: ftp://x}}\n", "a.yaml:5:26: llm.openai.base_url: want an http:// or https:// URL with a host"},
		{"llm: {openai: {}}\n", "llm.openai.base_url: missing"},
		{"llm: {gemini: {base_url: 'http://x'}}\n", "llm.gemini: unknown field (want openai, anthropic or max_body)"},
		{"speculator: {model: m}\n", "speculator.base_url: missing"},
		{"speculator: {base_url: 'http://x/v1'}\n", "speculator.model: missing"},
		{"speculator: {base_url: 'http://x/v1', model: m, api_key_env: '$KEY'}\n", "want the name of an environment variable"},
		{"auth_token_env: NOPE\n", "a.yaml:5:17: auth_token_env: environment variable NOPE is not set"},
		{"auth_token_env: EMPTY\n", "environment variable EMPTY is empty"},
		{"read_timeout: 10\n", "read_timeout: want a duration with its unit"},
		{"max_mcp_sessions: 0\n", "a.yaml:5:19: max_mcp_sessions: "},
	} {
		_, err := parse(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.in, err, tc.want)
		}
	}
	if _, err := (&config.Loader{Dir: "/d"}).Parse("a.yaml", []byte("backends:\n  b:\n    http: {url: 'http://h/'}\n    state: global\n")); err == nil || !strings.Contains(err.Error(), "a.yaml:4:12: backends.b.state: want shared") {
		t.Errorf("bad state: %v", err)
	}
}

// TestExecDirChecked: an exec backend's working directory that does not
// exist is found when the file is read, not at the first call.
func TestExecDirChecked(t *testing.T) {
	dir := t.TempDir()
	_, err := (&config.Loader{Dir: dir}).Parse("a.yaml", []byte("backends:\n  b:\n    exec: {command: [echo], dir: ./nope}\n"))
	if err == nil || !strings.Contains(err.Error(), "a.yaml:3:34: backends.b.exec.dir: stat ") {
		t.Errorf("missing dir: %v, want a positioned error", err)
	}
	if _, err := (&config.Loader{Dir: dir}).Parse("a.yaml", []byte("backends:\n  b:\n    exec: {command: [echo], dir: .}\n")); err != nil {
		t.Errorf("existing dir: %v", err)
	}
}

// Issue 23: a backend's path root, and how each kind of backend names
// files.
func TestPathSpace(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	c, err := (&config.Loader{Dir: dir}).Parse("a.yaml", []byte(`
backends:
  web: {http: {url: 'http://h/{tool}'}, tools: [a]}
  rooted: {http: {url: 'http://h/{tool}'}, tools: [b], path_root: /srv/app}
  local: {exec: {command: [./t.sh], dir: sub}}
`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]policy.PathSpace{"web": {}, "rooted": {Root: "/srv/app"}, "local": {Root: filepath.Join(dir, "sub"), Local: true}}
	for _, b := range c.Backends {
		if got := b.PathSpace(); got != want[b.Name] {
			t.Errorf("%s: path space %+v, want %+v", b.Name, got, want[b.Name])
		}
	}
	_, err = (&config.Loader{Dir: "/d"}).Parse("a.yaml", []byte("backends:\n  b: {http: {url: 'http://h/{tool}'}, path_root: rel}\n"))
	if err == nil || !strings.Contains(err.Error(), "a.yaml:2:50: backends.b.path_root: want an absolute directory") {
		t.Errorf("relative path_root: %v", err)
	}
}
