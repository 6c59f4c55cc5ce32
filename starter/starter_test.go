package starter

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ahead-dev/ahead/config"
	"github.com/ahead-dev/ahead/mcpproxy"
	"github.com/ahead-dev/ahead/policy"
)

// TestWriteLoads: the starter configuration loads with package config,
// and its policy allows exactly the read-only closed-world tools.
func TestWriteLoads(t *testing.T) {
	ro := &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: new(false)}
	open := &mcp.ToolAnnotations{ReadOnlyHint: true}
	for _, tc := range []struct {
		name  string
		c     Config
		allow map[string]bool
	}{
		{"mcp", Config{Servers: []Server{{
			Upstream: mcpproxy.Upstream{Name: "fs", Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-filesystem", "/home/me/project"}},
			Tools:    []*mcp.Tool{{Name: "read_text_file", Annotations: ro}, {Name: "write_file"}, {Name: "fetch", Annotations: open}},
		}}}, map[string]bool{"read_text_file": true, "write_file": false, "fetch": false}},
		{"backends and a server that failed", Config{
			Backends: []Backend{{Name: "web", URL: "http://127.0.0.1:9000/tools/{tool}"}, {Name: "local", Command: []string{"./tool.sh", "{tool}"}, Tools: []string{"run", "lint"}}},
			Servers:  []Server{{Upstream: mcpproxy.Upstream{Name: "remote", URL: "http://127.0.0.1:1/mcp"}, Err: errors.New("connection\nrefused")}},
		}, map[string]bool{"search": false, "run": false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := Write(&b, tc.c); err != nil {
				t.Fatal(err)
			}
			cfg, err := config.Parse("ahead.yaml", b.Bytes())
			if err != nil {
				t.Fatalf("%v\n%s", err, b.String())
			}
			if cfg.Patterns == nil || !cfg.Patterns.Learn || cfg.Traces == nil {
				t.Errorf("patterns %+v traces %+v: want learning and recording on", cfg.Patterns, cfg.Traces)
			}
			for tool, want := range tc.allow {
				if got := cfg.Policy.Lookup(tool).Level() == policy.LevelFull; got != want {
					t.Errorf("%s allowed %v, want %v\n%s", tool, got, want, b.String())
				}
			}
			if len(cfg.Backends) != len(tc.c.Backends) || len(cfg.Upstreams) != len(tc.c.Servers) {
				t.Errorf("%d backends, %d servers, want %d, %d", len(cfg.Backends), len(cfg.Upstreams), len(tc.c.Backends), len(tc.c.Servers))
			}
			if len(tc.c.Backends) > 1 && cfg.Backends[1].Tools[1] != "lint" {
				t.Errorf("backend local tools %q", cfg.Backends[1].Tools)
			}
			if strings.Contains(b.String(), "\n    # ahead init could not start it (connection refused)") != (tc.name != "mcp") {
				t.Errorf("the failure is not noted on one line:\n%s", b.String())
			}
		})
	}
}

func TestWriteTwoCatchAlls(t *testing.T) {
	err := Write(new(bytes.Buffer), Config{Backends: []Backend{{Name: "a", URL: "http://x/{tool}"}, {Name: "b", URL: "http://y/{tool}"}}})
	if err == nil {
		t.Error("two backends without tools: no error")
	}
}
