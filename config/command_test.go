package config_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ahead-dev/ahead/config"
	"github.com/ahead-dev/ahead/mcpproxy"
)

func TestMCPCommand(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "ahead.yaml")
	os.WriteFile(file, []byte("mcpServers:\n  fs: {command: fs-server}\ntraces: {dir: "+dir+"}\npatterns: "+filepath.Join(dir, "p.json")+"\n"), 0o644)
	up := &mcpproxy.Upstream{Name: "srv", Command: "srv"}

	// The file's parts, with the command's upstream first and the file's
	// traces named for the command.
	cfg, err := (&config.MCPCommand{File: file, Upstream: up, FailOnLoss: true}).Config()
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Upstreams) != 2 || cfg.Upstreams[0].Name != "srv" || cfg.Upstreams[1].Name != "fs" {
		t.Errorf("upstreams %+v; want srv then fs", cfg.Upstreams)
	}
	if tr := cfg.Traces; tr == nil || tr.Dir != dir || tr.Prefix != "mcp" || !tr.FailOnLoss {
		t.Errorf("traces %+v; want the file's folder, prefix mcp, failing on loss", tr)
	}

	// A pool that learns with nothing recording keeps the recent sessions
	// beside it, unless told where or not to.
	pool := filepath.Join(dir, "q.json")
	cfg, err = (&config.MCPCommand{Upstream: up, Patterns: pool}).Config()
	if err != nil {
		t.Fatal(err)
	}
	if p := cfg.Patterns; p == nil || p.Pool != pool || !p.Learn || p.Checkpoint != pool || p.CheckpointEvery != 5*time.Minute {
		t.Errorf("patterns %+v; want the short form learning into %s", p, pool)
	}
	if tr := cfg.Traces; tr == nil || tr.Dir != pool+".recent" {
		t.Errorf("traces %+v; want %s.recent", tr, pool)
	}
	if cfg, err = (&config.MCPCommand{Upstream: up, Patterns: pool, Recent: config.Off}).Config(); err != nil || cfg.Traces != nil {
		t.Errorf("--recent none: traces %+v, %v; want none", cfg.Traces, err)
	}
	// Without a pool (issue 24): the built-in default, learning in
	// memory; nothing is kept on disk.
	if cfg, err = (&config.MCPCommand{Upstream: up}).Config(); err != nil || cfg.Patterns == nil || cfg.Patterns.Pool != "" || !cfg.Patterns.Learn || cfg.Traces != nil {
		t.Errorf("no pool: patterns %+v, traces %+v, %v; want in memory, nothing recorded", cfg.Patterns, cfg.Traces, err)
	}
	if cfg, err = (&config.MCPCommand{File: file, Patterns: config.Off, Policy: config.Off}).Config(); err != nil || cfg.Patterns != nil || cfg.Policy != nil {
		t.Errorf("none: patterns %+v, policy %v, %v; want neither", cfg.Patterns, cfg.Policy, err)
	}

	// Contradictions are the command line's; a bad policy file is the file's.
	for _, c := range []struct {
		cmd  config.MCPCommand
		want string
	}{
		{config.MCPCommand{}, "no MCP server"},
		{config.MCPCommand{File: file, Upstream: &mcpproxy.Upstream{Name: "fs", Command: "x"}}, `named "fs", like one in ` + file},
		{config.MCPCommand{Upstream: up, Recent: dir, Traces: dir}, "--recent and --traces"},
	} {
		_, err := c.cmd.Config()
		if ue, ok := errors.AsType[*config.UsageError](err); !ok || !strings.Contains(ue.Msg, c.want) {
			t.Errorf("%+v: %v; want a usage error mentioning %q", c.cmd, err, c.want)
		}
	}
	_, err = (&config.MCPCommand{Upstream: up, Policy: filepath.Join(dir, "missing.yaml")}).Config()
	if _, ok := errors.AsType[*config.UsageError](err); ok || err == nil || !strings.Contains(err.Error(), "missing.yaml") {
		t.Errorf("missing policy: %v; want the file's error", err)
	}
}
