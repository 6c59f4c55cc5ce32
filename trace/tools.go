package trace

import (
	"bytes"
	"encoding/json"
	"hash/fnv"
	"strings"
	"unicode/utf8"
)

// KindTools is a line of the tools declared to a session's agent (issue
// 24): Tools holds them and From says where they were declared (FromMCP:
// the MCP upstreams' tools/list; FromOpenAI, FromAnthropic: the tools of a
// model request through ahead's gateway; FromHTTP: posted to the HTTP
// API). A session gets one such line per
// source when it first declares its tools and another whenever they
// change; Seq is the number of calls before it. Mining and evaluation of
// calls skip it; predictors that read tool definitions (predict.Declarer)
// are given it.
const KindTools = "tools"

// Sources of tool definitions (Event.From on a KindTools line).
const (
	FromMCP       = "mcp"
	FromOpenAI    = "openai"
	FromAnthropic = "anthropic"
	FromHTTP      = "http"
)

// ToolDef is one declared tool: its name, its description and the JSON
// schema of its arguments, as the agent was told.
type ToolDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema,omitempty"`
}

// Bounds of a KindTools line (BoundTools): a few hundred tools with
// their schemas fit, and no declaration grows a trace, or a predictor's
// state, by more than about MaxTools × (MaxToolDescription +
// MaxToolSchema) = 2.5 MiB; real declarations are far smaller (the npm
// filesystem server's 14 tools: 9 KiB).
const (
	// MaxTools caps the tools a line keeps (the first ones declared).
	MaxTools = 128
	// MaxToolName caps a tool's name, in bytes; a longer one is dropped.
	MaxToolName = 128
	// MaxToolDescription caps a tool's description, in bytes: the rest
	// is cut, at a character's start.
	MaxToolDescription = 2 << 10
	// MaxToolSchema caps a tool's input schema, in bytes once compacted:
	// a larger schema is dropped (the tool keeps its name and
	// description), since a cut schema is no schema.
	MaxToolSchema = 16 << 10
)

// BoundTools returns defs within the bounds above, schemas compacted: the
// first MaxTools tools with a name (the first of two of one name), each
// description cut to MaxToolDescription, a schema that is not a JSON object or is
// larger than MaxToolSchema dropped. It does not modify defs.
func BoundTools(defs []ToolDef) []ToolDef {
	out := make([]ToolDef, 0, min(len(defs), MaxTools))
	seen := make(map[string]bool, len(defs))
	for _, d := range defs {
		if len(out) == MaxTools {
			break
		}
		if d.Name == "" || len(d.Name) > MaxToolName || seen[d.Name] {
			continue
		}
		seen[d.Name] = true
		if len(d.Description) > MaxToolDescription {
			cut := MaxToolDescription
			for cut > 0 && !utf8.RuneStart(d.Description[cut]) {
				cut--
			}
			d.Description = d.Description[:cut]
		}
		d.Description = strings.ToValidUTF8(d.Description, "")
		if s := bytes.TrimSpace(d.InputSchema); len(s) > 0 {
			var buf bytes.Buffer
			if s[0] != '{' || json.Compact(&buf, s) != nil || buf.Len() > MaxToolSchema {
				d.InputSchema = nil
			} else {
				d.InputSchema = json.RawMessage(buf.Bytes())
			}
		} else {
			d.InputSchema = nil
		}
		out = append(out, d)
	}
	return out
}

// ToolsDigest is a 64-bit digest of a declaration (names, descriptions,
// schemas, in order): a session records its tools again only when it
// changes.
func ToolsDigest(defs []ToolDef) uint64 {
	h := fnv.New64a()
	for _, d := range defs {
		for _, s := range []string{d.Name, d.Description, string(d.InputSchema)} {
			h.Write([]byte(s))
			h.Write([]byte{0})
		}
	}
	return h.Sum64()
}

// toolsLine is the shape of a KindTools line.
type toolsLine struct {
	Kind    string    `json:"kind"`
	Session string    `json:"session"`
	Seq     int       `json:"seq"`
	Step    int       `json:"step,omitempty"`
	From    string    `json:"from,omitempty"`
	Tools   []ToolDef `json:"tools"`
	TS      string    `json:"ts,omitempty"`
}

// parseTools checks a line of declared tools: a list of tools, each with
// a name and, if any, a schema that is a JSON object.
func parseTools(raw *rawEvent) (Event, *parseError) {
	if raw.Tools == nil {
		return Event{}, fieldErr("tools", "missing")
	}
	var defs []ToolDef
	if err := json.Unmarshal(raw.Tools, &defs); err != nil {
		return Event{}, fieldErr("tools", "want a list of {name, description, input_schema}: %v", err)
	}
	for i, d := range defs {
		if d.Name == "" {
			return Event{}, fieldErr("tools", "tool %d: name missing or empty", i)
		}
		if s := bytes.TrimSpace(d.InputSchema); len(s) > 0 && s[0] != '{' && string(s) != "null" {
			return Event{}, fieldErr("tools", "tool %q: input_schema: want a JSON object, got %.40s", d.Name, s)
		}
	}
	if defs == nil {
		defs = []ToolDef{}
	}
	return Event{
		Kind: KindTools, Session: *raw.Session, Seq: *raw.Seq, Step: raw.Step,
		From: raw.From, Tools: defs, TS: raw.TS,
	}, nil
}
