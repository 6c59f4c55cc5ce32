// Package mcpproxy puts ahead in front of MCP servers: it is an MCP server
// to the agent (downstream) and an MCP client to the real servers
// (upstreams), and routes every tools/call through the engine, so calls are
// recorded, predicted, speculated and reused, while everything else of the
// protocol passes through.
//
// Sessions. Each downstream session (the stdio connection, or one MCP
// session id over streamable HTTP) is one engine session, and has its own
// client session with every upstream: for a stdio upstream that is one
// process per downstream session, started when the session initializes (its
// capabilities, such as roots, sampling and elicitation, are mirrored from
// the agent's, so they must be known first). Stateful upstreams (a memory
// graph held in the process, a browser, a shell) then behave exactly as if
// the agent had launched them itself, speculative calls run in the state of
// the session that predicted them, and nothing crosses sessions. The one
// exception is an HTTP upstream of MCP 2026-07-28, which keeps no state per
// connection: one connection (its hub) serves every session, each call
// naming its agent (stateless.go).
//
// Requests for input. A speculative call whose result asks for the user's
// input (2026-07-28's input_required) is discarded, never answered for the
// user; the agent's own call gets it as sent (an agent of an older revision
// is asked the old way, askold.go), and its retry with the answers is a
// call of its own (engine.Engine.Continue).
//
// Transparency. tools/list returns the upstreams' tools (optionally with a
// per-upstream name prefix; input schemas MCP clients would reject are
// normalised); tools/call goes through the engine and its result carries
// _meta.ahead.source = executed | reused | promoted. Prompts, resources,
// subscriptions, completion, logging, progress, cancellation, sampling,
// elicitation and roots are forwarded between the agent and the upstream of
// the same session. Results keep the upstream's whole CallToolResult
// (backend.Response.Raw), so a result through ahead equals the result direct.
//
// Failure. An upstream that crashes is restarted with exponential backoff
// when it is next needed; calls meanwhile fail at once with a JSON-RPC error
// naming the upstream and the cause. Nothing waits on a dead process: a
// call in flight when its upstream dies fails with the connection.
//
// Safety. Tool annotations are hints from the server's author: they feed the
// speculation policy only for upstreams the operator trusts (see
// AnnotationPolicy), and the operator's own rules always win. The policy
// follows the annotations: tools a trusted upstream adds or re-annotates
// after startup reach it when a session lists them (Attach, with an engine
// that has SetPolicy).
package mcpproxy
