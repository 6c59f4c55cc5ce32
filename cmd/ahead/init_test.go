package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ahead-dev/ahead/config"
	"github.com/ahead-dev/ahead/policy"
)

// TestInit: ahead init starts the MCP server once, writes a config that
// loads, allows its read-only closed-world tools, and does not overwrite
// a file without --force.
func TestInit(t *testing.T) {
	upstream, launches := fakeMCP(t)
	out := filepath.Join(t.TempDir(), "ahead.yaml")
	code, stdout, stderr := runCLI(t, append([]string{"init", "-o", out, "--http", "web=http://127.0.0.1:9000/{tool}", "--"}, upstream...)...)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	cfg, err := config.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	if lvl := cfg.Policy.Lookup("list_directory").Level(); lvl != policy.LevelFull {
		t.Errorf("list_directory: %v, want full (read-only, closed world)", lvl)
	}
	if len(cfg.Upstreams) != 1 || len(cfg.Backends) != 1 {
		t.Errorf("%d upstreams, %d backends, want 1 and 1", len(cfg.Upstreams), len(cfg.Backends))
	}
	if n := countLines(t, launches); n != 1 {
		t.Errorf("the server was started %d times, want 1", n)
	}
	code, _, stderr = runCLI(t, "init", "-o", out, "--http", "web=http://x/{tool}")
	if code != 1 || !strings.Contains(stderr, "exists: use --force") {
		t.Errorf("overwriting: exit %d, %s", code, stderr)
	}
	if code, _, _ := runCLI(t, "init", "-o", out, "--force", "--http", "web=http://x/{tool}"); code != 0 {
		t.Errorf("--force: exit %d", code)
	}
	if b, _ := os.ReadFile(out); strings.Contains(string(b), "mcpServers:") {
		t.Error("--force did not overwrite")
	}
	if code, _, stderr := runCLI(t, "init"); code != 2 {
		t.Errorf("init without servers or backends: exit %d, %s", code, stderr)
	}
}
