package main

import (
	"context"
	"fmt"
	"os"

	"github.com/ahead-dev/ahead/trace"
)

const tracesHelp = `Convert agent logs into ahead's trace format (one JSON event per line).

  --from openai   chat transcripts in the OpenAI messages shape: assistant
                  "tool_calls" and "role": "tool" results (or Responses-API
                  function_call / function_call_output items), one
                  conversation per file, per JSONL line, or per element of a
                  JSON array. Results are paired with calls by id, and by
                  position when ids are missing or repeat.

The output is gzipped when its name ends in .gz; "-" writes to stdout.`

func runTraces(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 || args[0] != "import" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help") {
			fs := newFlagSet(e, "traces", "traces import --from openai FILE... -o OUT.jsonl.gz", tracesHelp)
			return parseFlags(fs, args)
		}
		return usageErr("want the subcommand import")
	}
	fs := newFlagSet(e, "traces import", "traces import --from openai FILE... -o OUT.jsonl.gz", tracesHelp)
	from := fs.String("from", "", "input format: openai (required)")
	out := fs.String("o", "", "output trace file (required; .gz compresses, - is stdout)")
	skipBad := fs.Bool("skip-bad", false, "skip calls whose arguments are not a JSON object (counted) instead of failing")
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	if *from != "openai" {
		return usageErr("--from must be openai")
	}
	if *out == "" {
		return usageErr("-o OUT is required")
	}
	if fs.NArg() == 0 {
		return usageErr("no input files given")
	}
	var events []trace.Event
	var stats trace.ImportStats
	for _, name := range fs.Args() {
		if err := ctx.Err(); err != nil {
			return err
		}
		data, err := os.ReadFile(name)
		if err != nil {
			return err
		}
		evs, err := trace.ImportOpenAI(name, data, &trace.ImportOptions{SkipBad: *skipBad}, &stats)
		if err != nil {
			return err
		}
		events = append(events, evs...)
	}
	if err := writeTrace(e, *out, events); err != nil {
		return err
	}
	w := e.stdout
	if *out == "-" {
		w = e.stderr
	}
	fmt.Fprintf(w, "imported %d files: %d sessions, %d calls → %s\n", fs.NArg(), stats.Sessions, stats.Calls, *out)
	if stats.Unanswered > 0 || stats.Orphans > 0 || stats.Bad > 0 {
		fmt.Fprintf(w, "left out: %d calls without a result, %d results without a call, %d calls with malformed arguments\n",
			stats.Unanswered, stats.Orphans, stats.Bad)
	}
	return nil
}

// writeTrace writes events to name (gzipped for .gz, stdout for "-"),
// replacing the file only once it is complete.
func writeTrace(e *env, name string, events []trace.Event) error {
	if name == "-" {
		return trace.Encode(e.stdout, events, false)
	}
	return trace.WriteFile(name, events)
}
