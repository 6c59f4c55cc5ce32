package bench

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/ahead-dev/ahead/engine"
	"github.com/ahead-dev/ahead/fleet"
	"github.com/ahead-dev/ahead/learn"
	"github.com/ahead-dev/ahead/pattern"
	"github.com/ahead-dev/ahead/predict"
	"github.com/ahead-dev/ahead/trace"
)

// Fleet is the mode of Options.Replicas engines whose predictors learn
// together, from an empty pool, through a fleet on an embedded NATS server
// (package fleet): every replica publishes what it records, the replica
// holding the mining lease mines the fleet's traffic at its checkpoints
// (Options.LearnEvery) and shares the pool, and every replica loads it at
// once. Beside it the ahead mode, given SetReplicas, runs as many replicas
// that learn alone. It runs only when asked for (Options.Modes).
const Fleet Mode = "fleet"

// allModes orders every mode for reports: Modes, then the fleet.
var allModes = slices.Concat(Modes, []Mode{Fleet})

// SetReplicas replays over n replicas (Options.Replicas) that learn from
// an empty pool, relearning after every `every` sessions each completed
// (Options.LearnEvery): the ahead mode's replicas alone, the fleet mode's
// together. Modes not given become serial, ahead, fleet and oracle.
func (o *Options) SetReplicas(n, every int) error {
	if n < 1 || every < 1 {
		return fmt.Errorf("%w: replicas and sessions between relearning must be at least 1", ErrConfig)
	}
	if o.Speculator != nil {
		return fmt.Errorf("%w: replicas with a speculator are not supported", ErrConfig)
	}
	o.Replicas, o.LearnEvery = n, every
	o.Predictor = func() (predict.Predictor, error) {
		return learn.New(learn.EmptyPool(), &learn.Options{Learn: true})
	}
	if o.Modes == nil {
		o.Modes = []Mode{Serial, Ahead, Fleet, Oracle}
	}
	return nil
}

// SetLearning makes the ahead mode learn online from an empty pool, as a
// fresh install does (the built-in default from the first call, both
// parts relearnt every `every` sessions), on one engine; the sessions
// run in file order and the report gives the hidden stall of each half
// of them (Report.HiddenStallHalves). Modes not given become serial,
// ahead and oracle. ahead bench --learn.
func (o *Options) SetLearning(every int) error {
	if o.Modes == nil {
		o.Modes = []Mode{Serial, Ahead, Oracle}
	}
	if err := o.SetReplicas(1, every); err != nil {
		return err
	}
	o.Halves = true
	return nil
}

// relearner is a predictor that learns at checkpoints (learn.Predictor).
type relearner interface {
	Relearn() (int, error)
}

// fleetRun is the fleet of a run of the fleet mode: the first replica runs
// the embedded server, the others join it on loopback.
type fleetRun struct {
	dir   string
	fs    []*fleet.Fleet
	lrns  []*fleet.Learning
	preds []*learn.Predictor
}

// startFleet starts n replicas that learn together from an empty pool.
func startFleet(ctx context.Context, n int) (_ *fleetRun, err error) {
	dir, err := os.MkdirTemp("", "ahead-bench-fleet-")
	if err != nil {
		return nil, fmt.Errorf("the fleet's store: %w", err)
	}
	fr := &fleetRun{dir: dir}
	defer func() {
		if err != nil {
			fr.close()
		}
	}()
	for r := range n {
		o := &fleet.Options{Name: "bench", Replica: "r" + strconv.Itoa(r)}
		if r == 0 {
			o.Embedded = &fleet.Embedded{Listen: "127.0.0.1:0", Dir: dir}
		} else {
			o.URL = fr.fs[0].URL()
		}
		f, err := fleet.Join(ctx, o)
		if err != nil {
			return nil, err
		}
		fr.fs = append(fr.fs, f)
		lrn, err := f.Learning(ctx, &fleet.LearningOptions{ShareConversation: true})
		if err != nil {
			return nil, err
		}
		fr.lrns = append(fr.lrns, lrn)
		p, err := learn.New(learn.EmptyPool(), &learn.Options{Learn: true, Fleet: lrn})
		if err != nil {
			return nil, err
		}
		fr.preds = append(fr.preds, p)
		if err := lrn.Watch(func(pool *pattern.Pool, pi fleet.PoolInfo) error { return p.Adopt(pool, pi.Mark) }); err != nil {
			return nil, err
		}
	}
	return fr, nil
}

