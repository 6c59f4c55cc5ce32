package main

import (
	"context"
	"fmt"
	"os"
	"path"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The test binary doubles as a small MCP filesystem-like server over
// stdio, so that ahead mcp's own behaviour (launches, checkpoints, exit)
// is tested without Node: TestMain runs it when fakeMCPEnv is set. Each
// launch appends a line to the file named by fakeMCPLaunches, if set.
const (
	fakeMCPEnv      = "AHEAD_TEST_FAKE_MCP"
	fakeMCPLaunches = "AHEAD_TEST_FAKE_MCP_LAUNCHES"
)

type pathArgs struct {
	Path string `json:"path"`
}

func runFakeMCP() int {
	if f := os.Getenv(fakeMCPLaunches); f != "" {
		lf, err := os.OpenFile(f, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Fprintln(lf, os.Getpid())
		lf.Close()
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "fakefs", Version: "1"}, nil)
	ro := &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: new(false)}
	mcp.AddTool(s, &mcp.Tool{Name: "list_directory", Annotations: ro}, func(ctx context.Context, _ *mcp.CallToolRequest, a pathArgs) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "[FILE] README.md\n[DIR] src"}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "read_text_file", Annotations: ro}, func(ctx context.Context, _ *mcp.CallToolRequest, a pathArgs) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "# " + path.Base(path.Dir(a.Path))}}}, nil, nil
	})
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}
