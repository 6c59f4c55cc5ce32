package starter

import (
	"path/filepath"
	"strings"
)

// launchers run the package or script named by their first argument that
// is not a flag or a subcommand: the server is named after that (issue
// 27: ahead init named every npx server "npx").
var launchers = map[string]bool{
	"npx": true, "bunx": true, "pnpx": true, "uvx": true, "pipx": true, "pnpm": true, "yarn": true,
	"node": true, "bun": true, "deno": true, "uv": true, "python": true, "python3": true,
}

// launcherWords are the subcommands and flags with a value of launchers
// that come before the package or script (npx --package X, uv run, pnpm
// dlx, python -m).
var launcherWords = map[string]bool{"run": true, "dlx": true, "exec": true, "x": true, "tool": true}

// ServerName names an MCP server started by the command args: after the
// package or script a launcher runs (npx -y @scope/server-x@1.2 → server-x,
// python3 -m mcp_server_git → mcp_server_git, node build/index.js →
// index), else after the command.
func ServerName(args []string) string {
	name := filepath.Base(args[0])
	if !launchers[name] {
		return name
	}
	for _, a := range args[1:] {
		if strings.HasPrefix(a, "-") || launcherWords[a] {
			continue
		}
		if i := strings.LastIndex(a, "@"); i > 0 {
			a = a[:i] // a version: @scope/pkg@1.2, pkg@latest
		}
		a = strings.TrimSuffix(filepath.Base(a), filepath.Ext(a))
		if a != "" && a != "." {
			return a
		}
		break
	}
	return name
}
