package main

import (
	"context"

	"github.com/ahead-dev/ahead/pattern"
)

const patternsHelp = `Print the strongest patterns of a pool file (from ahead mine) as a table:
p, support (occurrences of the context where the arguments could be derived),
hits (calls predicted exactly), and the pattern as
context → tool(argument = source, ...).

Contexts list signatures oldest first (^ is the session start, tool[value] a
discriminated signature, a trailing ! an error). Sources name an event as #j
(the context element j back from the latest) or by its signature (the
session's most recent event with it): out(#0)/orders/0 is element 0 of the
"orders" field of the latest event's output; each(...) iterates a list,
first element not called yet first.`

func runPatterns(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 || args[0] != "show" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help") {
			fs := newFlagSet(e, "patterns", "patterns show [flags] FILE", patternsHelp)
			return parseFlags(fs, args)
		}
		return usageErr("want the subcommand show")
	}
	fs := newFlagSet(e, "patterns show", "patterns show [flags] FILE", patternsHelp)
	top := fs.Int("top", 30, "show at most this many patterns (0: all)")
	tool := fs.String("tool", "", "only patterns predicting this tool")
	minSup := fs.Int("min-support", 0, "only patterns with at least this support")
	exact := fs.Bool("exact", false, "only patterns that predict arguments")
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageErr("want exactly one pool file")
	}
	if *top < 0 {
		return usageErr("--top must not be negative")
	}
	pool, err := pattern.Load(fs.Arg(0))
	if err != nil {
		return err
	}
	return pattern.WriteTable(e.stdout, pool, pattern.ShowOptions{Top: *top, Tool: *tool, MinSupport: *minSup, ExactOnly: *exact})
}
