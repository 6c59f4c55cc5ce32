// Command ahead is a sidecar that makes LLM agents faster by running their
// next tool calls while the model is still thinking. See README.md.
//
// main is thin: it parses the subcommand, runs it with a context cancelled
// on SIGINT/SIGTERM, and maps errors to exit codes (0 ok, 1 runtime failure,
// 2 usage). Each command parses its flags and hands them to the library
// packages: the configuration file is read by package config, what ahead
// serve and ahead mcp run is built and served by package server, ahead
// eval's scoring is package evaluate's, ahead bench's replay package
// bench's, and so on.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// command is one subcommand.
type command struct {
	name  string
	usage string // one line: "name [flags] ARGS"
	short string // one line for the command list
	run   func(ctx context.Context, env *env, args []string) error
}

// env is what a command may touch besides its flags: no globals.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	// isTerminal reports whether stderr is a terminal (progress bars).
	isTerminal bool
	// getenv reads the environment (AHEAD_LOG); nil reads nothing, so
	// tests do not depend on the environment they run in.
	getenv func(string) string
}

func (e *env) env(key string) string {
	if e.getenv == nil {
		return ""
	}
	return e.getenv(key)
}

// errUsage marks a usage error (exit code 2). Wrap it with details.
var errUsage = errors.New("usage error")

// usageErr returns a usage error with a message.
func usageErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errUsage, fmt.Sprintf(format, args...))
}

func commands() []command {
	return []command{
		{"demo", "demo", "show ahead speeding up real agent traces (embedded sample, no config)", runDemo},
		{"serve", "serve --config ahead.yaml", "serve the HTTP tool API (and MCP over HTTP) in front of backends", runServe},
		{"mcp", "mcp [flags] [-- COMMAND ARGS...]", "serve MCP over stdio in front of MCP servers", runMCP},
		{"mine", "mine [flags] -o pool.json TRACE...", "mine tool-call patterns from traces", runMine},
		{"eval", "eval --patterns pool.json [flags] TRACE...", "measure prediction quality on traces", runEval},
		{"bench", "bench [flags] TRACE...", "replay traces through the engine: serial vs ahead vs oracle", runBench},
		{"patterns", "patterns show FILE", "print the strongest patterns of a pool", runPatterns},
		{"traces", "traces import --from openai FILE... -o OUT.jsonl.gz", "convert agent logs to ahead's trace format", runTraces},
		{"stats", "stats [--json] TRACE...|URL", "per-tool statistics of recorded traces or a running ahead serve", runStats},
		{"doctor", "doctor --config ahead.yaml", "check a configuration: backends, MCP upstreams, policy, pool", runDoctor},
		{"init", "init [flags] [-- MCP-SERVER-COMMAND...]", "write a commented starter config and policy", runInit},
		{"version", "version", "print the version", runVersion},
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	e := &env{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, isTerminal: isTerminal(os.Stderr), getenv: os.Getenv}
	os.Exit(run(ctx, e, os.Args[1:]))
}

// run runs the command line and returns the exit code.
func run(ctx context.Context, e *env, args []string) int {
	if len(args) == 0 {
		printUsage(e.stderr)
		return 2
	}
	name := args[0]
	switch name {
	case "-h", "-help", "--help", "help":
		if len(args) > 1 {
			return run(ctx, e, []string{args[1], "--help"})
		}
		printUsage(e.stdout)
		return 0
	case "-version", "--version":
		name = "version"
	}
	for _, c := range commands() {
		if c.name != name {
			continue
		}
		err := c.run(ctx, e, args[1:])
		switch {
		case err == nil, errors.Is(err, flag.ErrHelp):
			return 0
		case errors.Is(err, errUsage):
			fmt.Fprintf(e.stderr, "ahead %s: %v\nusage: ahead %s (see ahead %s --help)\n", c.name, err, c.usage, c.name)
			return 2
		default:
			fmt.Fprintf(e.stderr, "ahead %s: %v\n", c.name, err)
			return 1
		}
	}
	fmt.Fprintf(e.stderr, "ahead: unknown command %q\n\n", name)
	printUsage(e.stderr)
	return 2
}

func printUsage(w io.Writer) {
	fmt.Fprintf(w, "ahead runs an LLM agent's next tool calls while the model is still thinking.\n\nUsage:\n  ahead <command> [flags]\n\nCommands:\n")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-9s %s\n", c.name, c.short)
	}
	fmt.Fprintf(w, "\nRun 'ahead <command> --help' for a command's flags.\n")
}

// newFlagSet returns a FlagSet for a subcommand whose --help prints the
// usage line, the description and the flags to stdout.
func newFlagSet(e *env, name, usage, description string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	// The flag package prints a parse error and the usage itself; run
	// prints the error once, with the usage line (issue 14: it was printed
	// twice). Only --help prints the full usage, to stdout.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {
		fs.SetOutput(e.stdout)
		fmt.Fprintf(e.stdout, "Usage: ahead %s\n\n%s\n", usage, description)
		if hasFlags(fs) {
			fmt.Fprintf(e.stdout, "\nFlags:\n")
			fs.PrintDefaults()
		}
		fs.SetOutput(io.Discard)
	}
	return fs
}

func hasFlags(fs *flag.FlagSet) bool {
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	return n > 0
}

// parseFlags parses args, turning flag errors into usage errors. --help
// returns flag.ErrHelp (exit 0). Flags may come after positional
// arguments (ahead mine TRACE -o pool.json), as users write them; "--"
// ends the flags, and everything after it is positional.
func parseFlags(fs *flag.FlagSet, args []string) error {
	var positional []string
	for {
		if err := parseFlagsUntilArg(fs, args); err != nil {
			return err
		}
		rest := fs.Args()
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			positional = append(positional, rest...)
			break
		}
		if len(rest) == 0 {
			break
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
	// Leave exactly the positional arguments in fs.Args().
	return fs.Parse(append([]string{"--"}, positional...))
}

// parseFlagsUntilArg parses flags up to the first positional argument, as
// the flag package does: for commands whose positional arguments are a
// command line of their own (ahead mcp npx -y server), whose flags are not
// ahead's.
func parseFlagsUntilArg(fs *flag.FlagSet, args []string) error {
	// The flag package calls Usage on errors too: only --help prints it.
	usage := fs.Usage
	fs.Usage = func() {}
	err := fs.Parse(args)
	fs.Usage = usage
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage()
			return err
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	return nil
}

func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func runVersion(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "version", "version", "Print ahead's version.")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErr("unexpected arguments %q", fs.Args())
	}
	fmt.Fprintf(e.stdout, "ahead %s\n", versionString(debug.ReadBuildInfo))
	return nil
}

// versionString is the version with the VCS revision the binary was built
// from (go build in a checkout stamps it), its time and whether the tree
// was modified, and the Go version: "dev (a90f4dc 2026-11-25T10:07:57Z,
// modified; go1.26.0)". A module version (go install ...@v1.2.0) stands in
// for "dev".
func versionString(read func() (*debug.BuildInfo, bool)) string {
	v := version
	bi, ok := read()
	if !ok {
		return v
	}
	if v == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		v = bi.Main.Version
	}
	var rev, at string
	modified := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	var parts []string
	if rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		parts = append(parts, strings.TrimSpace(rev+" "+at))
	}
	if modified {
		parts = append(parts, "modified")
	}
	info := strings.Join(parts, ", ")
	if bi.GoVersion != "" {
		info = strings.TrimPrefix(info+"; "+bi.GoVersion, "; ")
	}
	if info == "" {
		return v
	}
	return v + " (" + info + ")"
}
