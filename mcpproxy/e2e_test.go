package mcpproxy

// End-to-end tests against real MCP servers: the npm packages pinned in
// ../testdeps (installed by ./test.sh with npm ci) and the Go SDK's
// conformance everything-server. Without them the tests skip locally and
// fail in CI (CI=true).

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ahead-dev/ahead/engine"
	"github.com/ahead-dev/ahead/predict"
	"github.com/ahead-dev/ahead/trace"
)

// testdeps returns the node binary (Node 22, from npm) and the directory of
// the npm packages' executables.
func testdeps(t *testing.T) (node, bin string) {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "testdeps", "node_modules", ".bin"))
	if err != nil {
		t.Fatal(err)
	}
	node = filepath.Join(dir, "node")
	if _, err := os.Stat(node); err != nil {
		missing(t, "the npm test packages (run: npm ci --prefix testdeps)")
	}
	return node, dir
}

// missing fails in CI and skips elsewhere: a test that cannot run where it
// must is a failure, never a silent pass.
func missing(t *testing.T, what string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("missing %s: required in CI", what)
	}
	t.Skipf("missing %s", what)
}

// npmServer is the upstream running an npm package's MCP server with
// Node 22.
func npmServer(t *testing.T, name, pkgBin string, env map[string]string, args ...string) Upstream {
	node, bin := testdeps(t)
	script := filepath.Join(bin, pkgBin)
	if _, err := os.Stat(script); err != nil {
		missing(t, pkgBin)
	}
	return Upstream{Name: name, Command: node, Args: append([]string{script}, args...), Env: env}
}

// e2e is a proxy with an engine in front of real upstreams, served to an
// in-memory agent.
type e2e struct {
	proxy *Proxy
	eng   *engine.Engine
}

func newE2E(t *testing.T, ups []Upstream, pred predict.Predictor) *e2e {
	t.Helper()
	for i := range ups {
		ups[i].TrustAnnotations = true
	}
	p, err := New(&Options{Upstreams: ups, Logger: slog.New(slog.DiscardHandler), Stderr: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	tools, err := p.TrustedTools(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	eng := engine.New(&engine.Options{
		Backends:  p.Backends(),
		Route:     p.Route,
		Policy:    AnnotationPolicy(nil, tools),
		Predictor: pred,
		Logger:    slog.New(slog.DiscardHandler),
	})
	p.Attach(eng)
	t.Cleanup(func() {
		p.Close()
		eng.Close()
	})
	return &e2e{proxy: p, eng: eng}
}

// connect serves one agent session in memory.
func (x *e2e) connect(t *testing.T) *mcp.ClientSession {
	t.Helper()
	ct, st := mcp.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- x.proxy.Serve(ctx, st) }()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, &mcp.ClientOptions{Logger: slog.New(slog.DiscardHandler)}).
		Connect(t.Context(), ct, &mcp.ClientSessionOptions{ProtocolVersion: agentProtocol})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.Close()
		cancel()
		<-done
	})
	return cs
}

// directTo connects an agent straight to an upstream.
func directTo(t *testing.T, u Upstream) *mcp.ClientSession {
	t.Helper()
	tr, err := u.transport(io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, &mcp.ClientOptions{Logger: slog.New(slog.DiscardHandler)}).
		Connect(t.Context(), tr, &mcp.ClientSessionOptions{ProtocolVersion: agentProtocol})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

type toolCall struct {
	tool string
	args map[string]any
}

// sameResults makes the same calls direct and through ahead and compares
// the results on the wire (ahead's _meta aside).
func sameResults(t *testing.T, direct, via *mcp.ClientSession, calls []toolCall) {
	t.Helper()
	for _, c := range calls {
		rd, errd := direct.CallTool(t.Context(), &mcp.CallToolParams{Name: c.tool, Arguments: c.args})
		rv, errv := via.CallTool(t.Context(), &mcp.CallToolParams{Name: c.tool, Arguments: c.args})
		if (errd == nil) != (errv == nil) {
			t.Errorf("%s %v: error direct %v, through ahead %v", c.tool, c.args, errd, errv)
			continue
		}
		if errd != nil {
			if errd.Error() != errv.Error() {
				t.Errorf("%s %v: error direct %q, through ahead %q", c.tool, c.args, errd, errv)
			}
			continue
		}
		if src := sourceOf(rv); src == "" {
			t.Errorf("%s: no _meta.ahead.source", c.tool)
		}
		if diff := cmp.Diff(wire(t, rd), wire(t, withoutAhead(rv)), clockless); diff != "" {
			t.Errorf("%s %v through ahead differs from direct (-direct +ahead):\n%s", c.tool, c.args, diff)
		}
	}
}

// createdAt is the time of day the everything server writes into a
// resource it makes on each request ("… created at 11:36:30 AM",
// toLocaleTimeString): the direct call and the one through ahead, made one
// after the other, straddle a second now and then (1 run in ~20 under
// load failed so), which no proxy could make equal.
var createdAt = regexp.MustCompile(`created at [0-9:.]+(\s?[AaPp]\.?[Mm]\.?)?`)

// clockless compares strings with the time of createdAt left out.
var clockless = cmp.Transformer("clockless", func(s string) string {
	return createdAt.ReplaceAllString(s, "created at (time)")
})

func sameLists(t *testing.T, direct, via *mcp.ClientSession) {
	t.Helper()
	ld, err := direct.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	lv, err := via.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wire(t, ld.Tools), wire(t, lv.Tools)); diff != "" {
		t.Errorf("tools/list through ahead differs from direct (-direct +ahead):\n%s", diff)
	}
}

