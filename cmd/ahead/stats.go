package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

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
		st, err = fetchStats(ctx, u)
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

// fetchStats reads a running server's /v1/stats (the path is added to a
// bare server URL).
func fetchStats(ctx context.Context, raw string) (httpapi.Stats, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return httpapi.Stats{}, usageErr("%v", err)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/v1/stats"
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return httpapi.Stats{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return httpapi.Stats{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return httpapi.Stats{}, fmt.Errorf("%s: %s: %s", u, resp.Status, strings.TrimSpace(string(b)))
	}
	var st httpapi.Stats
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return httpapi.Stats{}, fmt.Errorf("%s: %w", u, err)
	}
	return st, nil
}
