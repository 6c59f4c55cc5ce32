package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.yaml.in/yaml/v3"

	"github.com/ahead-dev/ahead/mcpproxy"
	"github.com/ahead-dev/ahead/sched"
	"github.com/ahead-dev/ahead/yamlnode"
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
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(file), &doc); err != nil {
		t.Fatal(err)
	}
	got, err := parseMCPServers(doc.Content[0].Content[1], "ahead.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := []mcpproxy.Upstream{
		{Name: "fs", Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-filesystem", "/srv"},
			Env: map[string]string{"DEBUG": "1"}, Dir: "/srv", Prefix: "fs_", TrustAnnotations: true, Limits: sched.Limits{Slots: 4}},
		{Name: "search", URL: "https://mcp.example.com/mcp", Headers: map[string]string{"Authorization": "Bearer x"}},
	}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b func() (mcp.Transport, error)) bool { return a == nil && b == nil })); diff != "" {
		t.Errorf("parseMCPServers (-want +got):\n%s", diff)
	}
}

func TestParseMCPServersErrors(t *testing.T) {
	const want = "command, args, env, cwd, url, headers, type, prefix, trust_annotations or slots"
	for _, tc := range []struct {
		name, yaml string
		want       []string // each error, in order
	}{
		{"not a mapping", "mcpServers: [a]", []string{"ahead.yaml:1:13: mcpServers: want a mapping, got a list"}},
		{"no servers", "mcpServers: {}", []string{"ahead.yaml:1:13: mcpServers: empty: configure at least one MCP server, or remove mcpServers"}},
		{"server not a mapping", "mcpServers:\n  fs: npx", []string{`ahead.yaml:2:7: mcpServers.fs: want a mapping (command/args/env or url/headers), got "npx"`}},
		{"repeated server", "mcpServers:\n  fs: {command: x}\n  fs: {command: y}", []string{"ahead.yaml:3:3: mcpServers.fs: duplicate key (first at line 2)"}},
		{"empty server name", "mcpServers:\n  '': {command: x}", []string{`ahead.yaml:2:3: mcpServers."": empty server name`}},
		{"neither command nor url", "mcpServers:\n  fs: {}", []string{"ahead.yaml:2:7: mcpServers.fs: needs a command (stdio) or a url (streamable HTTP)"}},
		{"command and url", "mcpServers:\n  fs: {command: x, url: 'http://h/mcp'}", []string{
			"ahead.yaml:2:20: mcpServers.fs.url: want a command (stdio) or a url (streamable HTTP), got both (command at line 2)"}},
		{"unknown field", "mcpServers:\n  fs:\n    command: x\n    arg: [y]", []string{"ahead.yaml:4:5: mcpServers.fs.arg: unknown field (want " + want + ")"}},
		{"command not a string", "mcpServers:\n  fs: {command: 7}", []string{"ahead.yaml:2:17: mcpServers.fs.command: want a string, got a number (7)"}},
		{"empty command", "mcpServers:\n  fs: {command: ''}", []string{"ahead.yaml:2:17: mcpServers.fs.command: empty program name"}},
		{"args not a list", "mcpServers:\n  fs: {command: x, args: y}", []string{`ahead.yaml:2:26: mcpServers.fs.args: want a list of strings, got "y"`}},
		{"args not strings", "mcpServers:\n  fs: {command: x, args: [[y], 8080, '8080', null]}", []string{
			"ahead.yaml:2:27: mcpServers.fs.args[0]: want a string, got a list",
			"ahead.yaml:2:32: mcpServers.fs.args[1]: want a string, got a number (8080)",
			"ahead.yaml:2:46: mcpServers.fs.args[3]: want a string, got nothing (null)"}},
		{"env not a mapping", "mcpServers:\n  fs: {command: x, env: [a]}", []string{"ahead.yaml:2:25: mcpServers.fs.env: want a mapping, got a list"}},
		{"env value not a string", "mcpServers:\n  fs: {command: x, env: {DEBUG: 1, DEBUG: '1'}}", []string{
			"ahead.yaml:2:33: mcpServers.fs.env.DEBUG: want a string, got a number (1)",
			"ahead.yaml:2:36: mcpServers.fs.env.DEBUG: duplicate key (first at line 2)"}},
		{"empty cwd", "mcpServers:\n  fs: {command: x, cwd: ''}", []string{"ahead.yaml:2:25: mcpServers.fs.cwd: empty path"}},
		{"url without scheme", "mcpServers:\n  fs: {url: localhost:8080}", []string{
			`ahead.yaml:2:13: mcpServers.fs.url: want an http:// or https:// URL, such as https://mcp.example.com/mcp, got "localhost:8080"`}},
		{"headers not strings", "mcpServers:\n  fs: {url: 'http://h/', headers: {X-Retries: 3}}", []string{
			"ahead.yaml:2:47: mcpServers.fs.headers.X-Retries: want a string, got a number (3)"}},
		{"zero slots", "mcpServers:\n  fs: {command: x, slots: 0}", []string{"ahead.yaml:2:27: mcpServers.fs.slots: must be at least 1, got 0"}},
		{"slots not a number", "mcpServers:\n  fs: {command: x, slots: '4'}", []string{`ahead.yaml:2:27: mcpServers.fs.slots: want a whole number, got "4"`}},
		{"unsupported type", "mcpServers:\n  fs: {url: 'http://h/', type: sse}", []string{
			`ahead.yaml:2:32: mcpServers.fs.type: unsupported transport "sse" (want stdio, http or streamable-http)`}},
		{"http type with a command", "mcpServers:\n  fs: {command: x, type: http}", []string{"ahead.yaml:2:26: mcpServers.fs.type: type http needs a url, got a command"}},
		{"stdio type with a url", "mcpServers:\n  fs: {url: 'https://h/', type: stdio}", []string{"ahead.yaml:2:33: mcpServers.fs.type: type stdio needs a command, got a url"}},
		{"trust_annotations not a boolean", "mcpServers:\n  fs: {command: x, trust_annotations: 'true'}", []string{
			`ahead.yaml:2:39: mcpServers.fs.trust_annotations: want true or false, got "true"`}},
		{"prefix not a string", "mcpServers:\n  fs: {command: x, prefix: 1}", []string{"ahead.yaml:2:28: mcpServers.fs.prefix: want a string, got a number (1)"}},
		{"stdio fields on an HTTP server", "mcpServers:\n  fs: {url: 'http://h/', args: [a], env: {A: b}, cwd: x}", []string{
			"ahead.yaml:2:26: mcpServers.fs.args: only for a server started by a command (stdio), and this one has a url",
			"ahead.yaml:2:37: mcpServers.fs.env: only for a server started by a command (stdio), and this one has a url",
			"ahead.yaml:2:50: mcpServers.fs.cwd: only for a server started by a command (stdio), and this one has a url"}},
		{"headers on a stdio server", "mcpServers:\n  fs: {command: x, headers: {A: b}}", []string{
			"ahead.yaml:2:20: mcpServers.fs.headers: only for a server reached by a url (HTTP), and this one has a command"}},
		{"merge key", "mcpServers:\n  fs:\n    <<: {command: x}", []string{
			"ahead.yaml:3:5: mcpServers.fs: merge keys (<<) are not supported; write the fields out",
			"ahead.yaml:3:5: mcpServers.fs: needs a command (stdio) or a url (streamable HTTP)"}},
		{"several servers, every error", "mcpServers:\n  a: {command: x, slots: -1}\n  b: {url: ftp://h}\n", []string{
			"ahead.yaml:2:26: mcpServers.a.slots: must be at least 1, got -1",
			`ahead.yaml:3:12: mcpServers.b.url: want an http:// or https:// URL, such as https://mcp.example.com/mcp, got "ftp://h"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var doc yaml.Node
			if err := yaml.Unmarshal([]byte(tc.yaml), &doc); err != nil {
				t.Fatal(err)
			}
			ups, err := parseMCPServers(doc.Content[0].Content[1], "ahead.yaml")
			if err == nil {
				t.Fatalf("parseMCPServers accepted it: %+v", ups)
			}
			if diff := cmp.Diff(tc.want, strings.Split(err.Error(), "\n")); diff != "" {
				t.Errorf("errors differ (-want +got):\n%s", diff)
			}
		})
	}
}

// TestParseMCPServersRelativeCwd: a relative cwd starts at the
// configuration file's directory, as backends' exec dir does.
func TestParseMCPServersRelativeCwd(t *testing.T) {
	c, err := parseConfig([]byte("mcpServers:\n  fs: {command: npx, cwd: data}\n"), "a.yaml", "/etc/ahead", testEnv)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Upstreams) != 1 || c.Upstreams[0].Dir != "/etc/ahead/data" {
		t.Errorf("upstreams = %+v, want fs with cwd /etc/ahead/data", c.Upstreams)
	}
}

func FuzzParseMCPServers(f *testing.F) {
	f.Add("mcpServers:\n  fs: {command: npx, args: [a, b], env: {A: b}}\n")
	f.Add("mcpServers:\n  s: {url: http://x/mcp, headers: {A: b}, type: http, slots: 2}\n")
	f.Add("mcpServers: {a: {command: x, prefix: p_, trust_annotations: true}, b: &x {url: 'https://y/'}, c: *x}\n")
	f.Add("mcpServers: {a: {command: x}, a: {url: y}, '': {command: z, cwd: ''}}\n")
	f.Fuzz(func(t *testing.T, s string) {
		var doc yaml.Node
		if yaml.Unmarshal([]byte(s), &doc) != nil || len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode || len(doc.Content[0].Content) < 2 {
			return
		}
		ups, err := parseMCPServers(doc.Content[0].Content[1], "f.yaml")
		if err != nil {
			for _, line := range strings.Split(err.Error(), "\n") {
				if !strings.HasPrefix(line, "f.yaml:") {
					t.Errorf("error without position: %q", line)
				}
			}
			return
		}
		// Whatever parses is a usable proxy configuration: at least one
		// upstream, with unique names.
		if _, err := mcpproxy.New(mcpproxy.Options{Upstreams: ups}); err != nil {
			t.Errorf("parsed upstreams rejected by the proxy: %v", err)
		}
	})
}

// TestMCPConfigErrors: ahead mcp --config reads the file as ahead serve
// does, with the same positioned errors, all at once.
func TestMCPConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		args       []string // after --config FILE
		code       int
		want       string // stderr, with FILE for the file's path
	}{
		{"typo and repeated server", "mcpServers:\n  fs: {command: x, arg: [z]}\n  fs: {command: y}\n", nil, 1,
			"ahead mcp: FILE:2:20: mcpServers.fs.arg: unknown field (want command, args, env, cwd, url, headers, type, prefix, trust_annotations or slots)\n" +
				"FILE:3:3: mcpServers.fs: duplicate key (first at line 2)\n"},
		{"non-string values", "mcpServers:\n  fs: {command: x, env: {PORT: 8080}}\ntrust_annotations: yes\n", nil, 1,
			"ahead mcp: FILE:2:32: mcpServers.fs.env.PORT: want a string, got a number (8080)\n" +
				`FILE:3:20: trust_annotations: want true or false, got "yes"` + "\n"},
		{"serve's fields are checked too", "listen: 7777\nmcpServers: {fs: {command: x}}\nengine: {ttl: 5}\n", nil, 1,
			"ahead mcp: FILE:1:9: listen: want a string, got a number (7777)\n" +
				"FILE:3:15: engine.ttl: want a duration with its unit, such as 5s, got 5\n"},
		{"unknown top-level field", "mcpServers: {fs: {command: x}}\ntrust: true\n", nil, 1,
			"ahead mcp: FILE:2:1: trust: unknown field (want listen, max_body, shutdown_grace, patterns, traces, backends, speculation_policy, engine, mcpServers or trust_annotations)\n"},
		{"policy only, no upstream", "speculation_policy: {default: {allow: false}}\n", nil, 2,
			"ahead mcp: usage error: no MCP server: give one after -- (ahead mcp -- npx -y SERVER ...) or in --config\n" +
				"usage: ahead mcp [flags] [-- COMMAND ARGS...] (see ahead mcp --help)\n"},
		{"name taken by the command's upstream", "mcpServers: {npx: {command: x}}\n", []string{"--", "npx", "server"}, 2,
			`ahead mcp: usage error: the command's upstream is named "npx", like one in FILE: rename that one` + "\n" +
				"usage: ahead mcp [flags] [-- COMMAND ARGS...] (see ahead mcp --help)\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "ahead.yaml")
			if err := os.WriteFile(file, []byte(tc.file), 0o644); err != nil {
				t.Fatal(err)
			}
			var stdout, stderr bytes.Buffer
			e := &env{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr}
			code := run(t.Context(), e, append([]string{"mcp", "--config", file}, tc.args...))
			if code != tc.code {
				t.Errorf("exit code %d, want %d", code, tc.code)
			}
			if diff := cmp.Diff(strings.ReplaceAll(tc.want, "FILE", file), stderr.String()); diff != "" {
				t.Errorf("stderr (-want +got):\n%s", diff)
			}
		})
	}
}

