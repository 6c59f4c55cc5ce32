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
	// Origin says where the prediction came from; "" reads as
	// OriginPattern.
	Origin Origin `json:"origin,omitempty"`
	// Repeat says the predictor expects the session to make this call
	// again although it made it already (a pattern of repeats, such as
	// polling). Without it, the engine does not speculate a call whose
	// result the agent already has, unless a write may have changed it.
	Repeat bool `json:"repeat,omitempty"`
	// CallID is the model's id of a call complete in its stream
	// (OriginStream), when the API gave one; it is recorded, never
	// matched on.
	CallID string `json:"call_id,omitempty"`
}

// Origin is where a prediction came from. Every origin reaches the engine
// the same way (a predictor's answer or Engine.Offer); the engine merges
// predictions of one call key and counts what became of them per origin.
type Origin string

const (
	// OriginPattern: a mined pattern matched the session's recent calls.
	OriginPattern Origin = "pattern"
	// OriginMessage: the conversation (what the user or the model said)
	// named the call's tool or arguments.
	OriginMessage Origin = "message"
	// OriginStream: the call was complete in the model's stream before
	// its turn ended.
	OriginStream Origin = "stream"
	// OriginSpeculator: a fast model guessed the call.
	OriginSpeculator Origin = "speculator"
)

// Origins lists the known origins in a stable order, for reports.
var Origins = []Origin{OriginPattern, OriginMessage, OriginStream, OriginSpeculator}

// Or returns o, or OriginPattern when o is empty.
func (o Origin) Or() Origin {
	if o == "" {
		return OriginPattern
	}
	return o
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
