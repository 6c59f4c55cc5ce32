// Package replay is a backend that answers tool calls with the outputs
// recorded in traces, after a modelled latency. The replay benchmark runs
// the real engine against it.
//
// A call is answered with the recorded output of the first recorded call
// with the same call key at or after the session's current position (see
// SetPosition and At). A call that matches nothing recorded — a wrong
// speculation — returns an error result after its modelled latency: wasted
// work that the engine never reuses.
//
// Replay cannot know what a call would have returned before a write that
// the recording made later, so with Options.Hazard set, a call whose match
// lies beyond a write that may change it is answered with a distinct
// "stale" output (an ok result). The engine must have invalidated such a
// speculation before anyone claims it; if it hands it to an agent, the
// benchmark's comparison with the recording reports a mismatch. This turns
// the benchmark's lossless check into a real test of invalidation.
//
// All waits are real-time waits of the modelled trace-time latency
// multiplied by Options.TimeScale, so a benchmark can run many times faster
// than the traces; Stats report trace time.
package replay

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/ahead-dev/ahead/backend"
	"github.com/ahead-dev/ahead/callkey"
	"github.com/ahead-dev/ahead/trace"
)

// ErrUnknownSession is returned (wrapped) for a call of a session the
// backend has no recording of.
var ErrUnknownSession = errors.New("replay: session not recorded")

// Options configure a Backend. The zero value of each field is valid.
type Options struct {
	// Latency models each call's duration in trace time; nil means calls
	// take no time.
	Latency Latency
	// TimeScale multiplies every wait: 0.01 runs 100 times faster than
	// the traces. 0 means 1.
	TimeScale float64
	// Hazard reports whether the recorded call write may change what the
	// call read returns. Nil means recorded calls never change each
	// other's results (no staleness check).
	Hazard func(write trace.Event, read backend.Request) bool
	// ColdStart is the extra trace time a call takes when its tool is
	// cold: neither called nor warmed up within WarmTTL. 0 means tools
	// are always warm (and Warmup does nothing but count).
	ColdStart time.Duration
	// WarmTTL is how long, in trace time, a tool stays warm after its
	// last use; 0 means 60 s.
	WarmTTL time.Duration
}

// Stats count what the backend did. Durations are trace time.
type Stats struct {
	// Calls counts every call; Speculative those marked speculative.
	Calls, Speculative int64
	// Unmatched counts calls that matched no recorded call; Stale those
	// answered with a stale output (see Options.Hazard).
	Unmatched, Stale int64
	// Cancelled counts calls whose context ended before they finished.
	Cancelled int64
	// Warmups counts warm-ups; ColdStarts calls that paid a cold start.
	Warmups, ColdStarts int64
	// Busy is the tool time spent by all calls (cancelled ones up to
	// their cancellation); SpecBusy the part spent on speculative calls.
	Busy, SpecBusy time.Duration
}

// Backend serves recorded sessions. It is safe for concurrent use.
type Backend struct {
	opts    Options
	scale   float64
	rec     map[string]*recording
	typical map[string]time.Duration

	mu    sync.Mutex // protects the positions in rec, warm and stats
	warm  map[string]*warmth
	stats Stats
}

var (
	_ backend.Backend = (*Backend)(nil)
	_ backend.Warmer  = (*Backend)(nil)
)

type recording struct {
	events []trace.Event
	keys   []callkey.Key
	pos    int // guarded by Backend.mu
}

// warmth is one tool's warm state, in real (scaled) time.
type warmth struct {
	lastUse time.Time // the tool is warm until lastUse + WarmTTL
	ready   time.Time // a warm-up in progress makes it warm at ready
}

// New returns a Backend serving sessions. A call's position is an index into
// its session's Events. Events whose arguments are not a canonicalisable
// JSON object can never be matched.
func New(sessions []trace.Session, opts *Options) *Backend {
	b := &Backend{
		rec:     make(map[string]*recording, len(sessions)),
		typical: make(map[string]time.Duration),
		warm:    make(map[string]*warmth),
	}
	if opts != nil {
		b.opts = *opts
	}
	b.scale = b.opts.TimeScale
	if b.scale <= 0 {
		b.scale = 1
	}
	if b.opts.WarmTTL <= 0 {
		b.opts.WarmTTL = time.Minute
	}
	durs := make(map[string][]float64)
	for _, s := range sessions {
		r := &recording{events: s.Events, keys: make([]callkey.Key, len(s.Events))}
		for i, ev := range s.Events {
			if k, err := callkey.Make(ev.Tool, ev.Args); err == nil {
				r.keys[i] = k
			}
			if ev.DurationMS != nil && *ev.DurationMS >= 0 {
				durs[ev.Tool] = append(durs[ev.Tool], *ev.DurationMS)
			}
		}
		b.rec[s.ID] = r
	}
	for tool, ds := range durs {
		slices.Sort(ds)
		b.typical[tool] = time.Duration(ds[len(ds)/2] * float64(time.Millisecond))
	}
	return b
}

// SetPosition sets the session's current position: speculative calls (and
// calls without At) are matched at or after it. The benchmark sets it to
// the first call the agent has not finished.
func (b *Backend) SetPosition(session string, index int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if r, ok := b.rec[session]; ok {
		r.pos = index
	}
}

type positionKey struct{}

// At returns a context that makes a call position itself at index instead
// of the session's current position: the benchmark passes each
// authoritative call's own recorded position, so that it is answered
// exactly as recorded even when a step repeats a call.
func At(ctx context.Context, index int) context.Context {
	return context.WithValue(ctx, positionKey{}, index)
}

