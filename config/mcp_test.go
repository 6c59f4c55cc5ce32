package config_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ahead-dev/ahead/config"
	"github.com/ahead-dev/ahead/mcpproxy"
	"github.com/ahead-dev/ahead/sched"
)

func TestParseMCPServers(t *testing.T) {
	const file = `
mcpServers:
  fs:
    command: npx
    args: [-y, "@modelcontextprotocol/server-filesystem", /srv]
    env: {DEBUG: "1"}
    cwd: /srv
    prefix: fs_
    trust_annotations: true
    slots: 4
  search:
    type: http
    url: https://mcp.example.com/mcp
    headers: {Authorization: Bearer x}
`
	c, err := parse(file)
	if err != nil {
		t.Fatal(err)
	}
	want := []mcpproxy.Upstream{
		{Name: "fs", Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-filesystem", "/srv"},
			Env: map[string]string{"DEBUG": "1"}, Dir: "/srv", Prefix: "fs_", TrustAnnotations: true, Limits: sched.Limits{Slots: 4}},
		{Name: "search", URL: "https://mcp.example.com/mcp", Headers: map[string]string{"Authorization": "Bearer x"}},
	}
	if diff := cmp.Diff(want, c.Upstreams, ignorePos...); diff != "" {
		t.Errorf("upstreams (-want +got):\n%s", diff)
	}
}

