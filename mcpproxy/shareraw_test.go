package mcpproxy

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestShareRawRoundTrip: an upstream's result shared with another replica
// of a fleet (engine.SharedResult.Raw) is, once decoded there, the result
// its own call would have had: withSource hands the agent the same JSON.
func TestShareRawRoundTrip(t *testing.T) {
	b := &upstreamBackend{up: &upstream{Upstream: Upstream{Name: "u"}}}
	for _, r := range []*mcp.CallToolResult{
		{Content: []mcp.Content{&mcp.TextContent{Text: "plain"}}},
		{
			Meta:              mcp.Meta{"upstream": map[string]any{"cached": true}},
			Content:           []mcp.Content{&mcp.TextContent{Text: `{"n":1}`}, &mcp.ImageContent{Data: []byte{1, 2, 3}, MIMEType: "image/png"}},
			StructuredContent: map[string]any{"n": 1.0, "tags": []any{"a", "b"}},
		},
		{Content: []mcp.Content{&mcp.ResourceLink{URI: "file:///a.txt", Name: "a.txt"}}, StructuredContent: []any{"x", 2.0}},
	} {
		data, err := b.EncodeRaw(r)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := b.DecodeRaw(data)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(r)
		got, _ := json.Marshal(raw)
		if diff := cmp.Diff(string(want), string(got)); diff != "" {
			t.Errorf("decoded result differs (-want +got):\n%s", diff)
		}
	}
	if _, err := b.EncodeRaw("text"); err == nil {
		t.Error("EncodeRaw took what is not a tool result")
	}
	if _, err := b.DecodeRaw(json.RawMessage(`{"content":[{"type":"nope"}]}`)); err == nil {
		t.Error("DecodeRaw took content of an unknown type")
	}
}
