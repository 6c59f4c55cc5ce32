package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDoctorMCP: ahead doctor starts the MCP upstreams once each, lists
// their tools, and says what their trusted annotations let speculate.
func TestDoctorMCP(t *testing.T) {
	upstream, launches := fakeMCP(t)
	file := filepath.Join(t.TempDir(), "ahead.yaml")
	yaml := fmt.Sprintf("mcpServers:\n  fs: {command: %q}\ntrust_annotations: true\npatterns: ./pool.json\n", upstream[0])
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, "doctor", "--config", file)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{
		"ok    mcp fs           started; 2 tools: list_directory, read_text_file",
		"  list_directory  mcpServers:fs  full (annotations)",
		"ok: ahead serve can start",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	if n := countLines(t, launches); n != 1 {
		t.Errorf("the upstream was started %d times, want 1", n)
	}
	if code, _, errOut := runCLI(t, "doctor"); code != 2 || !strings.Contains(errOut, "--config is required") {
		t.Errorf("doctor without --config: exit %d, %s", code, errOut)
	}
}