// firstFile predicts, after list_directory, a read of its first file:
// what a pattern mined from agents' traces predicts, written by hand. After
// a read it predicts a write (which must never run speculatively).
func firstFile(dir string) predict.Func {
	return func(ev trace.Event) []predict.Prediction {
		switch ev.Tool {
		case "list_directory":
			// The output is the structured content, {"content": text}.
			var out struct {
				Content string `json:"content"`
			}
			if json.Unmarshal([]byte(ev.Output), &out) != nil {
				return nil
			}
			for line := range strings.SplitSeq(out.Content, "\n") {
				if name, ok := strings.CutPrefix(line, "[FILE] "); ok {
					args, _ := json.Marshal(map[string]string{"path": filepath.Join(dir, name)})
					return []predict.Prediction{{Tool: "read_text_file", Args: args, P: 0.9}}
				}
			}
		case "read_text_file":
			args, _ := json.Marshal(map[string]string{"path": filepath.Join(dir, "a.txt"), "content": "speculated!"})
			return []predict.Prediction{{Tool: "write_file", Args: args, P: 0.9}}
		}
		return nil
	}
}

func TestE2EFilesystem(t *testing.T) {
	dir := t.TempDir()
	for name, text := range map[string]string{"a.txt": "alpha\n", "b.txt": "beta\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	up := npmServer(t, "fs", "mcp-server-filesystem", nil, dir)
	x := newE2E(t, []Upstream{up}, firstFile(dir))
	via, direct := x.connect(t), directTo(t, up)

	t.Run("same as direct", func(t *testing.T) {
		sameLists(t, direct, via)
		sameResults(t, direct, via, []toolCall{
			{"list_allowed_directories", map[string]any{}},
			{"get_file_info", map[string]any{"path": filepath.Join(dir, "b.txt")}},
			{"read_text_file", map[string]any{"path": filepath.Join(dir, "b.txt")}},
			{"read_text_file", map[string]any{"path": filepath.Join(dir, "nope.txt")}},
			{"read_text_file", map[string]any{"path": "/etc/passwd"}},
			{"search_files", map[string]any{"path": dir, "pattern": "*.txt"}},
			{"directory_tree", map[string]any{"path": dir}},
			{"no_such_tool", map[string]any{}},
		})
	})

	t.Run("listing then predicted read is reused", func(t *testing.T) {
		res, src := call(t, via, "list_directory", map[string]any{"path": dir})
		if src != "executed" || !strings.Contains(text(res), "[FILE] a.txt") {
			t.Fatalf("list_directory: %q (%s)", text(res), src)
		}
		res, src = call(t, via, "read_text_file", map[string]any{"path": filepath.Join(dir, "a.txt")})
		if src != "reused" && src != "promoted" {
			t.Errorf("predicted read: _meta.ahead.source = %q, want reused or promoted", src)
		}
		if text(res) != "alpha\n" {
			t.Errorf("predicted read = %q", text(res))
		}
		// The predictor now proposes write_file: annotations say it is
		// destructive, so it never runs speculatively.
		call(t, via, "list_allowed_directories", map[string]any{})
		if b, _ := os.ReadFile(filepath.Join(dir, "a.txt")); string(b) != "alpha\n" {
			t.Errorf("a.txt = %q: a write ran speculatively", b)
		}
	})

	t.Run("write invalidates the speculative read", func(t *testing.T) {
		call(t, via, "list_directory", map[string]any{"path": dir}) // speculates read(a.txt)
		if _, src := call(t, via, "write_file", map[string]any{"path": filepath.Join(dir, "a.txt"), "content": "changed\n"}); src != "executed" {
			t.Errorf("write_file: source %q", src)
		}
		res, src := call(t, via, "read_text_file", map[string]any{"path": filepath.Join(dir, "a.txt")})
		if src != "executed" || text(res) != "changed\n" {
			t.Errorf("read after write = %q (%s), want the new content, executed", text(res), src)
		}
	})
}

func TestE2EMemory(t *testing.T) {
	dirD, dirV := t.TempDir(), t.TempDir()
	upD := npmServer(t, "memory", "mcp-server-memory", map[string]string{"MEMORY_FILE_PATH": filepath.Join(dirD, "m.jsonl")})
	upV := npmServer(t, "memory", "mcp-server-memory", map[string]string{"MEMORY_FILE_PATH": filepath.Join(dirV, "m.jsonl")})
	x := newE2E(t, []Upstream{upV}, nil)
	via, direct := x.connect(t), directTo(t, upD)
	sameLists(t, direct, via)
	sameResults(t, direct, via, []toolCall{
		{"read_graph", map[string]any{}},
		{"create_entities", map[string]any{"entities": []any{
			map[string]any{"name": "ada", "entityType": "person", "observations": []any{"wrote the first program"}},
			map[string]any{"name": "engine", "entityType": "machine", "observations": []any{"analytical"}},
		}}},
		{"create_relations", map[string]any{"relations": []any{map[string]any{"from": "ada", "to": "engine", "relationType": "programmed"}}}},
		{"search_nodes", map[string]any{"query": "ada"}},
		{"open_nodes", map[string]any{"names": []any{"engine"}}},
		{"read_graph", map[string]any{}},
		{"delete_entities", map[string]any{"entityNames": []any{"engine"}}},
		{"read_graph", map[string]any{}},
	})
}

func TestE2EEverything(t *testing.T) {
	up := npmServer(t, "everything", "mcp-server-everything", nil, "stdio")
	x := newE2E(t, []Upstream{up}, nil)
	via, direct := x.connect(t), directTo(t, up)
	sameLists(t, direct, via)
	sameResults(t, direct, via, []toolCall{
		{"echo", map[string]any{"message": "hi"}},
		{"get-sum", map[string]any{"a": 2, "b": 40}},
		{"get-tiny-image", map[string]any{}},
		{"get-annotated-message", map[string]any{"messageType": "error", "includeImage": true}},
		{"get-resource-reference", map[string]any{"resourceType": "Text", "resourceId": 3}},
		{"get-structured-content", map[string]any{"location": "New York"}},
		{"get-sum", map[string]any{"a": "x"}},
	})
	pd, err := direct.ListPrompts(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	pv, err := via.ListPrompts(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wire(t, pd.Prompts), wire(t, pv.Prompts)); diff != "" {
		t.Errorf("prompts/list differs (-direct +ahead):\n%s", diff)
	}
	rd, err := direct.ListResources(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	rv, err := via.ListResources(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wire(t, rd.Resources), wire(t, rv.Resources)); diff != "" {
		t.Errorf("resources/list differs (-direct +ahead):\n%s", diff)
	}
	if len(rv.Resources) > 0 {
		uri := rv.Resources[0].URI
		d, errd := direct.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: uri})
		v, errv := via.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: uri})
		if errd != nil || errv != nil {
			t.Fatalf("reading %s: %v, %v", uri, errd, errv)
		}
		if diff := cmp.Diff(wire(t, d), wire(t, v)); diff != "" {
			t.Errorf("resources/read %s differs (-direct +ahead):\n%s", uri, diff)
		}
	}
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

