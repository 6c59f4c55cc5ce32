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
)

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
			"ahead mcp: FILE:2:20: mcpServers.fs.arg: unknown field (want command, args, env, cwd, url, headers, type, prefix, trust_annotations, slots or queue)\n" +
				"FILE:3:3: mcpServers.fs: duplicate key (first at line 2)\n"},
		{"non-string values", "mcpServers:\n  fs: {command: x, env: {PORT: 8080}}\ntrust_annotations: yes\n", nil, 1,
			"ahead mcp: FILE:2:32: mcpServers.fs.env.PORT: want a string, got a number (8080)\n" +
				`FILE:3:20: trust_annotations: want true or false, got "yes"` + "\n"},
		{"serve's fields are checked too", "listen: 7777\nmcpServers: {fs: {command: x}}\nengine: {ttl: 5}\n", nil, 1,
			"ahead mcp: FILE:1:9: listen: want a string, got a number (7777)\n" +
				"FILE:3:15: engine.ttl: want a duration with its unit, such as 5s, got 5\n"},
		{"unknown top-level field", "mcpServers: {fs: {command: x}}\ntrust: true\n", nil, 1,
			"ahead mcp: FILE:2:1: trust: unknown field (want listen, max_body, shutdown_grace, read_timeout, write_timeout, idle_timeout, max_answer_bytes, max_connections, max_mcp_sessions, auth_token_env, llm, speculator, patterns, traces, backends, speculation_policy, engine, mcpServers, trust_annotations or fleet)\n"},
		{"policy only, no upstream", "speculation_policy: {default: {allow: false}}\n", nil, 2,
			"ahead mcp: usage error: no MCP server: give one after -- (ahead mcp -- npx -y SERVER ...) or in --config\n" +
				"usage: ahead mcp [flags] [-- COMMAND ARGS...] (see ahead mcp --help)\n"},
		{"name taken by the command's upstream", "mcpServers: {server: {command: x}}\n", []string{"--", "npx", "server"}, 2,
			`ahead mcp: usage error: the command's upstream is named "server", like one in FILE: rename that one` + "\n" +
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
	aheadBin := ahead(t) // built before the inspector's deadline starts: a build is not what that deadline bounds
	inspect := func(args ...string) []byte {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		cmdArgs := append([]string{filepath.Join(bin, "inspector"), "--cli", aheadBin}, upstream...)
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
	// Each revision with the suite that has its scenarios: the stable
	// one (2025-11-25), and the one pinned as conformance-2026 (an alpha:
	// the stable suite has no 2026-07-28 scenarios), on one endpoint.
	for _, run := range []struct{ suite, version string }{
		{filepath.Join("@modelcontextprotocol", "conformance"), "2025-11-25"},
		{"conformance-2026", "2026-07-28"},
	} {
		cmd := exec.CommandContext(ctx, node, filepath.Join(bin, "..", run.suite, "dist", "index.js"), "server",
			"--url", url+"/mcp", "--spec-version", run.version, "-o", t.TempDir())
		cmd.Dir = t.TempDir()
		out, err := cmd.CombinedOutput()
		m := conformanceTotal.FindSubmatch(out)
		if err != nil || m == nil || string(m[2]) != "0" || string(m[1]) == "0" {
			t.Fatalf("conformance %s against ahead serve: %v\n%s", run.version, err, out)
		}
		t.Logf("conformance %s against ahead serve: %s passed, 0 failed", run.version, m[1])
	}
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
	if os.Getenv(fakeMCPEnv) != "" {
		os.Exit(runFakeMCP())
	}
	code := m.Run()
	builds.Lock()
	for _, dir := range builds.dirs {
		os.RemoveAll(dir)
	}
	builds.Unlock()
	os.Exit(code)
}
