package gateway

import (
	"context"
	"encoding/json"

	"github.com/ahead-dev/ahead/trace"
)

// declarer is an engine that hears the tools declared to a session
// (engine.Engine.Tools): the definitions predict calls of tools never
// called before (issue 24). The engine records a session's tools once,
// and again when they change; agents send them with every request.
type declarer interface {
	Tools(ctx context.Context, session, from string, defs []trace.ToolDef) error
}

// declare hands the engine the tools of a request, if it has any and the
// engine hears them.
func (g *Gateway) declare(ctx context.Context, session string, a api, body []byte) {
	d, ok := g.opts.Engine.(declarer)
	if !ok {
		return
	}
	defs, from := requestTools(a, body)
	if len(defs) == 0 {
		return
	}
	if err := d.Tools(ctx, session, from, defs); err != nil {
		g.log.Debug("gateway: engine refused the request's tools", "session", session, "err", err)
	}
}

// requestTools returns the function tools a request body declares, and
// the source they count as: chat completions' tools (and the older
// functions), Responses' function tools, Anthropic's custom tools. Tools
// the provider runs itself (web search, code execution, ...) are not the
// agent's calls and are left out.
func requestTools(a api, body []byte) ([]trace.ToolDef, string) {
	switch a {
	case apiChat:
		var req struct {
			Tools []struct {
				Type     string  `json:"type"`
				Function *fnTool `json:"function"`
			} `json:"tools"`
			Functions []fnTool `json:"functions"`
		}
		if json.Unmarshal(body, &req) != nil {
			return nil, ""
		}
		var defs []trace.ToolDef
		for _, t := range req.Tools {
			if t.Type == "function" && t.Function != nil {
				defs = append(defs, t.Function.def())
			}
		}
		for _, f := range req.Functions {
			defs = append(defs, f.def())
		}
		return defs, trace.FromOpenAI
	case apiResponses:
		var req struct {
			Tools []struct {
				Type string `json:"type"`
				fnTool
			} `json:"tools"`
		}
		if json.Unmarshal(body, &req) != nil {
			return nil, ""
		}
		var defs []trace.ToolDef
		for _, t := range req.Tools {
			if t.Type == "function" {
				defs = append(defs, t.def())
			}
		}
		return defs, trace.FromOpenAI
	case apiMessages:
		var req struct {
			Tools []struct {
				Type        string          `json:"type"`
				Name        string          `json:"name"`
				Description string          `json:"description"`
				InputSchema json.RawMessage `json:"input_schema"`
			} `json:"tools"`
		}
		if json.Unmarshal(body, &req) != nil {
			return nil, ""
		}
		var defs []trace.ToolDef
		for _, t := range req.Tools {
			if (t.Type == "" || t.Type == "custom") && t.InputSchema != nil {
				defs = append(defs, trace.ToolDef{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema})
			}
		}
		return defs, trace.FromAnthropic
	}
	return nil, ""
}

// fnTool is an OpenAI function declaration.
type fnTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

func (f fnTool) def() trace.ToolDef {
	return trace.ToolDef{Name: f.Name, Description: f.Description, InputSchema: f.Parameters}
}
