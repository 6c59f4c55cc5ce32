package bench

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ahead-dev/ahead/learn"
	"github.com/ahead-dev/ahead/pattern"
	"github.com/ahead-dev/ahead/predict"
	"github.com/ahead-dev/ahead/speculator"
	"github.com/ahead-dev/ahead/trace"
)

// UsePool makes pool the ahead mode's patterns, served with the
// conversation model it carries (if any), a fresh predictor per run.
func (o *Options) UsePool(pool *pattern.Pool) {
	o.Predictor = func() (predict.Predictor, error) { return learn.New(pool, nil) }
}

// MinePool mines the ahead mode's pool from sessions: tool-call patterns
// and, when the sessions carry one, the conversation (heard reports that
// they did); then uses it (UsePool). The sessions are also the baselines'
// history (o.Mine).
func (o *Options) MinePool(sessions []trace.Session) (pool *pattern.Pool, heard bool, err error) {
	if len(sessions) == 0 {
		return nil, false, errors.New("no sessions to mine")
	}
	if pool, heard, err = learn.Mine(sessions, nil); err != nil {
		return nil, false, fmt.Errorf("mining: %w", err)
	}
	o.Mine = sessions
	o.UsePool(pool)
	return pool, heard, nil
}

var (
	// ErrOverlap: the sessions to mine include replayed ones (SetAhead),
	// which flatters the ahead mode.
	ErrOverlap = errors.New("bench: the sessions to mine include replayed ones")
	// ErrNoPatterns: the ahead mode is asked for but has no patterns
	// (SetAhead).
	ErrNoPatterns = errors.New("bench: the ahead mode needs patterns")
)

// Source is where the ahead mode's patterns come from (SetAhead): a pool
// file, or sessions to mine.
type Source struct {
	// Pool is a pool file (from ahead mine); "" for none.
	Pool string
	// Mine, with Mining, are the sessions to mine the pool from. They
	// must not be replayed too unless AllowOverlap (in-sample: flattering).
	Mine         []trace.Session
	Mining       bool
	AllowOverlap bool
}

// SetAhead sets the ahead mode's predictor from src, replayed being the
// sessions Run replays: a pool file (UsePool), or a pool mined from
// src.Mine (MinePool; the note then says what was mined and how long it
// took). With neither, the ahead mode is dropped from o.Modes when they
// were not given (the note says so), and it is ErrNoPatterns when they
// name it. Set o.Modes first.
func (o *Options) SetAhead(replayed []trace.Session, src Source) (note string, err error) {
	switch {
	case src.Pool != "" && src.Mining:
		return "", errors.New("bench: a pool file and sessions to mine: give one")
	case src.Pool != "":
		pool, err := pattern.Load(src.Pool)
		if err != nil {
			return "", err
		}
		o.UsePool(pool)
		return "", nil
	case src.Mining:
		if n := Overlap(replayed, src.Mine); n > 0 && !src.AllowOverlap {
			return "", fmt.Errorf("%w: %d of them", ErrOverlap, n)
		}
		t0 := time.Now()
		pool, heard, err := o.MinePool(src.Mine)
		if err != nil {
			return "", err
		}
		what := ""
		if heard {
			what = " and their conversation"
		}
		return fmt.Sprintf("mined %d patterns%s from %d sessions in %.1fs", len(pool.Patterns), what, len(src.Mine), time.Since(t0).Seconds()), nil
	case slices.Contains(o.Modes, Ahead):
		return "", ErrNoPatterns
	case o.Modes == nil:
		o.Modes = slices.DeleteFunc(slices.Clone(Modes), func(m Mode) bool { return m == Ahead })
		return "no patterns: the ahead mode is skipped", nil
	}
	return "", nil
}

// Overlap counts the sessions of mined that are also replayed: mining on
// the replayed sessions flatters the ahead mode.
func Overlap(replayed, mined []trace.Session) int {
	ids := make(map[string]bool, len(replayed))
	for _, s := range replayed {
		ids[s.ID] = true
	}
	n := 0
	for _, s := range mined {
		if ids[s.ID] {
			n++
		}
	}
	return n
}

// SetSpeculator adds a speculator to the ahead mode (Speculator and
// SpeculatorName) from spec: "sim:ACC:LAT" simulates one that has the true
// next call among its guesses with probability ACC and answers LAT after
// the think window opens (scaled by o.TimeScale like every wait, drawn
// from o.Seed); anything else is the base URL of an OpenAI-compatible
// server, asked for model with apiKey ("" sends no Authorization header).
// Set TimeScale and Seed first.
func (o *Options) SetSpeculator(spec, model, apiKey string) error {
	if strings.HasPrefix(spec, "sim:") {
		acc, lat, err := speculator.ParseSim(spec)
		if err != nil {
			return err
		}
		lat = time.Duration(float64(lat) * o.TimeScale)
		seed := o.Seed
		o.SpeculatorName = spec + " (a simulation, not a model)"
		o.Speculator = func(offer func(string, int, []predict.Prediction) bool, truth func(string) []trace.Event) (predict.Predictor, func(), error) {
			s, err := speculator.NewSim(&speculator.SimOptions{Accuracy: acc, Latency: lat, Seed: seed, Truth: truth, Offer: offer})
			if err != nil {
				return nil, nil, err
			}
			return s, s.Close, nil
		}
		return nil
	}
	if model == "" {
		return fmt.Errorf("the speculator at %s needs a model", spec)
	}
	o.SpeculatorName = spec + " (model " + model + ")"
	o.Speculator = func(offer func(string, int, []predict.Prediction) bool, _ func(string) []trace.Event) (predict.Predictor, func(), error) {
		s, err := speculator.New(&speculator.Options{BaseURL: spec, Model: model, APIKey: apiKey, Offer: offer})
		if err != nil {
			return nil, nil, err
		}
		return s, s.Close, nil
	}
	return nil
}
