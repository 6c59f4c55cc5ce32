package main

import (
	"context"
	"errors"

	"github.com/ahead-dev/ahead/config"
	"github.com/ahead-dev/ahead/doctor"
)

const doctorHelp = `Check a configuration before serving it: the file parses, HTTP backends
accept connections, exec commands exist, MCP upstreams start and list their
tools, the policy names tools the backends serve, the pattern pool loads;
then list each known tool and how far it would be speculated. Runs no tool,
and changes nothing on a fleet's server unless --create-fleet. Exits 1 if a
check fails.`

// errChecksFailed is doctor's failure: the report says what failed.
var errChecksFailed = errors.New("some checks failed")

func runDoctor(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "doctor", "doctor --config ahead.yaml", doctorHelp)
	configPath := fs.String("config", "", "the configuration `file` (required)")
	createFleet := fs.Bool("create-fleet", false, "create the fleet's streams and buckets (with the configured bounds) as a replica does at start; without it the fleet is only read")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErr("unexpected arguments %q", fs.Args())
	}
	if *configPath == "" {
		return usageErr("--config is required")
	}
	cfg, err := (&config.Loader{BackendsOptional: true}).Load(*configPath)
	if err != nil {
		return err
	}
	rep := doctor.Check(ctx, cfg, &doctor.Options{Stderr: e.stderr, CreateFleet: *createFleet})
	if err := rep.Write(e.stdout); err != nil {
		return err
	}
	if rep.Failed() {
		return errChecksFailed
	}
	return nil
}
