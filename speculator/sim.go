package speculator

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ahead-dev/ahead/callkey"
	"github.com/ahead-dev/ahead/predict"
	"github.com/ahead-dev/ahead/trace"
)

// SimOptions configure a Sim.
type SimOptions struct {
	// Accuracy is the probability that a think window's guesses hold the
	// true next call (ACC of sim:ACC:LAT).
	Accuracy float64
	// Latency is how long after the window opens the guesses arrive (LAT;
	// the benchmark passes it scaled as its other waits).
	Latency time.Duration
	// Seed makes the draws repeatable: a window's guesses depend only on
	// the seed, the session and the window.
	Seed uint64
	// MaxBreadth is the number of guesses per window; 0:
	// DefaultMaxBreadth.
	MaxBreadth int
	// Truth returns the calls of the session's next step while its agent
	// is thinking (every call of the step before has returned), else nil:
	// the harness's knowledge, which a simulation needs. Required.
	Truth func(session string) []trace.Event
	// Offer receives the guesses (engine.Engine.Offer); required.
	Offer OfferFunc
	// Registerer receives the metrics, labelled speculator="simulation";
	// nil: not registered.
	Registerer prometheus.Registerer
}

// Sim is a simulated speculator for the replay benchmark, sim:ACC:LAT —
// a simulation, not a model, and labelled so in its metrics. Per think
// window (once the harness says the agent is thinking), with probability
// Accuracy the true next call (one of the next step's calls) is among its
// guesses; the other guesses are plausible wrong calls — calls the session
// made before, with arguments seen in it, other than the true ones — so
// the work they cause is really wasted. The guesses arrive Latency after
// the window opened, through the same windows, late-answer rule and learned
// P as a Speculator's. It is safe for concurrent use; Close stops it.
type Sim struct {
	opts   SimOptions
	m      *metrics
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // the pending answers

	mu     sync.Mutex // protects led and closed
	led    *ledger
	closed bool
}

var (
	_ predict.Predictor = (*Sim)(nil)
	_ predict.Hearer    = (*Sim)(nil)
)

// NewSim returns a simulated speculator.
func NewSim(opts *SimOptions) (*Sim, error) {
	if opts == nil || opts.Truth == nil || opts.Offer == nil {
		return nil, errors.New("speculator: a simulation needs Truth and Offer")
	}
	o := *opts
	if o.Accuracy < 0 || o.Accuracy > 1 || o.Latency < 0 {
		return nil, fmt.Errorf("speculator: simulation accuracy %v, latency %v: want 0..1 and ≥ 0", o.Accuracy, o.Latency)
	}
	if o.MaxBreadth <= 0 {
		o.MaxBreadth = DefaultMaxBreadth
	}
	m, err := newMetrics(o.Registerer, "simulation")
	if err != nil {
		return nil, err
	}
	s := &Sim{opts: o, m: m, led: newLedger(o.MaxBreadth, 0, m)}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s, nil
}

// ParseSim parses "sim:ACC:LAT" (as in --speculator sim:0.55:300ms).
func ParseSim(spec string) (accuracy float64, latency time.Duration, err error) {
	parts := strings.Split(spec, ":")
	if len(parts) != 3 || parts[0] != "sim" {
		return 0, 0, fmt.Errorf("speculator: %q: want sim:ACC:LAT (sim:0.55:300ms)", spec)
	}
	if accuracy, err = strconv.ParseFloat(parts[1], 64); err != nil || accuracy < 0 || accuracy > 1 {
		return 0, 0, fmt.Errorf("speculator: %q: accuracy %q: want a number from 0 to 1", spec, parts[1])
	}
	if latency, err = time.ParseDuration(parts[2]); err != nil || latency < 0 {
		return 0, 0, fmt.Errorf("speculator: %q: latency %q: want a duration such as 300ms", spec, parts[2])
	}
	return accuracy, latency, nil
}

// Observe opens a think window after a tool result; it returns nil at once.
func (s *Sim) Observe(ev trace.Event) []predict.Prediction {
	if ev.IsCall() {
		s.step(ev.Session, func(now time.Time) { s.led.observe(ev, now) })
	}
	return nil
}

