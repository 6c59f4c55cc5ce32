package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/ahead-dev/ahead/backend/replay"
	"github.com/ahead-dev/ahead/bench"
	"github.com/ahead-dev/ahead/policy"
	"github.com/ahead-dev/ahead/progress"
	"github.com/ahead-dev/ahead/trace"
)

const benchHelp = `Replay recorded sessions through the engine and measure what speculation
gains, wastes and risks. Each session is replayed as an agent: it thinks for
each step's recorded llm_ms, then issues the step's calls together through
the engine, against a backend that answers with the recorded outputs after a
modelled latency. Modes, all on the same sessions, latency draws and arrivals:

  serial     no speculation (the baseline)
  ahead      the pattern predictor (--patterns, or mined with --mine-from)
  oracle     every step known exactly when its think window starts, unlimited
             slots and budget, same policy: the ceiling
  orion      pre-warming the likely next tools only (ORION-like; gains only
             with --cold-start)
  specfaas   the likely next tool with its previous arguments (SpecFaaS-like)
  all_wrong  predictions that never match (must not be slower than serial)
  aa         serial again (A/A: the noise floor)
  fleet      with --replicas N: N replicas learning together through a fleet,
             beside the ahead mode's N replicas learning alone

Every figure is in trace time, whatever --time-scale. Every authoritative
result is compared with the recording (lossless, mismatches). Example, mined
on some tau2 tasks and replayed on the others:

  ahead bench --mine-from T.jsonl.gz --sessions T.sessions.jsonl --split-by task_id \
    --holdout 0.5 --part test --policy policy.yaml \
    --tool-latency lognormal:600ms:1500ms --time-scale 0.01 T.jsonl.gz

With --learn the ahead mode starts from nothing, as a fresh install does: the
built-in default from the first call, both parts relearnt every
--relearn-every sessions; the sessions run in file order and the hidden
stall of the first and the second half of them is reported.`

// benchFlags are bench's own flags (the trace selection flags are shared
// with mine and eval).
type benchFlags struct {
	patterns     string
	mineFrom     stringList
	allowOverlap bool
	policy       string
	latency      string
	timeScale    float64
	thinkDefault time.Duration
	concurrency  int
	arrival      string
	slots        int
	specBudget   int
	coldStart    time.Duration
	modes        string
	seed         uint64
	asJSON       bool
	plot         string
	modelTTFT    time.Duration
	modelTPS     float64
	noStream     bool
	spec         string
	specModel    string
	specKeyEnv   string
	logLevel     string
	replicas     int
	learn        bool
	relearnEvery int
	learnEvery   int
}

