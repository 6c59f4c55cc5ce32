// Package backend defines what executes a tool call for ahead, and provides
// the in-process implementation (Go functions). Implementations that reach
// out live in the sub-packages: remote (HTTP), command (local processes),
// replay (recorded outputs, for benchmarks) and the MCP proxy's upstreams.
//
// A Backend distinguishes a tool's own failure (Response.IsError: the tool
// ran and said no; a valid result the agent must see) from a failure to run
// it at all (a non-nil error: the backend is unreachable or broken).
package backend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// ErrUnknownTool is returned (wrapped) for a tool a backend does not have.
var ErrUnknownTool = errors.New("unknown tool")

// ErrTimeout is wrapped by a backend's error when a call got no answer
// within the backend's own per-call timeout (fronts answer 504).
var ErrTimeout = errors.New("backend timeout")

// Request is one tool call to execute.
type Request struct {
	Session string
	Tool    string
	// Args is the canonical JSON object of the arguments.
	Args json.RawMessage
	// Speculative is true for work ahead started on a prediction. Backends
	// may use it for accounting; they must not behave differently.
	Speculative bool
}

// Response is the result of a tool that ran.
type Response struct {
	// Output is the tool's output as returned: a JSON document or text.
	Output string
	// IsError reports the tool's own failure. Error results are passed to
	// the agent but never reused.
	IsError bool
	// NeedsInput reports that the tool has not answered yet: it asks the
	// agent for input first (MCP's input_required result) and answers a
	// retry that carries it. Such a result is passed to the agent that
	// made the call, never reused: a speculative one is discarded
	// (engine.OutcomeNeedsInput), since only the agent may answer for its
	// user.
	NeedsInput bool
	// Raw is an optional front-specific form of the result (the MCP proxy
	// keeps the upstream's whole CallToolResult here). The engine never
	// looks inside; it hands it back with the result.
	Raw any
	// RetryAfter is set when the backend throttled the call (HTTP 429 or
	// a Retry-After header): the scheduler stops speculating on the
	// backend for that long.
	RetryAfter time.Duration
}

// A Backend executes tool calls. Call must return promptly with ctx.Err()
// once ctx is done: cancellation is how speculative work is preempted.
type Backend interface {
	Call(ctx context.Context, req Request) (Response, error)
}

// A Warmer is a Backend that can prepare for a tool without running it
// (start or connect an upstream, open a connection). The engine uses it for
// tool-only predictions and the warmup speculation level. req names the
// session and the tool; its Args are empty and must not be used to run
// anything.
type Warmer interface {
	Warmup(ctx context.Context, req Request) error
}

// RawCodec is a Backend whose results' front-specific form
// (Response.Raw) can travel between the replicas of a fleet, so that a
// result of a tool shared across replicas (engine.ResultSharer) reaches
// another replica's agent in the very form its own call would have had (an
// MCP upstream's whole CallToolResult, structured content and all).
// EncodeRaw returns raw as JSON; DecodeRaw returns what EncodeRaw encoded,
// as Response.Raw. A backend with a Raw and no codec shares its results
// within its replica only.
type RawCodec interface {
	EncodeRaw(raw any) (json.RawMessage, error)
	DecodeRaw(data json.RawMessage) (any, error)
}

// Func is an in-process tool: it receives the canonical arguments and
// returns the output, or an error that becomes an error result.
type Func func(ctx context.Context, args json.RawMessage) (string, error)

// Funcs is an in-process backend: a map from tool name to Go function. A
// function's error becomes an error result (the tool's own failure) with the
// error text as output, except a context error, which is returned as is.
type Funcs map[string]Func

var _ Backend = Funcs(nil)

// Call runs the named function.
func (fs Funcs) Call(ctx context.Context, req Request) (Response, error) {
	f, ok := fs[req.Tool]
	if !ok {
		return Response{}, fmt.Errorf("%w %q", ErrUnknownTool, req.Tool)
	}
	out, err := f(ctx, req.Args)
	if err != nil {
		if ctx.Err() != nil {
			return Response{}, ctx.Err()
		}
		return Response{Output: err.Error(), IsError: true}, nil
	}
	return Response{Output: out}, nil
}