// Hear opens a window on a user message and closes the open one on an
// assistant message; it returns nil at once.
func (s *Sim) Hear(msg trace.Event) []predict.Prediction {
	if msg.IsMessage() {
		s.step(msg.Session, func(now time.Time) { s.led.hear(msg, now) })
	}
	return nil
}

// Forget drops a session.
func (s *Sim) Forget(session string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.led.forget(session)
}

// Stats counts what the simulation did.
func (s *Sim) Stats() Stats { return s.m.stats() }

// Close drops the pending answers and waits for their goroutines.
func (s *Sim) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
}

// step applies an event to the ledger and, if the session's window is
// open and unanswered and the harness says the agent is thinking, draws the
// window's guesses and schedules their arrival.
func (s *Sim) step(session string, apply func(time.Time)) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	apply(time.Now())
	w := s.pendingLocked(session)
	s.mu.Unlock()
	if w == nil {
		return
	}
	truth := s.opts.Truth(session) // outside the lock: the harness has its own
	if len(truth) == 0 {
		return // not thinking yet: a result of the step is still coming
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.pendingLocked(session) != w {
		return
	}
	w.state = winRunning
	gs := s.drawLocked(w, truth)
	s.m.request()
	s.wg.Go(func() {
		select {
		case <-time.After(s.opts.Latency):
		case <-s.ctx.Done():
			return
		}
		s.m.answered()
		s.mu.Lock()
		preds, ok := s.led.answer(w, gs)
		seq := w.seq
		if !ok {
			s.m.lateAnswer()
		}
		s.mu.Unlock()
		if len(preds) == 0 {
			return
		}
		if !s.opts.Offer(w.session, seq, preds) {
			s.mu.Lock()
			s.led.retract(w)
			s.mu.Unlock()
			s.m.lateAnswer()
			return
		}
		s.m.guessed(len(preds))
	})
}

// pendingLocked is the session's open window not yet answered, or nil.
func (s *Sim) pendingLocked(session string) *window {
	ss, ok := s.led.sessions[session]
	if !ok || ss.win == nil || ss.win.closed || ss.win.state != winQueued {
		return nil
	}
	return ss.win
}

// drawLocked picks a window's guesses: with probability Accuracy one of
// the true calls, at a random rank; the rest plausible wrong calls.
func (s *Sim) drawLocked(w *window, truth []trace.Event) []guess {
	h := fnv.New64a()
	h.Write([]byte(w.session))
	rng := rand.New(rand.NewPCG(s.opts.Seed, h.Sum64()^uint64(w.seq)<<20^uint64(w.ordinal)))
	k := s.opts.MaxBreadth
	isTrue := make(map[callkey.Key]bool, len(truth))
	for _, ev := range truth {
		if key, err := callkey.Make(ev.Tool, ev.Args); err == nil {
			isTrue[key] = true
		}
	}
	var wrong []seenCall
	for _, c := range s.led.sessions[w.session].seen {
		if !isTrue[c.key] {
			wrong = append(wrong, c)
		}
	}
	rng.Shuffle(len(wrong), func(i, j int) { wrong[i], wrong[j] = wrong[j], wrong[i] })
	var picks []seenCall
	hit := rng.Float64() < s.opts.Accuracy
	if hit {
		ev := truth[rng.IntN(len(truth))]
		if key, err := callkey.Make(ev.Tool, ev.Args); err == nil {
			canon, _ := callkey.Canonical(ev.Args)
			picks = append(picks, seenCall{tool: ev.Tool, args: canon, key: key})
		}
	}
	for _, c := range wrong {
		if len(picks) == k {
			break
		}
		picks = append(picks, c)
	}
	if hit && len(picks) > 1 {
		r := rng.IntN(len(picks))
		picks[0], picks[r] = picks[r], picks[0]
	}
	gs := make([]guess, len(picks))
	for i, c := range picks {
		gs[i] = guess{rank: i, tool: c.tool, key: c.key, args: c.args}
	}
	return gs
}
