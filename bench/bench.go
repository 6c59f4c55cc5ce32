package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ahead-dev/ahead/backend"
	"github.com/ahead-dev/ahead/backend/replay"
	"github.com/ahead-dev/ahead/engine"
	"github.com/ahead-dev/ahead/policy"
	"github.com/ahead-dev/ahead/predict"
	"github.com/ahead-dev/ahead/sched"
	"github.com/ahead-dev/ahead/speculator"
	"github.com/ahead-dev/ahead/trace"
)

// Mode is a way of running the engine over the sessions.
type Mode string

const (
	Serial   Mode = "serial"
	Ahead    Mode = "ahead"
	Oracle   Mode = "oracle"
	Orion    Mode = "orion"
	SpecFaaS Mode = "specfaas"
	AllWrong Mode = "all_wrong"
	AA       Mode = "aa"
)

// Modes lists every mode in the order Run runs them: serial first and its
// A/A repetition last, so that the noise floor spans the whole run.
var Modes = []Mode{Serial, Ahead, Oracle, Orion, SpecFaaS, AllWrong, AA}

// ParseMode returns the mode named s.
func ParseMode(s string) (Mode, error) {
	for _, m := range allModes {
		if string(m) == s {
			return m, nil
		}
	}
	return "", fmt.Errorf("%w: unknown mode %q", ErrConfig, s)
}

// ParseModes parses a comma-separated list of modes ("serial, ahead");
// "" is nil (every mode).
func ParseModes(list string) ([]Mode, error) {
	if list == "" {
		return nil, nil
	}
	var modes []Mode
	for _, name := range strings.Split(list, ",") {
		m, err := ParseMode(strings.TrimSpace(name))
		if err != nil {
			return nil, err
		}
		modes = append(modes, m)
	}
	return modes, nil
}

// ErrConfig is wrapped by errors about Options.
var ErrConfig = errors.New("bench: bad configuration")

// Options configure a benchmark run. The zero value of each field is valid
// and documented, except where a mode needs it.
type Options struct {
	// Predictor returns ahead's predictor, a fresh one for each run of the
	// ahead mode. Required for the ahead mode.
	Predictor func() (predict.Predictor, error)
	// Mine holds sessions the baselines learn tool transitions from
	// before the run (they also learn online). Nil means online only.
	Mine []trace.Session
	// Policy decides what may be speculated, in every mode; nil denies
	// everything (then only the oracle's ceiling is zero too).
	Policy *policy.Policy
	// Latency models tool latency; nil means the recorded durations
	// (replay.Trace).
	Latency replay.Latency
	// TimeScale multiplies every wait; 0 means 1.
	TimeScale float64
	// ThinkDefault is the think time of a step whose llm_ms is missing;
	// 0 means 1.8 s.
	ThinkDefault time.Duration
	// Concurrency is how many sessions run at once in a closed loop; 0
	// means 1. Ignored by open-loop arrivals.
	Concurrency int
	// Arrival is how sessions start; the zero value is a closed loop.
	Arrival Arrival
	// Slots is how many calls the backend runs at once; 0 means
	// unlimited. The oracle always has unlimited slots.
	Slots int
	// SpecBudget caps concurrent speculative executions (the engine's
	// SpecBudget); 0 means the engine's default. The oracle is unlimited.
	SpecBudget int
	// ColdStart is the replay backend's cold-start penalty (the only thing
	// the ORION-like pre-warming can save); 0 means none.
	ColdStart time.Duration
	// Modes to run, in order; nil means Modes.
	Modes []Mode
	// Seed draws the arrival times (the latency model has its own seed).
	Seed uint64
	// Progress, if set, is called after each session.
	Progress func(Progress)
	// Record, if set, receives every event the engine of each mode records:
	// authoritative calls (with how they were served) and speculative
	// executions (with their outcome). It must be safe for concurrent use.
	Record func(m Mode, ev trace.Event)
	// Logger receives the engine's warnings; nil discards them.
	Logger *slog.Logger
	// Speculator, if set, adds a speculator to the ahead mode's
	// predictor (a fast model, or sim:ACC:LAT's simulation): each run of
	// the mode calls it with the engine's Offer and the harness's truth
	// (the calls of a session's next step while its agent thinks, for a
	// simulation), and stops what it returns when the mode ends.
	Speculator func(offer func(session string, seq int, preds []predict.Prediction) bool, truth func(session string) []trace.Event) (predict.Predictor, func(), error)
	// Model, when its TPS is set, replaces recorded think times by a
	// modelled model's stream (--model-ttft, --model-tps): each step's
	// think time is TTFT plus its output tokens at TPS, and in the ahead
	// mode each call is offered (origin stream) as soon as it is complete
	// in the stream, as the gateway does.
	Model Model
	// NoStream keeps the modelled think times but offers nothing from the
	// stream, to see the stream's gain beside the patterns'.
	NoStream bool
	// SpeculatorName says what Speculator is, for the report ("sim:0.55:300ms
	// (simulated)", or the model's URL).
	SpeculatorName string
	// Replicas runs each mode on this many engines, as many ahead
	// replicas would (session i on replica i mod Replicas; baselines share
	// their predictor); 0 means 1. See SetReplicas and the Fleet mode.
	Replicas int
	// LearnEvery, if positive, replays the sessions in file order (the
	// order the learning curve reads), in waves of Replicas × LearnEvery
	// sessions, and between two waves relearns each replica's predictor
	// in the ahead and fleet modes, as a running ahead's checkpoints do
	// (see learningWaves).
	LearnEvery int
	// Halves reports the hidden stall ratio of the first and the second
	// half of the sessions in file order (Report.HiddenStallHalves).
	Halves bool
}