// Call answers req from the recording after its modelled latency.
func (b *Backend) Call(ctx context.Context, req backend.Request) (backend.Response, error) {
	r, ok := b.rec[req.Session]
	if !ok {
		return backend.Response{}, fmt.Errorf("%w: %q", ErrUnknownSession, req.Session)
	}
	key, err := callkey.Make(req.Tool, req.Args)
	if err != nil {
		return backend.Response{}, fmt.Errorf("replay: %w", err)
	}
	b.mu.Lock()
	pos := r.pos
	b.mu.Unlock()
	if p, ok := ctx.Value(positionKey{}).(int); ok {
		pos = p
	}
	match := -1
	for i := max(pos, 0); i < len(r.keys); i++ {
		if r.keys[i] == key {
			match = i
			break
		}
	}
	stale := -1
	if match >= 0 && b.opts.Hazard != nil {
		for w := max(pos, 0); w < match; w++ {
			if b.opts.Hazard(r.events[w], req) {
				stale = w
				break
			}
		}
	}

	c := Call{Session: req.Session, Tool: req.Tool, Key: key, Index: match, Typical: b.typical[req.Tool]}
	if match >= 0 {
		c.Recorded = r.events[match].DurationMS
	}
	var d time.Duration
	if b.opts.Latency != nil {
		d = max(b.opts.Latency.Duration(c), 0)
	}

	now := time.Now()
	b.mu.Lock()
	b.stats.Calls++
	if req.Speculative {
		b.stats.Speculative++
	}
	if cold := b.coldLocked(req.Tool, now); cold > 0 {
		b.stats.ColdStarts++
		d += cold
	}
	b.mu.Unlock()

	waited, werr := b.wait(ctx, d)

	b.mu.Lock()
	b.stats.Busy += waited
	if req.Speculative {
		b.stats.SpecBusy += waited
	}
	if werr != nil {
		b.stats.Cancelled++
		b.mu.Unlock()
		return backend.Response{}, werr
	}
	b.useLocked(req.Tool, time.Now())
	switch {
	case match < 0:
		b.stats.Unmatched++
	case stale >= 0:
		b.stats.Stale++
	}
	b.mu.Unlock()

	switch {
	case match < 0:
		return backend.Response{
			Output:  fmt.Sprintf("replay: no recorded call %s at or after position %d of session %s", key, pos, req.Session),
			IsError: true,
		}, nil
	case stale >= 0:
		w := r.events[stale]
		return backend.Response{
			Output: fmt.Sprintf("replay: stale: %s ran before %s (position %d), which the recording made first", key, w.Tool, stale),
		}, nil
	}
	ev := r.events[match]
	return backend.Response{Output: ev.Output, IsError: ev.Status == trace.StatusError}, nil
}

// wait sleeps the scaled d, or until ctx ends. It returns the trace time
// waited.
func (b *Backend) wait(ctx context.Context, d time.Duration) (time.Duration, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if d <= 0 {
		return 0, nil
	}
	t0 := time.Now()
	t := time.NewTimer(b.scaled(d))
	defer t.Stop()
	select {
	case <-t.C:
		return d, nil
	case <-ctx.Done():
		return min(b.unscaled(time.Since(t0)), d), ctx.Err()
	}
}

func (b *Backend) scaled(d time.Duration) time.Duration {
	return time.Duration(float64(d) * b.scale)
}

func (b *Backend) unscaled(d time.Duration) time.Duration {
	return time.Duration(float64(d) / b.scale)
}

// coldLocked returns the cold-start penalty (trace time) of a call of tool
// starting now.
func (b *Backend) coldLocked(tool string, now time.Time) time.Duration {
	if b.opts.ColdStart <= 0 {
		return 0
	}
	w := b.warm[tool]
	switch {
	case w == nil:
		return b.opts.ColdStart
	case !w.lastUse.IsZero() && now.Sub(w.lastUse) <= b.scaled(b.opts.WarmTTL):
		return 0
	case !w.ready.IsZero() && now.Before(w.ready):
		return b.unscaled(w.ready.Sub(now)) // warming up: wait for it
	case !w.ready.IsZero() && now.Sub(w.ready) <= b.scaled(b.opts.WarmTTL):
		return 0
	}
	return b.opts.ColdStart
}

func (b *Backend) useLocked(tool string, now time.Time) {
	if b.opts.ColdStart <= 0 {
		return
	}
	w := b.warm[tool]
	if w == nil {
		w = &warmth{}
		b.warm[tool] = w
	}
	w.lastUse = now
}

// Warmup makes tool warm: it takes the cold-start time unless the tool is
// already warm or warming up.
func (b *Backend) Warmup(ctx context.Context, req backend.Request) error {
	tool := req.Tool
	now := time.Now()
	b.mu.Lock()
	b.stats.Warmups++
	cold := b.coldLocked(tool, now)
	w := b.warm[tool]
	if cold < b.opts.ColdStart || cold == 0 {
		b.mu.Unlock()
		return nil // warm, or a warm-up is already under way
	}
	if w == nil {
		w = &warmth{}
		b.warm[tool] = w
	}
	w.ready = now.Add(b.scaled(cold))
	ready := w.ready
	b.mu.Unlock()

	waited, err := b.wait(ctx, cold)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.stats.Busy += waited
	b.stats.SpecBusy += waited
	if err != nil && w.ready.Equal(ready) {
		w.ready = time.Time{} // the warm-up did not finish
	}
	return err
}

// Stats returns the counts so far.
func (b *Backend) Stats() Stats {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.stats
}
