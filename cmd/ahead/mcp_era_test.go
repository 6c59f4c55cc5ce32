package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestMCPTypeScriptStdio: the official TypeScript SDK v2 client, pinned to
// MCP 2026-07-28, launches ahead mcp in front of the Go SDK's conformance
// server over stdio: it gets the revision (no initialize: the process is
// the run), and tools/list, tools/call (with _meta.ahead), prompts and
// resources pass through.
func TestMCPTypeScriptStdio(t *testing.T) {
	node, _ := testdeps(t)
	server, err := conformanceServer()
	if err != nil {
		t.Fatal(err)
	}
	aheadBin := ahead(t)
	dist, err := filepath.Abs(filepath.Join("..", "..", "testdeps", "node_modules", "@modelcontextprotocol", "client", "dist"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join("testdata", "tsstdio.mjs"), aheadBin, "mcp", "--quiet", "--", server)
	cmd.Env = append(os.Environ(), "MCP_CLIENT=file://"+dist)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the TypeScript client: %v\n%s", err, stderr.String())
	}
	var seen struct {
		Version  string `json:"version"`
		Tools    int    `json:"tools"`
		Text     string `json:"text"`
		Source   string `json:"source"`
		Prompt   int    `json:"prompt"`
		Resource int    `json:"resource"`
	}
	if err := json.Unmarshal(out, &seen); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if seen.Version != "2026-07-28" {
		t.Errorf("negotiated %q, want 2026-07-28", seen.Version)
	}
	if seen.Tools == 0 || seen.Text == "" || seen.Source != "executed" || seen.Prompt == 0 || seen.Resource == 0 {
		t.Errorf("through ahead mcp: %+v, want tools, the tool's text (executed), a prompt and a resource", seen)
	}
}