// TestParseMCPServersRelativeCwd: a relative cwd starts at the
// configuration file's directory, as backends' exec dir does.
func TestParseMCPServersRelativeCwd(t *testing.T) {
	c, err := (&config.Loader{Dir: "/etc/ahead", LookupEnv: testEnv}).Parse("a.yaml", []byte("mcpServers:\n  fs: {command: npx, cwd: data}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Upstreams) != 1 || c.Upstreams[0].Dir != "/etc/ahead/data" {
		t.Errorf("upstreams = %+v, want fs with cwd /etc/ahead/data", c.Upstreams)
	}
}

func TestParseMCPServersErrors(t *testing.T) {
	const want = "command, args, env, cwd, url, headers, type, prefix, trust_annotations, slots or queue"
	for _, tc := range []struct {
		name, yaml string
		want       []string // each error, in order
	}{
		{"not a mapping", "mcpServers: [a]", []string{"a.yaml:1:13: mcpServers: want a mapping, got a list"}},
		{"no servers", "mcpServers: {}", []string{"a.yaml:1:13: mcpServers: empty: configure at least one MCP server, or remove mcpServers"}},
		{"server not a mapping", "mcpServers:\n  fs: npx", []string{`a.yaml:2:7: mcpServers.fs: want a mapping (command/args/env or url/headers), got "npx"`}},
		{"repeated server", "mcpServers:\n  fs: {command: x}\n  fs: {command: y}", []string{"a.yaml:3:3: mcpServers.fs: duplicate key (first at line 2)"}},
		{"empty server name", "mcpServers:\n  '': {command: x}", []string{`a.yaml:2:3: mcpServers."": empty server name`}},
		{"neither command nor url", "mcpServers:\n  fs: {}", []string{"a.yaml:2:7: mcpServers.fs: needs a command (stdio) or a url (streamable HTTP)"}},
		{"command and url", "mcpServers:\n  fs: {command: x, url: 'http://h/mcp'}", []string{
			"a.yaml:2:20: mcpServers.fs.url: want a command (stdio) or a url (streamable HTTP), got both (command at line 2)"}},
		{"unknown field", "mcpServers:\n  fs:\n    command: x\n    arg: [y]", []string{"a.yaml:4:5: mcpServers.fs.arg: unknown field (want " + want + ")"}},
		{"command not a string", "mcpServers:\n  fs: {command: 7}", []string{"a.yaml:2:17: mcpServers.fs.command: want a string, got a number (7)"}},
		{"empty command", "mcpServers:\n  fs: {command: ''}", []string{"a.yaml:2:17: mcpServers.fs.command: empty program name"}},
		{"args not a list", "mcpServers:\n  fs: {command: x, args: y}", []string{`a.yaml:2:26: mcpServers.fs.args: want a list of strings, got "y"`}},
		{"args not strings", "mcpServers:\n  fs: {command: x, args: [[y], 8080, '8080', null]}", []string{
			"a.yaml:2:27: mcpServers.fs.args[0]: want a string, got a list",
			"a.yaml:2:32: mcpServers.fs.args[1]: want a string, got a number (8080)",
			"a.yaml:2:46: mcpServers.fs.args[3]: want a string, got nothing (null)"}},
		{"env not a mapping", "mcpServers:\n  fs: {command: x, env: [a]}", []string{"a.yaml:2:25: mcpServers.fs.env: want a mapping, got a list"}},
		{"env value not a string", "mcpServers:\n  fs: {command: x, env: {DEBUG: 1, DEBUG: '1'}}", []string{
			"a.yaml:2:33: mcpServers.fs.env.DEBUG: want a string, got a number (1)",
			"a.yaml:2:36: mcpServers.fs.env.DEBUG: duplicate key (first at line 2)"}},
		{"empty cwd", "mcpServers:\n  fs: {command: x, cwd: ''}", []string{"a.yaml:2:25: mcpServers.fs.cwd: empty path"}},
		{"url without scheme", "mcpServers:\n  fs: {url: localhost:8080}", []string{
			`a.yaml:2:13: mcpServers.fs.url: want an http:// or https:// URL, such as https://mcp.example.com/mcp, got "localhost:8080"`}},
		{"headers not strings", "mcpServers:\n  fs: {url: 'http://h/', headers: {X-Retries: 3}}", []string{
			"a.yaml:2:47: mcpServers.fs.headers.X-Retries: want a string, got a number (3)"}},
		{"zero slots", "mcpServers:\n  fs: {command: x, slots: 0}", []string{"a.yaml:2:27: mcpServers.fs.slots: must be at least 1, got 0"}},
		{"slots not a number", "mcpServers:\n  fs: {command: x, slots: '4'}", []string{`a.yaml:2:27: mcpServers.fs.slots: want a whole number, got "4"`}},
		{"unsupported type", "mcpServers:\n  fs: {url: 'http://h/', type: sse}", []string{
			`a.yaml:2:32: mcpServers.fs.type: unsupported transport "sse" (want stdio, http or streamable-http)`}},
		{"http type with a command", "mcpServers:\n  fs: {command: x, type: http}", []string{"a.yaml:2:26: mcpServers.fs.type: type http needs a url, got a command"}},
		{"stdio type with a url", "mcpServers:\n  fs: {url: 'https://h/', type: stdio}", []string{"a.yaml:2:33: mcpServers.fs.type: type stdio needs a command, got a url"}},
		{"trust_annotations not a boolean", "mcpServers:\n  fs: {command: x, trust_annotations: 'true'}", []string{
			`a.yaml:2:39: mcpServers.fs.trust_annotations: want true or false, got "true"`}},
		{"prefix not a string", "mcpServers:\n  fs: {command: x, prefix: 1}", []string{"a.yaml:2:28: mcpServers.fs.prefix: want a string, got a number (1)"}},
		{"stdio fields on an HTTP server", "mcpServers:\n  fs: {url: 'http://h/', args: [a], env: {A: b}, cwd: x}", []string{
			"a.yaml:2:26: mcpServers.fs.args: only for a server started by a command (stdio), and this one has a url",
			"a.yaml:2:37: mcpServers.fs.env: only for a server started by a command (stdio), and this one has a url",
			"a.yaml:2:50: mcpServers.fs.cwd: only for a server started by a command (stdio), and this one has a url"}},
		{"headers on a stdio server", "mcpServers:\n  fs: {command: x, headers: {A: b}}", []string{
			"a.yaml:2:20: mcpServers.fs.headers: only for a server reached by a url (HTTP), and this one has a command"}},
		{"merge key", "mcpServers:\n  fs:\n    <<: {command: x}", []string{
			"a.yaml:3:5: mcpServers.fs: merge keys (<<) are not supported; write the fields out",
			"a.yaml:3:5: mcpServers.fs: needs a command (stdio) or a url (streamable HTTP)"}},
		{"several servers, every error", "mcpServers:\n  a: {command: x, slots: -1}\n  b: {url: ftp://h}\n", []string{
			"a.yaml:2:26: mcpServers.a.slots: must be at least 1, got -1",
			`a.yaml:3:12: mcpServers.b.url: want an http:// or https:// URL, such as https://mcp.example.com/mcp, got "ftp://h"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parse(tc.yaml)
			if err == nil {
				t.Fatalf("Parse accepted it: %+v", c.Upstreams)
			}
			if diff := cmp.Diff(tc.want, strings.Split(err.Error(), "\n")); diff != "" {
				t.Errorf("errors differ (-want +got):\n%s", diff)
			}
		})
	}
}