// Progress reports a run's progress.
type Progress struct {
	Mode        Mode
	ModeIndex   int // 0-based
	Modes       int
	Done, Total int // sessions of this mode
}

// drain is how long (trace time) a mode's engine keeps running after its
// last session.
const drain = 10 * time.Second

// unlimited stands for "no limit" where the scheduler wants a number.
const unlimited = 1 << 30

// Run replays sessions in every mode of opts and reports.
func Run(ctx context.Context, sessions []trace.Session, opts *Options) (*Report, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.TimeScale <= 0 {
		o.TimeScale = 1
	}
	if o.ThinkDefault <= 0 {
		o.ThinkDefault = 1800 * time.Millisecond
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 1
	}
	if o.Replicas <= 0 {
		o.Replicas = 1
	}
	if o.Replicas > 1 && o.Speculator != nil {
		return nil, fmt.Errorf("%w: replicas with a speculator are not supported", ErrConfig)
	}
	if o.Latency == nil {
		o.Latency = replay.Trace{}
	}
	if o.Modes == nil {
		o.Modes = Modes
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if len(sessions) == 0 {
		return nil, fmt.Errorf("%w: no sessions to replay", ErrConfig)
	}
	seen := make(map[Mode]bool)
	for _, m := range o.Modes {
		if _, err := ParseMode(string(m)); err != nil {
			return nil, err
		}
		if seen[m] {
			return nil, fmt.Errorf("%w: mode %s given twice", ErrConfig, m)
		}
		seen[m] = true
		if m == Ahead && o.Predictor == nil {
			return nil, fmt.Errorf("%w: the ahead mode needs a predictor (patterns)", ErrConfig)
		}
		if m == Fleet && o.LearnEvery <= 0 {
			return nil, fmt.Errorf("%w: the fleet mode learns: it needs LearnEvery (SetReplicas)", ErrConfig)
		}
	}
	ids := make(map[string]bool, len(sessions))
	for _, s := range sessions {
		if ids[s.ID] {
			return nil, fmt.Errorf("%w: session %q given twice", ErrConfig, s.ID)
		}
		ids[s.ID] = true
	}

	rep := newReport(sessions, &o)
	rep.Warnings = policyWarnings(sessions, o.Policy)
	offsets := o.Arrival.offsets(len(sessions), o.Seed)
	for i, m := range o.Modes {
		mr, err := runMode(ctx, sessions, &o, m, offsets, func(done int) {
			if o.Progress != nil {
				o.Progress(Progress{Mode: m, ModeIndex: i, Modes: len(o.Modes), Done: done, Total: len(sessions)})
			}
		})
		if err != nil {
			return nil, fmt.Errorf("mode %s: %w", m, err)
		}
		rep.Modes = append(rep.Modes, mr)
	}
	rep.summarise()
	return rep, nil
}

// policyWarnings says when the policy lets nothing be speculated: the
// modes would all be serial and the report all zeros (issue 14).
func policyWarnings(sessions []trace.Session, pol *policy.Policy) []string {
	if pol == nil {
		return []string{"no policy: nothing is speculated, every mode runs as serial (give one with --policy)"}
	}
	tools := make(map[string]bool)
	for _, s := range sessions {
		for _, ev := range s.Events {
			tools[ev.Tool] = true
		}
	}
	for t := range tools {
		if pol.Lookup(t).Level() > policy.LevelNone {
			return nil
		}
	}
	return []string{fmt.Sprintf("the policy allows none of the %d tools the sessions call: nothing is speculated, every mode runs as serial", len(tools))}
}

// runMode replays every session once in mode m, on a fresh engine and
// backend.
func runMode(ctx context.Context, sessions []trace.Session, o *Options, m Mode, offsets []time.Duration, progress func(int)) (*ModeResult, error) {
	pol := scalePolicy(o.Policy, o.TimeScale)
	rb := replay.New(sessions, &replay.Options{
		Latency:   o.Latency,
		TimeScale: o.TimeScale,
		Hazard:    hazard(pol),
		ColdStart: o.ColdStart,
	})
	// Every mode orders the calls of a step the same way (see waves), by
	// the operator's policy: without one nothing is speculated and order
	// does not matter.
	var isWrite func(string) bool
	if o.Policy != nil {
		isWrite = func(tool string) bool { return !o.Policy.Lookup(tool).IsReadOnly() }
	}
	agents := make(map[string]*agent, len(sessions))
	order := make([]*agent, len(sessions))
	for i, s := range sessions {
		a := newAgent(s, o.ThinkDefault, o.Model, rb, isWrite)
		agents[s.ID] = a
		order[i] = a
	}

	slots, budget := o.Slots, o.SpecBudget
	if slots <= 0 {
		slots = unlimited
	}
	n := o.Replicas
	// inners[r] is replica r's predictor; learners[r], if not nil, is
	// relearnt every LearnEvery sessions it completed.
	inners := make([]modePredictor, n)
	learners := make([]relearner, n)
	recorders := make([]engine.Recorder, n)
	var inner modePredictor // shared by every replica, if set
	engines := make([]*engine.Engine, n)
	var fr *fleetRun    // the fleet mode's fleet
	var stopSpec func() // stops the speculator, if any
	var specStats interface{ Stats() speculator.Stats }
	switch m {
	case Serial, AA:
		pol = nil
	case Ahead:
		for r := range n {
			p, err := o.Predictor()
			if err != nil {
				return nil, fmt.Errorf("building the predictor: %w", err)
			}
			if c, ok := p.(interface{ Close() error }); ok {
				defer c.Close()
			}
			if o.Speculator != nil { // one replica (Run checks)
				offer := func(session string, seq int, preds []predict.Prediction) bool {
					return engines[0].Offer(session, seq, preds)
				}
				truth := func(session string) []trace.Event {
					if a := agents[session]; a != nil {
						return a.nextStepIfIdle()
					}
					return nil
				}
				spec, stop, err := o.Speculator(offer, truth)
				if err != nil {
					return nil, fmt.Errorf("building the speculator: %w", err)
				}
				// Stopped after the engine's Close below (late answers meet
				// a closed engine), then its figures read; on an error, at
				// return.
				stopSpec = sync.OnceFunc(stop)
				defer stopSpec()
				specStats, _ = spec.(interface{ Stats() speculator.Stats })
				p = predict.Join(p, spec)
			}
			inners[r] = external{p}
			if l, ok := p.(relearner); ok && o.LearnEvery > 0 {
				learners[r] = l
			}
		}
	case Fleet:
		var err error
		fr, err = startFleet(ctx, n)
		if err != nil {
			return nil, fmt.Errorf("starting the fleet: %w", err)
		}
		// Closed after the engines (deferred before them).
		defer fr.close()
		for r := range n {
			inners[r], learners[r] = external{fr.preds[r]}, fr.preds[r]
			var rec func(trace.Event)
			if o.Record != nil {
				rec = func(ev trace.Event) { o.Record(m, ev) }
			}
			recorders[r] = fr.recorder(r, rec)
		}
	case Oracle:
		inner = oracle{}
		slots, budget = unlimited, unlimited
		if pol != nil {
			all := *pol
			all.Dedup = policy.Dedup{Strategy: policy.StrategyAll}
			pol = &all
		}
	case Orion:
		inner = orion{t: newTransitions(o.Mine), k: 3}
	case SpecFaaS:
		inner = specFaaS{t: newTransitions(o.Mine)}
	case AllWrong:
		inner = &allWrong{t: newTransitions(o.Mine), k: 3, n: make(map[string]int)}
	}
	for r := range n {
		eopts := engine.Options{
			Backends: map[string]engine.Backend{
				// The replay backend answers each session from its own
				// recording: its state is per session.
				"replay": {Backend: rb, Limits: sched.Limits{Slots: slots}, PerSession: true},
			},
			Policy:          pol,
			Logger:          o.Logger,
			SpecBudget:      budget,
			DefaultTTL:      scaled(time.Minute, o.TimeScale),
			IdleTimeout:     scaled(10*time.Minute, o.TimeScale),
			DefaultDuration: scaled(500*time.Millisecond, o.TimeScale),
			DefaultThink:    scaled(o.ThinkDefault, o.TimeScale),
			SweepInterval:   max(scaled(time.Second, o.TimeScale), time.Millisecond),
		}
		if in := cmp.Or[modePredictor](inners[r], inner); in != nil {
			eopts.Predictor = &tracker{agents: agents, inner: in}
		}
		switch {
		case recorders[r] != nil:
			eopts.Recorder = recorders[r]
		case o.Record != nil:
			eopts.Recorder = recordFunc(func(ev trace.Event) error { o.Record(m, ev); return nil })
		}
		engines[r] = engine.New(&eopts)
		defer engines[r].Close()
	}

	results := make([]*sessionResult, len(sessions))
	var (
		mu       sync.Mutex // protects done and firstErr
		done     int
		firstErr error
	)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	one := func(i int) {
		r, err := order[i].replay(ctx, engines[i%n], o.TimeScale, m == Ahead && o.Model.TPS > 0 && !o.NoStream)
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			if firstErr == nil {
				firstErr = fmt.Errorf("session %s: %w", sessions[i].ID, err)
			}
			cancel()
			return
		}
		results[i] = r
		done++
		progress(done)
	}
	var wg sync.WaitGroup
	start := time.Now()
	if o.Arrival.open() {
		for i := range order {
			if err := sleep(ctx, time.Until(start.Add(scaled(offsets[i], o.TimeScale)))); err != nil {
				break
			}
			wg.Go(func() { one(i) })
		}
	} else {
		waves := [][]int{longestFirst(order, o.Latency)}
		if o.LearnEvery > 0 {
			waves = learningWaves(len(order), n*o.LearnEvery)
		}
		sem := make(chan struct{}, o.Concurrency)
	loop:
		for w, wave := range waves {
			for _, i := range wave {
				select {
				case sem <- struct{}{}:
				case <-ctx.Done():
					break loop
				}
				wg.Go(func() {
					defer func() { <-sem }()
					one(i)
				})
			}
			if w == len(waves)-1 {
				break
			}
			wg.Wait()
			if err := checkpoint(ctx, learners, fr); err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
				break
			}
		}
	}
	wg.Wait()
	wall := time.Since(start)
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	if firstErr != nil {
		return nil, firstErr
	}
	// Let the speculation the last calls started run out, as it would in
	// a live engine, so that it is counted whatever the timing; then
	// settle everything.
	if err := sleep(ctx, scaled(drain, o.TimeScale)); err != nil {
		return nil, err
	}
	var st engine.Stats
	for _, eng := range engines {
		eng.Close()
		addStats(&st, eng.Stats())
	}
	mr := newModeResult(m, sessions, results, st, rb.Stats(), unscaled(wall, o.TimeScale), o.TimeScale)
	if stopSpec != nil {
		stopSpec()
		if specStats != nil {
			st := specStats.Stats()
			mr.Speculator = &st
		}
	}
	return mr, nil
}

