// Package predict turns what an agent just did into ranked guesses of what
// it will call next.
//
// This package is the contract every origin of predictions speaks: a
// Prediction is a concrete call (tool and canonical-able arguments) or a
// tool-only guess (Args nil) with a probability and its Origin; a
// Predictor is asked after every authoritative result (and, if it is a
// Starter or a Hearer, at a session's start and on each message); Merge
// and Join combine several origins' answers into one ranked list. The
// engine, the gateway, ahead bench and ahead eval depend on this contract
// alone. It also holds the reference n-gram baseline (NGram) and Func,
// for tests.
//
// The predictors live with what they know: the pattern predictor in
// package pattern (Online), the conversation model in convo, the fast
// model in speculator; package learn joins a pool's parts into the
// predictor the server, bench and eval serve.
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

// Predictor guesses a session's next calls: the interface every origin's
// predictor implements and every consumer (the engine, ahead bench, ahead
// eval) asks. Observe is called after every authoritative result of every
// session, possibly concurrently; it returns predictions best first.
// Forget drops a session's state. A Predictor may also be a Starter and a
// Hearer.
type Predictor interface {
	Observe(ev trace.Event) []Prediction
	Forget(session string)
}

// Starter is a Predictor that can also guess a session's first call,
// before it makes any (from the patterns whose context is the session
// start, or what was said).
type Starter interface {
	Start(session string) []Prediction
}

// Hearer is a predictor that also listens to the conversation: Hear is
// given each message of a session (trace.KindMessage events) as it becomes
// known and returns the predictions it now makes for the session's next
// calls.
type Hearer interface {
	Hear(msg trace.Event) []Prediction
}

// Declarer is a predictor that also reads the tools declared to a
// session's agent (trace.KindTools events: an MCP upstream's tools/list,
// the tools of a model request), once per source and again when they
// change, and returns the predictions it now makes for the session's next
// calls (a tool never called before may be predicted from its definition).
type Declarer interface {
	Declare(tools trace.Event) []Prediction
}

var (
	_ Predictor = Func(nil)
	_ Declarer  = (*Joined)(nil)
	_ Predictor = (*Joined)(nil)
	_ Starter   = (*Joined)(nil)
	_ Hearer    = (*Joined)(nil)
	_ Starter   = (*NGram)(nil)
)

// Func adapts a function to the Predictor interface: Observe calls
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
