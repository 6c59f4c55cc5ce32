package main

import (
	"context"
	"fmt"

	"github.com/ahead-dev/ahead/bench"
	"github.com/ahead-dev/ahead/progress"
)

const demoHelp = `Show ahead speeding up real agent traces, with nothing to configure: an
embedded sample of tau2-bench customer-service sessions is mined on half the
tasks, and 40 sessions of the other tasks are replayed through the engine
(tool latency log-normal, median 600 ms, p90 1.5 s, 20 times faster than
real time) in every mode of ahead bench. Prints the table, a legend of its
modes and columns, and a one-line verdict; --plot FILE also draws it as SVG.`

func runDemo(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "demo", "demo [--plot FILE.svg]", demoHelp)
	plot := fs.String("plot", "", "also write the sessions' times as an SVG plot to `file`")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErr("demo takes no arguments")
	}
	return demo(ctx, e, *plot)
}

// demo runs the demo, writing the plot to plot unless it is "" (issue 27:
// every run left a plot file in the temporary folder).
func demo(ctx context.Context, e *env, plot string) error {
	m := progress.New(e.stderr, "ahead demo", &progress.Options{Terminal: e.isTerminal})
	rep, err := bench.Demo(ctx, e.stdout, func(p bench.Progress) {
		m.Update(fmt.Sprintf("mode %s (%d/%d), sessions", p.Mode, p.ModeIndex+1, p.Modes), p.Done, p.Total)
	})
	m.Done()
	if err != nil {
		return err
	}
	if err := rep.WriteTable(e.stdout); err != nil {
		return err
	}
	fmt.Fprintln(e.stdout)
	if err := rep.WriteLegend(e.stdout); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "\n%s\n", rep.Verdict())
	if plot == "" {
		return nil
	}
	if err := rep.SavePlot(plot); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "plot: %s\n", plot)
	return nil
}
