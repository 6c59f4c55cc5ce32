package mcpproxy

import (
	"encoding/json"
	"log/slog"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// downstreamTool returns the tool as the agent sees it: renamed, and with
// schemas clients would reject normalised. MCP (up to 2025-11-25) requires
// both schemas to be JSON objects of "type": "object"; the Go SDK panics on
// such an input schema and the TypeScript SDK's clients refuse the whole
// listing. Servers get this wrong in the wild (a missing schema, a missing
// type, "type": ["object", "null"]), and one bad tool must not hide the
// others, so:
//   - an input schema that is not an object becomes {"type": "object"}
//     (any arguments: the upstream still validates them);
//   - a missing type, or a type list containing "object", becomes "object";
//   - an output schema that is not an object schema is dropped (the result
//     is still returned; only the client's validation of it is lost).
func downstreamTool(t *mcp.Tool, name string, log *slog.Logger) *mcp.Tool {
	out := *t
	out.Name = name
	in, changed := normaliseInputSchema(t.InputSchema)
	if changed {
		log.Warn("normalised the input schema of an upstream tool", "tool", name)
	}
	out.InputSchema = in
	if t.OutputSchema != nil {
		if !isObjectSchema(t.OutputSchema) {
			log.Warn("dropped the output schema of an upstream tool: not an object schema", "tool", name)
			out.OutputSchema = nil
		}
	}
	return &out
}

// normaliseInputSchema returns a schema of "type": "object" for s, and
// whether it had to change it.
func normaliseInputSchema(s any) (any, bool) {
	m, ok := asObject(s)
	if !ok {
		return map[string]any{"type": "object"}, true
	}
	switch typ := m["type"].(type) {
	case string:
		if typ == "object" {
			return s, false
		}
	case nil:
		if _, present := m["type"]; !present {
			m["type"] = "object"
			return m, true
		}
	case []any:
		if slices.Contains(typ, any("object")) {
			m["type"] = "object"
			return m, true
		}
	}
	// Arguments are always an object: a schema for anything else cannot
	// describe them.
	n := map[string]any{"type": "object"}
	if d, ok := m["description"].(string); ok {
		n["description"] = d
	}
	return n, true
}

func isObjectSchema(s any) bool {
	m, ok := asObject(s)
	return ok && m["type"] == "object"
}

// asObject returns a copy of s as a JSON object, if it is one.
func asObject(s any) (map[string]any, bool) {
	if s == nil {
		return nil, false
	}
	b, err := json.Marshal(s)
	if err != nil {
		return nil, false
	}
	var m map[string]any
	if json.Unmarshal(b, &m) != nil || m == nil {
		return nil, false
	}
	return m, true
}

// renderResult is the text form of a tool result kept in traces and mined
// for patterns: the structured content when there is one (a JSON document
// the miner can look into), else the text of the content blocks, with
// non-text blocks as their JSON.
func renderResult(res *mcp.CallToolResult) string {
	if res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			return string(b)
		}
	}
	var parts []string
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, t.Text)
			continue
		}
		if b, err := json.Marshal(c); err == nil {
			parts = append(parts, string(b))
		}
	}
	return strings.Join(parts, "\n")
}