// TestMCPConfig: ahead mcp serves the mcpServers of its --config file
// with the file's prefix, traces and trust_annotations.
func TestMCPConfig(t *testing.T) {
	node, bin := testdeps(t)
	dir, traces := t.TempDir(), t.TempDir()
	writeFiles(t, dir, map[string]string{"note.txt": "from the config\n"})
	file := filepath.Join(t.TempDir(), "ahead.yaml")
	config := fmt.Sprintf(`mcpServers:
  fs:
    command: %q
    args: [%q, %q]
    prefix: fs_
traces: {dir: %q, prefix: agent}
trust_annotations: true
`, node, filepath.Join(bin, "mcp-server-filesystem"), dir, traces)
	if err := os.WriteFile(file, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	// Registered before mcpSession's cleanup, so it runs after ahead mcp
	// has exited and closed its traces.
	t.Cleanup(func() {
		files, err := filepath.Glob(filepath.Join(traces, "agent*"))
		if err != nil || len(files) == 0 {
			t.Errorf("no traces named agent* in the config's traces dir: %v", err)
		}
	})
	cs := mcpSession(t, "--config", file)
	text, src := callSource(t, cs, "fs_read_text_file", map[string]any{"path": filepath.Join(dir, "note.txt")})
	if text != "from the config\n" || src != "executed" {
		t.Errorf("fs_read_text_file = %q (%s), want the note, executed", text, src)
	}
}

// testdeps returns Node 22 and the npm executables of ../../testdeps;
// without them the test skips locally and fails in CI.
func testdeps(t *testing.T) (node, bin string) {
	t.Helper()
	bin, err := filepath.Abs(filepath.Join("..", "..", "testdeps", "node_modules", ".bin"))
	if err != nil {
		t.Fatal(err)
	}
	node = filepath.Join(bin, "node")
	if _, err := os.Stat(node); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("missing the npm test packages (npm ci --prefix testdeps): required in CI")
		}
		t.Skip("missing the npm test packages (run: npm ci --prefix testdeps)")
	}
	return node, bin
}

