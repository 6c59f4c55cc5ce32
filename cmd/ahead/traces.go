package main

import (
	"bufio"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"strings"

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
func writeTrace(e *env, name string, events []trace.Event) (err error) {
	var dst io.Writer
	var f *os.File
	if name == "-" {
		dst = e.stdout
	} else {
		f, err = os.CreateTemp(dirOf(name), ".import-*")
		if err != nil {
			return err
		}
		if err = f.Chmod(0o644); err != nil {
			f.Close()
			os.Remove(f.Name())
			return err
		}
		defer func() {
			if err != nil {
				f.Close()
				os.Remove(f.Name())
			}
		}()
		dst = f
	}
	bw := bufio.NewWriter(dst)
	var w io.Writer = bw
	var zw *gzip.Writer
	if strings.HasSuffix(name, ".gz") {
		zw = gzip.NewWriter(bw)
		w = zw
	}
	for _, ev := range events {
		if err := trace.EncodeLine(w, ev); err != nil {
			return err
		}
	}
	if zw != nil {
		if err := zw.Close(); err != nil {
			return err
		}
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	if f == nil {
		return nil
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), name)
}

func dirOf(name string) string {
	i := strings.LastIndexAny(name, `/\`)
	if i < 0 {
		return "."
	}
	if i == 0 {
		return "/"
	}
	return name[:i]
}
