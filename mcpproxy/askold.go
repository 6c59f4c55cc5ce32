package mcpproxy

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// An agent of a revision before 2026-07-28 cannot read an input_required
// result, but can be asked the old way: sampling, elicitation and roots
// requests on its session. So when a 2026-07-28 upstream asks such an
// agent's call for input, ahead asks the agent and retries the call with
// its answers (a call of its own, see engine.Engine.Continue), as the Go
// SDK's server does for its own older clients; the agent sees what it
// would see from the upstream of its own revision. A 2026-07-28 agent
// gets the result as the upstream sent it.

// maxInputRounds bounds the rounds of asking before the request for input
// is handed over as it is (the SDK's client gives up after 10).
const maxInputRounds = 10

// asksTheOldWay reports whether requests for input from the upstream must
// be put to the session's agent as server-to-client requests.
func (s *session) asksTheOldWay() bool {
	if s.ss == nil {
		return false
	}
	v := s.protocolVersion()
	return v != "" && v < revisionStateless
}

// answerInput puts the upstream's requests for input to the agent and
// returns its answers. ctx is the agent's call: the requests travel with
// it (on its stream, over HTTP).
func (s *session) answerInput(ctx context.Context, reqs mcp.InputRequestMap) (mcp.InputResponseMap, error) {
	out := make(mcp.InputResponseMap, len(reqs))
	for id, r := range reqs {
		var resp mcp.InputResponse
		var err error
		switch p := r.(type) {
		case *mcp.ElicitParams:
			resp, err = s.ss.Elicit(ctx, p)
		case *mcp.CreateMessageParams:
			resp, err = s.ss.CreateMessage(ctx, p)
		case *mcp.CreateMessageWithToolsParams:
			resp, err = s.ss.CreateMessageWithTools(ctx, p)
		case *mcp.ListRootsParams:
			resp, err = s.ss.ListRoots(ctx, p)
		default:
			return nil, fmt.Errorf("ahead: input request %q of an unknown kind (%T)", id, r)
		}
		if err != nil {
			return nil, fmt.Errorf("asking the agent for input %q: %w", id, err)
		}
		out[id] = resp
	}
	return out, nil
}