// aheadBinary builds ahead once for tests that need it as a process.
var aheadBinary = sync.OnceValues(func() (string, error) {
	dir, err := buildDir("ahead-bin")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "ahead")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		return "", fmt.Errorf("building ahead: %v\n%s", err, out)
	}
	return bin, nil
})

func ahead(t *testing.T) string {
	t.Helper()
	bin, err := aheadBinary()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestMCPInspectorCLI: the MCP inspector's CLI lists and calls tools
// through ahead mcp.
func TestMCPInspectorCLI(t *testing.T) {
	node, bin := testdeps(t)
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"note.txt": "through ahead\n"})
	upstream := []string{"mcp", "--trust-annotations", "--", node, filepath.Join(bin, "mcp-server-filesystem"), dir}
	inspect := func(args ...string) []byte {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		cmdArgs := append([]string{filepath.Join(bin, "inspector"), "--cli", ahead(t)}, upstream...)
		cmd := exec.CommandContext(ctx, node, append(cmdArgs, args...)...)
		tmp := t.TempDir()
		cmd.Dir = tmp
		cmd.Env = append(os.Environ(), "HOME="+tmp)
		out, err := runGroup(cmd, tmp)
		if err != nil {
			t.Fatalf("inspector %v: %v\n%s", args, err, out)
		}
		return out
	}

	var list struct {
		Tools []struct{ Name string } `json:"tools"`
	}
	if out := inspect("--method", "tools/list"); json.Unmarshal(out, &list) != nil {
		t.Fatalf("tools/list output is not JSON: %s", out)
	}
	var names []string
	for _, tl := range list.Tools {
		names = append(names, tl.Name)
	}
	if !slices.Contains(names, "read_text_file") || !slices.Contains(names, "write_file") {
		t.Errorf("tools through ahead = %v, want the filesystem server's", names)
	}

	out := inspect("--method", "tools/call", "--tool-name", "read_text_file", "--tool-arg", "path="+filepath.Join(dir, "note.txt"))
	var res struct {
		Meta struct {
			Ahead struct{ Source string } `json:"ahead"`
		} `json:"_meta"`
		Content []struct{ Text string } `json:"content"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("tools/call output is not JSON: %s", out)
	}
	if len(res.Content) != 1 || res.Content[0].Text != "through ahead\n" || res.Meta.Ahead.Source != "executed" {
		t.Errorf("tools/call through ahead = %s", out)
	}
}

// runGroup runs cmd in its own process group with its output in files
// (not pipes: a helper process the inspector leaves behind must not hold
// the test up), then ends whatever of the group is left. It returns stdout,
// or stdout and stderr on failure.
func runGroup(cmd *exec.Cmd, dir string) ([]byte, error) {
	stdout, err := os.Create(filepath.Join(dir, "stdout"))
	if err != nil {
		return nil, err
	}
	defer stdout.Close()
	stderr, err := os.Create(filepath.Join(dir, "stderr"))
	if err != nil {
		return nil, err
	}
	defer stderr.Close()
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Run()
	if cmd.Process != nil {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	out, _ := os.ReadFile(stdout.Name())
	if err != nil {
		e, _ := os.ReadFile(stderr.Name())
		return append(out, e...), err
	}
	return out, nil
}

// freeAddr returns a loopback address nobody listens on (for a config file).
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// startServe runs ahead serve with the config in-process until the test
// ends, and waits until it answers.
func startServe(t *testing.T, config string) string {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "ahead.yaml")
	if err := os.WriteFile(file, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	var cfg struct{ Listen string }
	if err := yaml.Unmarshal([]byte(config), &cfg); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var stderr syncBuffer
	e := &env{stdin: strings.NewReader(""), stdout: &stderr, stderr: &stderr}
	done := make(chan int, 1)
	go func() { done <- run(ctx, e, []string{"serve", "--config", file}) }()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("ahead serve exited %d:\n%s", code, stderr.String())
		}
	})
	url := "http://" + cfg.Listen
	for start := time.Now(); ; {
		if resp, err := http.Get(url + "/healthz"); err == nil {
			resp.Body.Close()
			break
		}
		select {
		case code := <-done:
			done <- code
			t.Fatalf("ahead serve exited %d:\n%s", code, stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Since(start) > 30*time.Second {
			t.Fatalf("ahead serve did not answer:\n%s", stderr.String())
		}
	}
	return url
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// conformanceServer builds the Go SDK's conformance everything-server.
var conformanceServer = sync.OnceValues(func() (string, error) {
	dir, err := buildDir("ahead-conformance")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "everything-server")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/modelcontextprotocol/go-sdk/conformance/everything-server")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the SDK's everything-server: %v\n%s", err, out)
	}
	return bin, nil
})

var conformanceTotal = regexp.MustCompile(`(?m)^Total: (\d+) passed, (\d+) failed`)

// TestServeMCPConformance: the official MCP conformance suite passes
// against ahead serve fronting the Go SDK's everything-server.
func TestServeMCPConformance(t *testing.T) {
	node, bin := testdeps(t)
	server, err := conformanceServer()
	if err != nil {
		t.Fatal(err)
	}
	url := startServe(t, fmt.Sprintf("listen: %s\nmcpServers:\n  everything:\n    command: %s\n", freeAddr(t), server))

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join(bin, "conformance"), "server",
		"--url", url+"/mcp", "--spec-version", "2025-11-25", "-o", t.TempDir())
	cmd.Dir = t.TempDir()
	out, err := cmd.CombinedOutput()
	m := conformanceTotal.FindSubmatch(out)
	if err != nil || m == nil || string(m[2]) != "0" || string(m[1]) == "0" {
		t.Fatalf("conformance against ahead serve: %v\n%s", err, out)
	}
	t.Logf("conformance against ahead serve: %s passed, 0 failed", m[1])
}

// mcpSession runs ahead mcp in-process with args and connects an agent to
// it over its stdin and stdout; closing the session ends the command.
func mcpSession(t *testing.T, args ...string) *mcp.ClientSession {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	var stderr syncBuffer
	e := &env{stdin: inR, stdout: outW, stderr: &stderr}
	done := make(chan int, 1)
	go func() {
		code := run(context.Background(), e, append([]string{"mcp"}, args...))
		outW.Close()
		done <- code
	}()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil).
		Connect(t.Context(), &mcp.IOTransport{Reader: outR, Writer: inW}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		inW.Close()
		t.Fatalf("connecting to ahead mcp: %v\n%s", err, stderr.String())
	}
	t.Cleanup(func() {
		cs.Close()
		if code := <-done; code != 0 {
			t.Errorf("ahead mcp exited %d:\n%s", code, stderr.String())
		}
	})
	return cs
}

func callSource(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) (string, string) {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	if res.IsError {
		t.Fatalf("%s failed: %v", tool, res.Content)
	}
	a, _ := res.Meta["ahead"].(map[string]any)
	src, _ := a["source"].(string)
	var text []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text = append(text, tc.Text)
		}
	}
	return strings.Join(text, "\n"), src
}

// TestMCPRecordMineServe is the README's workflow: sessions recorded by
// ahead mcp --traces, mined by ahead mine, served with --patterns, where
// the read that follows a search is now speculated and reused.
func TestMCPRecordMineServe(t *testing.T) {
	node, bin := testdeps(t)
	server := filepath.Join(bin, "mcp-server-filesystem")
	root, traces := t.TempDir(), t.TempDir()
	// Each session works in its own project, with its own file names, so
	// what links the read to the search is the data, not a constant.
	session := func(i int, args ...string) (*mcp.ClientSession, string, string) {
		dir := filepath.Join(root, fmt.Sprintf("project%d", i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		first := filepath.Join(dir, fmt.Sprintf("notes-%d.md", i))
		writeFiles(t, dir, map[string]string{filepath.Base(first): fmt.Sprintf("notes of project %d\n", i)})
		args = append(args, "--", node, server, dir)
		return mcpSession(t, args...), dir, first
	}
	for i := range 8 {
		cs, dir, first := session(i, "--traces", traces)
		found, src := callSource(t, cs, "search_files", map[string]any{"path": dir, "pattern": "*.md"})
		if found != first || src != "executed" {
			t.Fatalf("search_files = %q (%s), want %q", found, src, first)
		}
		callSource(t, cs, "read_text_file", map[string]any{"path": found})
		cs.Close()
	}

	pool := filepath.Join(t.TempDir(), "pool.json")
	var out syncBuffer
	if code := run(t.Context(), &env{stdin: strings.NewReader(""), stdout: &out, stderr: &out}, []string{"mine", "-o", pool, traces}); code != 0 {
		t.Fatalf("ahead mine exited %d:\n%s", code, out.String())
	}

	cs, dir, first := session(100, "--patterns", pool, "--trust-annotations")
	found, _ := callSource(t, cs, "search_files", map[string]any{"path": dir, "pattern": "*.md"})
	text, src := callSource(t, cs, "read_text_file", map[string]any{"path": found})
	if src != "reused" && src != "promoted" {
		t.Errorf("read after search with the mined patterns: _meta.ahead.source = %q, want reused or promoted\nmine said:\n%s", src, out.String())
	}
	if want, _ := os.ReadFile(first); text != string(want) {
		t.Errorf("read = %q, want %q", text, want)
	}
}

// parseMCPServers reads an mcpServers block on its own, as parseConfig
// does inside a whole file; relative cwd paths start at the file's
// directory.
func parseMCPServers(n *yaml.Node, file string) ([]mcpproxy.Upstream, error) {
	dir, err := filepath.Abs(filepath.Dir(file))
	if err != nil {
		return nil, err
	}
	p := &cfgParser{Decoder: yamlnode.Decoder{File: file}, dir: dir, env: os.LookupEnv}
	ups := p.mcpServers(n, mcpServersKey)
	if err := p.Err(); err != nil {
		return nil, err
	}
	return ups, nil
}

// builds are the directories tests compiled binaries into, removed by
// TestMain once every test has run (they are shared across tests).
var builds struct {
	sync.Mutex
	dirs []string
}

// buildDir returns a new directory for a binary built for the tests.
func buildDir(prefix string) (string, error) {
	dir, err := os.MkdirTemp("", prefix)
	if err == nil {
		builds.Lock()
		builds.dirs = append(builds.dirs, dir)
		builds.Unlock()
	}
	return dir, err
}

func TestMain(m *testing.M) {
	code := m.Run()
	builds.Lock()
	for _, dir := range builds.dirs {
		os.RemoveAll(dir)
	}
	builds.Unlock()
	os.Exit(code)
}
