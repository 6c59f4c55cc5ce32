package main

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/ahead-dev/ahead/httpapi"
	"github.com/ahead-dev/ahead/trace"
)

const statsHelp = `Print per-tool statistics: calls and how they were served (executed,
reused, promoted), speculative executions, the tool time saved and wasted.
Either from recorded traces (files or directories, as ahead serve and ahead
mcp --traces write them) or from a running ahead serve (its URL, or its
/v1/stats URL). Examples:

  ahead stats ~/.ahead/traces
  ahead stats http://127.0.0.1:7777
  ahead stats --json ./traces | jq .tools`

func runStats(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "stats", "stats [--json] TRACE...|URL", statsHelp)
	asJSON := fs.Bool("json", false, "print the figures as JSON (the shape of /v1/stats)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return usageErr("give trace files or directories, or a server's URL")
	}
	var st httpapi.Stats
	var err error
	if u := fs.Arg(0); strings.HasPrefix(u, "http://") || strings.HasPrefix(u, "https://") {
		if fs.NArg() > 1 {
			return usageErr("give one URL")
		}
		st, err = httpapi.FetchStats(ctx, nil, u)
	} else {
		st, err = httpapi.StatsFromTraces(trace.NewReader(&trace.ReadOptions{SkipBad: true}).Events(fs.Args()...))
	}
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(st)
	}
	return st.WriteTable(e.stdout)
}
