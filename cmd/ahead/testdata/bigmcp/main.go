// Command bigmcp is an MCP server for ahead's memory tests (issue 23),
// built by them as a process of its own: its tool big answers -size bytes
// of text. It speaks MCP on stdio, or with -http on a streamable HTTP
// endpoint of a free loopback port, whose URL it prints on stdout.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	size := flag.Int("size", 8<<20, "bytes of text big answers")
	overHTTP := flag.Bool("http", false, "serve streamable HTTP on a loopback port instead of stdio")
	flag.Parse()
	big := strings.Repeat("x", *size)
	srv := mcp.NewServer(&mcp.Implementation{Name: "big", Version: "1"}, &mcp.ServerOptions{Logger: slog.New(slog.DiscardHandler)})
	mcp.AddTool(srv, &mcp.Tool{Name: "big"}, func(context.Context, *mcp.CallToolRequest, map[string]any) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: big}}}, nil, nil
	})
	if !*overHTTP {
		if err := srv.Run(context.Background(), &mcp.StdioTransport{}); err != nil && !strings.Contains(err.Error(), "EOF") {
			fmt.Fprintln(os.Stderr, "bigmcp:", err)
			os.Exit(1)
		}
		return
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "bigmcp:", err)
		os.Exit(1)
	}
	fmt.Printf("http://%s\n", l.Addr())
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{Logger: slog.New(slog.DiscardHandler)})
	// Runs until the test kills it.
	fmt.Fprintln(os.Stderr, "bigmcp:", http.Serve(l, h))
	os.Exit(1)
}
