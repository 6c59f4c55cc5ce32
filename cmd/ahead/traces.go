package main

import (
	"context"
	"fmt"

	"github.com/ahead-dev/ahead/trace"
)

const tracesHelp = `Convert agent transcripts into ahead's trace format: one JSON line per tool
call, and one per message of the conversation (system prompt, user and
assistant text), in the order they happened.

  --from openai     OpenAI chat transcripts: messages with assistant
                    "tool_calls" and "role": "tool" results; also reads
                    Responses items
  --from responses  OpenAI Responses items: "message" items (input_text,
                    output_text), function_call and function_call_output
                    (the same importer as openai, which reads both shapes)
  --from anthropic  Anthropic messages: content blocks text, tool_use and
                    tool_result, and a request's "system" field

A file holds one conversation (a JSON array of messages, or one message per
JSONL line) or several (objects with a "messages" array, one per line or in
a JSON array). Results are paired with calls by id, and by position when ids
are missing or repeat; tool results are the calls' outputs, not messages.
Images are dropped; text parts are joined.

The output is gzipped when its name ends in .gz; "-" writes to stdout.`

func runTraces(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "traces import", "traces import --from openai|responses|anthropic FILE... -o OUT.jsonl.gz", tracesHelp)
	from := fs.String("from", "", "input format: openai, responses or anthropic (required)")
	out := fs.String("o", "", "output trace file (required; .gz compresses, - is stdout)")
	skipBad := fs.Bool("skip-bad", false, "skip calls whose arguments are not a JSON object (counted) instead of failing")
	if len(args) == 0 || args[0] != "import" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help") {
			// The help of the one subcommand, with its flags.
			return parseFlags(fs, args)
		}
		return usageErr("want the subcommand import")
	}
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	if _, ok := trace.ImporterFor(*from); !ok {
		return usageErr("--from must be openai, responses or anthropic")
	}
	if *out == "" {
		return usageErr("-o OUT is required")
	}
	if fs.NArg() == 0 {
		return usageErr("no input files given")
	}
	var stats trace.ImportStats
	events, err := trace.ImportFiles(ctx, fs.Args(), *from, &trace.ImportOptions{SkipBad: *skipBad}, &stats)
	if err != nil {
		return err
	}
	if stats.Calls+stats.Bad == 0 {
		return fmt.Errorf("no tool calls found in %s read as --from %s (%d %s, %d %s): nothing to mine",
			plural(fs.NArg(), "file"), *from, stats.Sessions, noun(stats.Sessions, "session"), stats.Messages, noun(stats.Messages, "message"))
	}
	if err := writeTrace(e, *out, events); err != nil {
		return err
	}
	w := e.stdout
	if *out == "-" {
		w = e.stderr
	}
	fmt.Fprintf(w, "imported %s: %s, %s, %s → %s\n", plural(fs.NArg(), "file"), plural(stats.Sessions, "session"),
		plural(stats.Calls, "call"), plural(stats.Messages, "message"), *out)
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

// plural is "1 file", "2 files".
func plural(n int, word string) string { return fmt.Sprintf("%d %s", n, noun(n, word)) }

// noun is word, with an s unless n is 1.
func noun(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}
