package main

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/ahead-dev/ahead/backend/replay"
	"github.com/ahead-dev/ahead/bench"
	"github.com/ahead-dev/ahead/mine"
	"github.com/ahead-dev/ahead/policy"
	"github.com/ahead-dev/ahead/trace"
)

// demoData is a sample of real agent traces (see demodata/README.md).
//
//go:embed demodata/mine.jsonl.gz demodata/replay.jsonl.gz demodata/policy.yaml
var demoData embed.FS

const demoHelp = `Show ahead speeding up real agent traces, with nothing to configure: an
embedded sample of tau2-bench customer-service sessions is mined on half the
tasks, and 40 sessions of the other tasks are replayed through the engine
(tool latency log-normal, median 600 ms, p90 1.5 s, 20 times faster than
real time) in every mode of ahead bench. Prints the table, a one-line verdict,
and the path of an SVG plot.`

// The demo's fixed setup.
const (
	demoLatency     = "lognormal:600ms:1500ms"
	demoTimeScale   = 0.05
	demoConcurrency = 16
	demoSeed        = 1
)

func runDemo(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "demo", "demo", demoHelp)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErr("demo takes no arguments")
	}
	return demo(ctx, e)
}

func demo(ctx context.Context, e *env) error {
	toMine, err := demoSessions("demodata/mine.jsonl.gz")
	if err != nil {
		return err
	}
	sessions, err := demoSessions("demodata/replay.jsonl.gz")
	if err != nil {
		return err
	}
	data, err := fs.ReadFile(demoData, "demodata/policy.yaml")
	if err != nil {
		return err
	}
	pol, err := policy.Parse(data, "demodata/policy.yaml")
	if err != nil {
		return err
	}
	lat, err := replay.ParseLatency(demoLatency, demoSeed)
	if err != nil {
		return err
	}
	t0 := time.Now()
	pool, err := mine.Mine(toMine, nil)
	if err != nil {
		return fmt.Errorf("mining: %w", err)
	}
	if _, err := mineConversation(pool, toMine); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "Mined %d patterns from %d real tau2 sessions in %.1fs; replaying %d sessions of other tasks\n",
		len(pool.Patterns), len(toMine), time.Since(t0).Seconds(), len(sessions))
	fmt.Fprintf(e.stdout, "through the engine in every mode, %g times faster than real time (figures in the agents' time).\n\n", 1/demoTimeScale)

	rep, err := runWithProgress(ctx, e, sessions, &bench.Options{
		Predictor: func() (bench.Predictor, error) {
			_, p, err := newPredictor(pool, nil)
			return p, err
		},
		Mine:        toMine,
		Policy:      pol,
		Latency:     lat,
		TimeScale:   demoTimeScale,
		Concurrency: demoConcurrency,
		Seed:        demoSeed,
	})
	if err != nil {
		return err
	}
	if err := rep.WriteTable(e.stdout); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "\n%s\n", rep.Verdict())

	f, err := os.CreateTemp("", "ahead-demo-*.svg")
	if err != nil {
		return err
	}
	if err := rep.WritePlot(f); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "plot: %s\n", f.Name())
	return nil
}

func demoSessions(name string) ([]trace.Session, error) {
	f, err := demoData.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return trace.Collect(trace.NewReader(nil).Read(name, f))
}
