package mcpproxy

import (
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ahead-dev/ahead/backend"
)

// A result of an upstream's tool marked shared travels between the
// replicas of a fleet whole (engine.SharedResult.Raw): the upstream's
// CallToolResult as JSON, content, structured content, _meta and all, so
// that an agent on another replica receives what its own call would have
// returned, not the result rendered to text.

var _ backend.RawCodec = (*upstreamBackend)(nil)

// EncodeRaw encodes an upstream's result (backend.Response.Raw) for the
// fleet.
func (b *upstreamBackend) EncodeRaw(raw any) (json.RawMessage, error) {
	r, ok := raw.(*mcp.CallToolResult)
	if !ok || r == nil {
		return nil, fmt.Errorf("mcpproxy: upstream %q: not a tool result: %T", b.up.Name, raw)
	}
	data, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("mcpproxy: upstream %q: encoding a tool result: %w", b.up.Name, err)
	}
	return data, nil
}

// DecodeRaw decodes what EncodeRaw encoded, on any replica.
func (b *upstreamBackend) DecodeRaw(data json.RawMessage) (any, error) {
	var r mcp.CallToolResult
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("mcpproxy: upstream %q: a shared tool result: %w", b.up.Name, err)
	}
	return &r, nil
}
