// Package predict turns what an agent just did into ranked guesses of what
// it will call next.
//
// A Prediction is a concrete call (tool and canonical-able arguments) or a
// tool-only guess (Args nil) with a probability. The engine asks a predictor
// after every authoritative result; this package provides the pattern-based
// online predictor (the PASTE paper's Algorithm 2), and simple predictors for
// tests and baselines.
package predict

import (
	"encoding/json"

	"github.com/ahead-dev/ahead/trace"
)

// Prediction is one guess of a session's next call.
type Prediction struct {
	Tool string `json:"tool"`
	// Args are the predicted arguments, a JSON object; nil for a tool-only
	// prediction whose arguments are unknown.
	Args json.RawMessage `json:"args,omitempty"`
	// P is the probability that the session's next calls include this one.
	P float64 `json:"p"`
}

// Func adapts a function to the engine's predictor interface: Observe calls
// it, Forget does nothing. A nil Func predicts nothing.
type Func func(ev trace.Event) []Prediction

// Observe calls f.
func (f Func) Observe(ev trace.Event) []Prediction {
	if f == nil {
		return nil
	}
	return f(ev)
}

// Forget does nothing.
func (Func) Forget(session string) {}

// Nop predicts nothing.
var Nop = Func(nil)
