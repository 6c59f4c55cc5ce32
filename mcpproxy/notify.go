package mcpproxy

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A proxy must send notifications the SDK only sends on its own terms: a
// tools/list_changed to one session (the SDK sends it to every session of a
// server when its own tool set changes), a log message the upstream already
// filtered, a resource update for one session, a roots/list_changed from a
// client whose roots live downstream. The SDK has no call for that, but its
// sending path is open to middleware. So notifyRaw sends a progress
// notification (a public call) carrying the wanted message in its context,
// and sendRaw, installed as sending middleware on the proxy's server and
// clients, replaces it with that message before it reaches the wire.

type rawKey struct{}

type rawMessage struct {
	method string
	params mcp.Params
}

// notifyRaw sends the notification method with params on the session s (a
// *mcp.ServerSession or *mcp.ClientSession) as is.
func notifyRaw(ctx context.Context, s any, method string, params mcp.Params) error {
	ctx = context.WithValue(ctx, rawKey{}, &rawMessage{method: method, params: params})
	switch s := s.(type) {
	case *mcp.ServerSession:
		return s.NotifyProgress(ctx, &mcp.ProgressNotificationParams{})
	case *mcp.ClientSession:
		return s.NotifyProgress(ctx, &mcp.ProgressNotificationParams{})
	}
	panic("notifyRaw: not a session")
}

// sendRaw is the sending middleware of notifyRaw.
func sendRaw(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		m, ok := ctx.Value(rawKey{}).(*rawMessage)
		if !ok || method != "notifications/progress" {
			return next(ctx, method, req)
		}
		// The replacement is sent once: messages this one causes (none
		// for a notification) must not be replaced again.
		ctx = context.WithValue(ctx, rawKey{}, nil)
		switch s := req.GetSession().(type) {
		case *mcp.ServerSession:
			return next(ctx, m.method, &mcp.ServerRequest[mcp.Params]{Session: s, Params: m.params})
		case *mcp.ClientSession:
			return next(ctx, m.method, &mcp.ClientRequest[mcp.Params]{Session: s, Params: m.params})
		}
		return next(ctx, method, req)
	}
}

// errMethodNotFound is the JSON-RPC error for a method no upstream serves.
var errMethodNotFound = &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "method not found"}

// emptyResult is the result of methods that return nothing ({}).
type emptyResult struct {
	mcp.ResultBase
}
