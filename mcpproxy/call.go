package mcpproxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ahead-dev/ahead/engine"
	"github.com/ahead-dev/ahead/sched"
)

// tools/call: the one method that goes through the engine.

// downKey carries the downstream tools/call into the backend, so that an
// authoritative execution forwards its _meta (progress token) upstream.
type downKey struct{}

type downCall struct {
	session string
	tool    string
	meta    mcp.Meta
	// The agent's answers to an input_required result, for the retry.
	inputResponses mcp.InputResponseMap
	requestState   string
	// logLevel is the level a 2026-07-28 agent asked the call's log
	// messages at (nil: none), for an upstream connection of that
	// revision of its own (not a hub: see forward.go, callOn).
	logLevel any
}

// callTool serves a tools/call through the engine.
func (s *session) callTool(ctx context.Context, params *mcp.CallToolParamsRaw) (mcp.Result, error) {
	eng := s.p.engine()
	if _, err := s.toolRoute(ctx, params.Name); err != nil {
		return nil, err
	}
	args := params.Arguments
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage("{}")
	}
	defer s.begin(ctx, params.GetProgressToken())()
	call := func(responses mcp.InputResponseMap, state string) (engine.Result, error) {
		ctx := context.WithValue(ctx, downKey{}, &downCall{session: s.id, tool: params.Name, meta: hopMeta(params.Meta),
			inputResponses: responses, requestState: state, logLevel: params.Meta[mcp.MetaKeyLogLevel]})
		if len(responses) > 0 || state != "" {
			// A retry with the user's input is a call of its own: no
			// speculation of the call without it may answer it.
			return eng.Continue(ctx, s.id, params.Name, args)
		}
		return eng.Call(ctx, s.id, params.Name, args)
	}
	res, err := call(params.InputResponses, params.RequestState)
	for round := 0; err == nil && round < maxInputRounds && s.asksTheOldWay(); round++ {
		// The upstream asks for input an agent of an older revision
		// cannot read: ask it the old way (askold.go).
		r, ok := res.Raw.(*mcp.CallToolResult)
		if !ok || !r.NeedsInput() || len(r.InputRequests) == 0 {
			break
		}
		responses, aerr := s.answerInput(ctx, r.InputRequests)
		if aerr != nil {
			return nil, upstreamErr(aerr)
		}
		res, err = call(responses, r.RequestState)
	}
	if err != nil {
		switch {
		case errors.Is(err, engine.ErrInvalidArgs):
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
		case errors.Is(err, engine.ErrUnknownTool):
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown tool %q", params.Name)}
		}
		if qf, ok := errors.AsType[*sched.QueueFullError](err); ok {
			// The upstream's slots are set and its queue full: the call
			// did not run. Data says when to try again, as HTTP's
			// Retry-After would.
			data, _ := json.Marshal(map[string]int64{"retry_after_ms": qf.RetryAfter.Milliseconds()})
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "ahead: " + err.Error(), Data: data}
		}
		return nil, upstreamErr(err)
	}
	return withSource(res), nil
}

// withSource returns the upstream's result with _meta.ahead.source added.
// The stored result is never changed: a shared result may be handed to
// several sessions.
func withSource(res engine.Result) *mcp.CallToolResult {
	var out mcp.CallToolResult
	if r, ok := res.Raw.(*mcp.CallToolResult); ok && r != nil {
		out = *r
	} else {
		// Not from an MCP upstream (a test backend): render the output.
		out = mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: res.Output}}, IsError: res.Status == "error"}
	}
	if out.Content == nil {
		out.Content = []mcp.Content{}
	}
	meta := maps.Clone(out.Meta)
	if meta == nil {
		meta = make(mcp.Meta)
	}
	// saved_ms is milliseconds with fractions, in every answer, as the
	// HTTP API and ahead bench give it (issue 14).
	ahead := map[string]any{"source": string(res.Source), "saved_ms": float64(res.Saved) / float64(time.Millisecond)}
	meta["ahead"] = ahead
	out.Meta = meta
	return &out
}
