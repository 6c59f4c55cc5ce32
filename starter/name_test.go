package starter

import (
	"strings"
	"testing"
)

// TestServerName: a server started by a launcher is named after what it
// launches, not after the launcher (issue 27).
func TestServerName(t *testing.T) {
	for cmd, want := range map[string]string{
		"npx -y @modelcontextprotocol/server-filesystem /home/me": "server-filesystem",
		"npx -y @modelcontextprotocol/server-memory@2025.1.1":     "server-memory",
		"uvx mcp-server-git --repository .":                       "mcp-server-git",
		"python3 -m mcp_server_time":                              "mcp_server_time",
		"node build/index.js":                                     "index",
		"pnpm dlx some-server@latest":                             "some-server",
		"/usr/local/bin/my-server --port 1":                       "my-server",
		"npx":                                                     "npx",
	} {
		if got := ServerName(strings.Fields(cmd)); got != want {
			t.Errorf("ServerName(%s) = %q, want %q", cmd, got, want)
		}
	}
}