func runBench(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "bench", "bench [flags] TRACE...", benchHelp)
	var tf traceFlags
	tf.register(fs)
	var f benchFlags
	fs.StringVar(&f.patterns, "patterns", "", "pattern pool `file` for the ahead mode (from ahead mine)")
	fs.Var(&f.mineFrom, "mine-from", "mine the ahead mode's patterns from these `traces` first (with a split: their other part); repeatable")
	fs.BoolVar(&f.allowOverlap, "allow-overlap", false, "allow mining on the replayed sessions themselves (in-sample: flattering)")
	fs.StringVar(&f.policy, "policy", "", "speculation policy YAML `file`; none: nothing is speculated")
	fs.StringVar(&f.latency, "tool-latency", "trace", "tool latency `model`: trace, const:800ms, lognormal:MEDIAN:P90 or file:lat.yaml")
	fs.Float64Var(&f.timeScale, "time-scale", 1, "multiply every wait by `f` (0.01 runs 100 times faster; figures stay in trace time)")
	fs.DurationVar(&f.thinkDefault, "think-default", 1800*time.Millisecond, "think time of a step whose llm_ms is missing")
	fs.IntVar(&f.concurrency, "concurrency", 8, "sessions at once (closed loop)")
	fs.StringVar(&f.arrival, "arrival", "closed", "session arrivals: closed (see --concurrency), poisson:RATE or bursty:RATE:SIZE (sessions per second of trace time)")
	fs.IntVar(&f.slots, "slots", 0, "calls the backend runs at once (0: unlimited; the oracle is always unlimited)")
	fs.IntVar(&f.specBudget, "spec-budget", 0, "concurrent speculative executions (0: the engine's default, 32)")
	fs.DurationVar(&f.coldStart, "cold-start", 0, "extra latency of a call to a tool unused for a minute (what pre-warming saves)")
	fs.StringVar(&f.modes, "modes", "", "comma-separated modes to run (default: all)")
	fs.Uint64Var(&f.seed, "seed", 1, "seed of the latency draws and arrivals")
	fs.BoolVar(&f.asJSON, "json", false, "print the report as one JSON object instead of tables")
	fs.StringVar(&f.plot, "plot", "", "write an SVG `file`: session-time CDF per mode and a stall breakdown")
	fs.DurationVar(&f.modelTTFT, "model-ttft", 0, "with --model-tps: the modelled model's time to first token")
	fs.Float64Var(&f.modelTPS, "model-tps", 0, "replay as if the model streamed `N` tokens a second: each step's think time becomes --model-ttft plus its output (text and call arguments, 4 characters a token) over N, and in the ahead mode each call is speculated the moment it is complete in the stream, as the gateway does")
	fs.BoolVar(&f.noStream, "no-stream", false, "with --model-tps: keep the modelled think times but speculate nothing from the stream (to see its gain apart)")
	fs.StringVar(&f.spec, "speculator", "", "add a fast-model speculator to the ahead mode: sim:ACC:LAT (a simulation: the true next call among its guesses with probability ACC, answering LAT after the think window opens) or an OpenAI-compatible base `URL`")
	fs.StringVar(&f.specModel, "speculator-model", "", "the model to ask at --speculator URL")
	fs.StringVar(&f.specKeyEnv, "speculator-key-env", "", "environment `variable` holding --speculator URL's API key (none: no Authorization header)")
	fs.IntVar(&f.replicas, "replicas", 0, "replay over `N` engines (sessions round-robin) that learn from an empty pool: the ahead mode's alone, the fleet mode's together through an embedded fleet (modes default to serial, ahead, fleet, oracle)")
	fs.IntVar(&f.learnEvery, "learn-every", 10, "with --replicas: each replica relearns after every `N` sessions it completes (its checkpoints)")
	fs.BoolVar(&f.learn, "learn", false, "the ahead mode learns online from nothing, as a fresh install does (the built-in default, both parts relearnt every --relearn-every sessions); sessions in file order, the hidden stall of each half reported (modes default to serial, ahead, oracle)")
	fs.IntVar(&f.relearnEvery, "relearn-every", 10, "with --learn: relearn after every `N` sessions")
	fs.StringVar(&f.logLevel, "log-level", "", fmt.Sprintf(logLevelUsage, "warn")+"; the engines' logs")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return usageErr("no trace files given")
	}
	opts, err := f.options(tf)
	if err != nil {
		return err
	}
	if opts.Logger, err = newLogger(e, f.logLevel, "warn"); err != nil {
		return err
	}
	sessions, _, err := tf.load(e, fs.Args())
	if err != nil {
		return err
	}
	if len(sessions) == 0 {
		return errors.New("no sessions to replay (check the trace files and --part)")
	}
	src := bench.Source{Pool: f.patterns, Mining: len(f.mineFrom) > 0, AllowOverlap: f.allowOverlap}
	if f.replicas < 0 {
		return usageErr("--replicas must be 0 (one engine) or more")
	}
	if f.learn {
		if f.replicas > 0 || src.Pool != "" || src.Mining {
			return usageErr("--learn learns from nothing on one engine: no --replicas, --patterns or --mine-from")
		}
		if err := opts.SetLearning(f.relearnEvery); err != nil {
			return usageErr("--relearn-every: %v", err)
		}
	} else if f.replicas > 0 {
		if src.Pool != "" || src.Mining {
			return usageErr("--replicas learns from an empty pool: no --patterns or --mine-from")
		}
		if err := opts.SetReplicas(f.replicas, f.learnEvery); err != nil {
			return usageErr("--replicas, --learn-every: %v", err)
		}
	} else if src.Mining {
		// With a split, the ahead mode is mined on the other part.
		if src.Mine, _, err = tf.other().load(e, f.mineFrom); err != nil {
			return err
		}
	}
	note := ""
	if f.replicas == 0 && !f.learn {
		note, err = opts.SetAhead(sessions, src)
	}
	switch {
	case errors.Is(err, bench.ErrOverlap):
		return usageErr("--mine-from: %v: split with --part, or --allow-overlap", err)
	case errors.Is(err, bench.ErrNoPatterns):
		return usageErr("the ahead mode needs --patterns or --mine-from")
	case err != nil && src.Mining:
		return fmt.Errorf("--mine-from: %w", err)
	case err != nil:
		return err
	case note != "":
		fmt.Fprintf(e.stderr, "ahead bench: %s\n", note)
	}
	if f.spec != "" {
		if err := f.speculator(opts); err != nil {
			return err
		}
	}
	rep, err := runWithProgress(ctx, e, "ahead bench", sessions, opts)
	if err != nil {
		return err
	}
	for _, w := range rep.Warnings {
		fmt.Fprintf(e.stderr, "ahead bench: %s\n", w)
	}
	if f.plot != "" {
		if err := rep.SavePlot(f.plot); err != nil {
			return err
		}
	}
	if f.asJSON {
		return rep.WriteJSON(e.stdout)
	}
	return rep.WriteTable(e.stdout)
}