// recorder returns what replica r's engine records with: the fleet's
// trace stream, and also, if set, rec.
func (fr *fleetRun) recorder(r int, rec func(trace.Event)) engine.Recorder {
	lrn := fr.lrns[r]
	return recordFunc(func(ev trace.Event) error {
		if rec != nil {
			rec(ev)
		}
		return lrn.Record(ev)
	})
}

// close stops the replicas, the server's last, and removes its store.
func (fr *fleetRun) close() error {
	var errs []error
	for r := len(fr.fs) - 1; r >= 0; r-- {
		if r < len(fr.preds) {
			errs = append(errs, fr.preds[r].Close())
		}
		if r < len(fr.lrns) {
			fr.lrns[r].Close()
		}
		fr.fs[r].Close()
	}
	errs = append(errs, os.RemoveAll(fr.dir))
	return errors.Join(errs...)
}

// addStats adds b's counters to a (those a report reads).
func addStats(a *engine.Stats, b engine.Stats) {
	a.Calls += b.Calls
	a.Executed += b.Executed
	a.Reused += b.Reused
	a.Promoted += b.Promoted
	a.SpecStarted += b.SpecStarted
	a.Warmups += b.Warmups
	a.Declined += b.Declined
	a.SessionsEvicted += b.SessionsEvicted
	a.Unfenced += b.Unfenced
	a.Saved += b.Saved
	a.Wasted += b.Wasted
	if a.Outcomes == nil {
		a.Outcomes = make(map[engine.Outcome]int64)
	}
	for k, v := range b.Outcomes {
		a.Outcomes[k] += v
	}
	if a.Origins == nil {
		a.Origins = maps.Clone(b.Origins)
		return
	}
	for k, v := range b.Origins {
		o := a.Origins[k]
		o.Offered += v.Offered
		o.Started += v.Started
		o.Reused += v.Reused
		o.Promoted += v.Promoted
		o.Wasted += v.Wasted
		o.Saved += v.Saved
		o.WastedTime += v.WastedTime
		a.Origins[k] = o
	}
}

// curveParts is how many parts of the replay (in session order) a
// learning curve has.
const curveParts = 5

// curve returns m's hidden stall ratio in each fifth of the sessions, in
// replay order: how its learning pays off as it sees more sessions.
func curve(serial, oracle, m *ModeResult) []float64 {
	if m == nil {
		return nil
	}
	n := len(m.stallMS)
	if n < curveParts || len(serial.stallMS) != n || len(oracle.stallMS) != n {
		return nil
	}
	out := make([]float64, curveParts)
	for p := range curveParts {
		var s, o, x float64
		for i := p * n / curveParts; i < (p+1)*n/curveParts; i++ {
			s += serial.stallMS[i]
			o += oracle.stallMS[i]
			x += m.stallMS[i]
		}
		if s > o {
			out[p] = (s - x) / (s - o)
		}
	}
	return out
}

// learningWaves splits n sessions, in file order, into waves of size: the
// replay runs one wave, then every replica checkpoints (relearns), then
// the next. Mining takes seconds of CPU; between waves, it does not delay
// the agents of a time-scaled replay (every mode replays the same waves,
// so the modes that do not learn see the same arrivals).
func learningWaves(n, size int) [][]int {
	var waves [][]int
	for start := 0; start < n; start += size {
		var w []int
		for i := start; i < min(n, start+size); i++ {
			w = append(w, i)
		}
		waves = append(waves, w)
	}
	return waves
}

// checkpoint relearns every replica that learns, in order (with a fleet,
// the first takes the mining lease and keeps it), then, with a fleet,
// waits until every replica serves the pool shared.
func checkpoint(ctx context.Context, learners []relearner, fr *fleetRun) error {
	for r, l := range learners {
		if l == nil {
			continue
		}
		if _, err := l.Relearn(); err != nil {
			return fmt.Errorf("replica %d relearning: %w", r, err)
		}
	}
	if fr != nil {
		return fr.await(ctx)
	}
	return nil
}

// await waits until every replica serves the newest pool shared (each
// loads it as its watch sees it), within a minute.
func (fr *fleetRun) await(ctx context.Context) error {
	var newest uint64
	for _, l := range fr.lrns {
		newest = max(newest, l.Stats().Pool.Version)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for _, l := range fr.lrns {
		for l.Stats().Pool.Version < newest {
			if err := sleep(ctx, time.Millisecond); err != nil {
				return fmt.Errorf("waiting for the replicas to load pool version %d: %w", newest, err)
			}
		}
	}
	return nil
}
