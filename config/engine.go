package config

import "github.com/ahead-dev/ahead/engine"

// Options returns the engine options of the engine block, the fields a
// file sets; the caller adds backends, routing, policy, predictor and the
// rest of what runs.
func (e Engine) Options() engine.Options {
	return engine.Options{
		SpecBudget:         e.SpecBudget,
		MinProbability:     e.MinProbability,
		Amplification:      e.Amplification,
		AmplificationBurst: e.AmplificationBurst,
		DefaultTTL:         e.TTL,
		IdleTimeout:        e.IdleTimeout,
		DefaultDuration:    e.DefaultDuration,
		DefaultThink:       e.DefaultThink,
		StartDeadline:      e.StartDeadline,
		MaxSessionEntries:  e.MaxSessionEntries,
		MaxSessionBytes:    e.MaxSessionBytes,
		MaxEntries:         e.MaxEntries,
		MaxBytes:           e.MaxBytes,
		MaxSessions:        e.MaxSessions,
		SweepInterval:      e.SweepInterval,
	}
}