// options turns the flags into bench options (all but the predictor).
func (f *benchFlags) options(tf traceFlags) (*bench.Options, error) {
	if f.patterns != "" && len(f.mineFrom) > 0 {
		return nil, usageErr("give --patterns or --mine-from, not both")
	}
	if f.timeScale <= 0 {
		return nil, usageErr("--time-scale must be positive")
	}
	if f.concurrency < 1 {
		return nil, usageErr("--concurrency must be at least 1")
	}
	if f.slots < 0 || f.specBudget < 0 || f.coldStart < 0 || f.thinkDefault < 0 || f.modelTPS < 0 || f.modelTTFT < 0 {
		return nil, usageErr("--slots, --spec-budget, --cold-start, --think-default, --model-tps and --model-ttft cannot be negative")
	}
	lat, err := replay.ParseLatency(f.latency, f.seed)
	if err != nil {
		return nil, usageErr("--tool-latency: %v", err)
	}
	arr, err := bench.ParseArrival(f.arrival)
	if err != nil {
		return nil, usageErr("--arrival: %v", err)
	}
	o := &bench.Options{
		Latency:      lat,
		TimeScale:    f.timeScale,
		ThinkDefault: f.thinkDefault,
		Concurrency:  f.concurrency,
		Arrival:      arr,
		Slots:        f.slots,
		SpecBudget:   f.specBudget,
		ColdStart:    f.coldStart,
		Seed:         f.seed,
		Model:        bench.Model{TTFT: f.modelTTFT, TPS: f.modelTPS},
		NoStream:     f.noStream,
	}
	if o.Modes, err = bench.ParseModes(f.modes); err != nil {
		return nil, usageErr("--modes: %v", err)
	}
	if f.policy != "" && f.policy != none {
		if o.Policy, err = policy.Load(f.policy); err != nil {
			return nil, err
		}
	}
	return o, nil
}

// speculator sets the ahead mode's speculator from --speculator and the
// flags that go with it.
func (f *benchFlags) speculator(o *bench.Options) error {
	sim := strings.HasPrefix(f.spec, "sim:")
	if !sim && f.specModel == "" {
		return usageErr("--speculator URL needs --speculator-model (or give sim:ACC:LAT)")
	}
	key := ""
	if !sim && f.specKeyEnv != "" {
		if key = os.Getenv(f.specKeyEnv); key == "" {
			return usageErr("--speculator-key-env: environment variable %s is not set", f.specKeyEnv)
		}
	}
	if err := o.SetSpeculator(f.spec, f.specModel, key); err != nil {
		return usageErr("--speculator: %v", err)
	}
	return nil
}

// runWithProgress runs the benchmark, showing its progress on stderr: a
// bar on a terminal, a line per mode and every 10s otherwise.
func runWithProgress(ctx context.Context, e *env, name string, sessions []trace.Session, o *bench.Options) (*bench.Report, error) {
	m := progress.New(e.stderr, name, &progress.Options{Terminal: e.isTerminal})
	defer m.Done()
	o.Progress = func(p bench.Progress) {
		m.Update(fmt.Sprintf("mode %s (%d/%d), sessions", p.Mode, p.ModeIndex+1, p.Modes), p.Done, p.Total)
	}
	return bench.Run(ctx, sessions, o)
}