type recordFunc func(trace.Event) error

func (f recordFunc) Record(ev trace.Event) error { return f(ev) }

// longestFirst returns the indices of agents, longest expected session
// first: a closed loop then ends about when its longest session does, not
// a whole long session after the others (the figures do not depend on the
// order, the run's duration does).
func longestFirst(agents []*agent, lat replay.Latency) []int {
	length := make([]time.Duration, len(agents))
	for i, a := range agents {
		for _, st := range a.steps {
			length[i] += st.think
			var slowest time.Duration
			for j := st.start; j < st.end; j++ {
				ev := a.s.Events[j]
				c := replay.Call{Session: a.s.ID, Tool: ev.Tool, Key: a.keys[j], Index: j, Recorded: ev.DurationMS}
				slowest = max(slowest, lat.Duration(c))
			}
			length[i] += slowest
		}
	}
	idx := make([]int, len(agents))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(x, y int) int { return cmp.Compare(length[y], length[x]) })
	return idx
}

// scalePolicy returns a copy of p whose TTLs are scaled like every other
// wait.
func scalePolicy(p *policy.Policy, scale float64) *policy.Policy {
	if p == nil {
		return nil
	}
	q := *p
	sc := func(t policy.Tool) policy.Tool {
		t.TTL = scaled(t.TTL, scale)
		return t
	}
	q.Default = sc(p.Default)
	q.Tools = make(map[string]policy.Tool, len(p.Tools))
	for name, t := range p.Tools {
		q.Tools[name] = sc(t)
	}
	q.Globs = make([]policy.Glob, len(p.Globs))
	for i, g := range p.Globs {
		q.Globs[i] = policy.Glob{Pattern: g.Pattern, Tool: sc(g.Tool)}
	}
	return &q
}

// hazard is the engine's invalidation rule (policy.Invalidates, the one
// hazard rule): a recorded call that is not read-only may change what a
// read returns, unless both name their resources and the resources differ.
// The replay backend answers a speculation across such a write as stale.
func hazard(p *policy.Policy) func(trace.Event, backend.Request) bool {
	return func(w trace.Event, r backend.Request) bool {
		return p.Invalidates(w.Tool, w.Args, r.Tool, r.Args)
	}
}
