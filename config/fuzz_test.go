package config_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ahead-dev/ahead/config"
	"github.com/ahead-dev/ahead/mcpproxy"
	"github.com/ahead-dev/ahead/policy"
)

// FuzzParse checks that Parse never panics, that every error it reports
// is positioned in the file, and that what it accepts is complete: a
// listen address, a grace period, something to serve, and MCP upstreams
// the proxy takes. The seeds are the f.Add cases, the sample files in
// testdata/ and the corpus in testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"backends:\n  b:\n    http: {url: 'http://h/{tool}'}\n    tools: [a]\n",
		"listen: 127.0.0.1:0\nbackends: {b: {exec: {command: [x, '{tool}'], timeout: 1s}, slots: 2}}\n",
		"patterns: p.json\ntraces: {dir: t}\nengine: {ttl: 1m, max_bytes: 1GiB}\nbackends: {a: {http: {url: 'http://x/'}}}\n",
		"a: &x [*x]\n", "backends: {b: &y {http: *y}}\n", "speculation_policy: {default: {allow: true}}\n",
		"backends:\n  b:\n    http: {url: u, headers: {A: '${TOKEN}${EMPTY}$'}}\n",
		"mcpServers: {fs: {command: npx, args: [a], cwd: d}, web: {url: 'http://h/mcp', type: http}}\ntrust_annotations: true\n",
		"mcpServers:\n  fs: {command: npx, args: [a, b], env: {A: b}}\n",
		"mcpServers:\n  s: {url: http://x/mcp, headers: {A: b}, type: http, slots: 2}\n",
		"mcpServers: {a: {command: x, prefix: p_, trust_annotations: true}, b: &x {url: 'https://y/'}, c: *x}\n",
		"mcpServers: {a: {command: x}, a: {url: y}, '': {command: z, cwd: ''}}\n",
	} {
		f.Add([]byte(s))
	}
	samples, err := filepath.Glob(filepath.Join("testdata", "*.yaml"))
	if err != nil {
		f.Fatal(err)
	}
	for _, name := range samples {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := parse(string(data))
		if err == nil {
			if c.Listen == "" || c.ShutdownGrace <= 0 || (len(c.Backends) == 0 && len(c.Upstreams) == 0) {
				t.Fatalf("accepted an incomplete config: %+v", c)
			}
			if len(c.Upstreams) > 0 {
				if _, err := mcpproxy.New(&mcpproxy.Options{Upstreams: c.Upstreams}); err != nil {
					t.Fatalf("parsed upstreams rejected by the proxy: %v", err)
				}
			}
			return
		}
		for _, line := range strings.Split(err.Error(), "\n") {
			if !strings.HasPrefix(line, "a.yaml:") {
				t.Fatalf("error without position: %q", line)
			}
		}
		_, isConfig := errors.AsType[*config.Error](err)
		_, isPolicy := errors.AsType[*policy.Error](err)
		if !isConfig && !isPolicy {
			t.Fatalf("error of type %T", err)
		}
	})
}
