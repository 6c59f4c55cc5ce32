package mcpproxy

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ahead-dev/ahead/trace"
)

// declarer is an engine that hears the tools declared to a session
// (engine.Engine.Tools): the definitions predict calls of tools never
// called before (issue 24).
type declarer interface {
	Tools(ctx context.Context, session, from string, defs []trace.ToolDef) error
}

// declare tells the engine the tools a session's listing gave the agent,
// under their downstream names. The engine records them when they are new
// to the session or changed, and ignores them otherwise, so every listing
// may call it.
func (s *session) declare(ctx context.Context, tools []*mcp.Tool) {
	d, ok := s.p.engine().(declarer)
	if !ok {
		return
	}
	defs := make([]trace.ToolDef, 0, len(tools))
	for _, t := range tools {
		def := trace.ToolDef{Name: t.Name, Description: t.Description}
		if t.InputSchema != nil {
			if b, err := json.Marshal(t.InputSchema); err == nil {
				def.InputSchema = b
			}
		}
		defs = append(defs, def)
	}
	if err := d.Tools(ctx, s.id, trace.FromMCP, defs); err != nil {
		s.p.log.Debug("the engine refused the session's tools", "session", s.id, "err", err)
	}
}