// TestE2EConformance runs the official MCP conformance suite against
// ahead's streamable HTTP front with the Go SDK's everything-server (stdio)
// behind it: sampling, elicitation, logging, progress, subscriptions,
// completion and DNS rebinding protection all have to pass through.
func TestE2EConformance(t *testing.T) {
	node, bin := testdeps(t)
	// The stable suite (testdeps also pins conformance-2026, whose
	// executable takes the name conformance).
	suite := filepath.Join(bin, "..", "@modelcontextprotocol", "conformance", "dist", "index.js")
	if _, err := os.Stat(suite); err != nil {
		missing(t, "@modelcontextprotocol/conformance")
	}
	server, err := conformanceServer()
	if err != nil {
		t.Fatal(err)
	}
	x := newE2E(t, []Upstream{{Name: "everything", Command: server}}, nil)
	srv := httptest.NewServer(x.proxy.Handler())
	defer srv.Close()

	out, err := runConformance(t, node, suite, srv.URL)
	passed, failed := conformanceTotals(out)
	if failed != 0 || passed == 0 || err != nil {
		t.Fatalf("conformance through ahead: %d passed, %d failed (%v)\n%s", passed, failed, err, out)
	}
	t.Logf("conformance through ahead: %d passed, 0 failed", passed)
}

func runConformance(t *testing.T, node, suite, url string) (string, error) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	args := []string{suite, "server", "--url", url, "--spec-version", "2025-11-25", "-o", t.TempDir()}
	// For debugging one scenario: AHEAD_CONFORMANCE_ARGS="--scenario NAME --verbose".
	args = append(args, strings.Fields(os.Getenv("AHEAD_CONFORMANCE_ARGS"))...)
	cmd := exec.CommandContext(ctx, node, args...)
	cmd.Dir = t.TempDir()
	out, err := cmd.CombinedOutput()
	return string(out), err
}

var totalRE = regexp.MustCompile(`(?m)^Total: (\d+) passed, (\d+) failed`)

func conformanceTotals(out string) (passed, failed int) {
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		if m := totalRE.FindStringSubmatch(sc.Text()); m != nil {
			fmt.Sscan(m[1], &passed)
			fmt.Sscan(m[2], &failed)
		}
	}
	return passed, failed
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
	if starts := os.Getenv(newOnlyEnv); starts != "" {
		os.Exit(serveNewOnly(starts))
	}
	if size := os.Getenv(bigServerEnv); size != "" {
		os.Exit(serveBig(size))
	}
	code := m.Run()
	builds.Lock()
	for _, dir := range builds.dirs {
		os.RemoveAll(dir)
	}
	builds.Unlock()
	os.Exit(code)
}
