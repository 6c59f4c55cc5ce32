// Package gateway is ahead's model side: a transparent relay for the OpenAI
// and Anthropic HTTP APIs that hears the conversation and notices tool calls
// the moment they are complete in the model's stream.
//
// An agent points its SDK's base URL at the gateway (OpenAI: ".../v1";
// Anthropic: the server root) and changes nothing else. The gateway owns:
//
//   - the relay: status, headers (less hop-by-hop ones and Ahead-Session)
//     and body bytes pass unchanged both ways, every read of a streamed
//     body is flushed at once, the agent's disconnect cancels the upstream
//     request, and upstream errors (429 and Retry-After included) reach the
//     agent exactly as sent. Nothing is decompressed or re-encoded.
//   - hearing: the new messages of each chat request (system, user and
//     assistant text; tool results are outputs of calls, not messages) go to
//     Engine.Message. Agents resend the whole history each turn, so "new"
//     means after the longest prefix already heard in that session, compared
//     by a digest per message; an edited history starts over without hearing
//     the messages it kept a second time.
//   - stream-time dispatch: parsers for chat-completions deltas, Responses
//     events and Anthropic content blocks (streamed or not) offer each tool
//     call to Engine.Offer with origin "stream" as soon as its arguments are
//     complete, and report the think time (request sent → first tool call
//     complete) to Engine.ThinkTime. Each call is offered for the seq the
//     agent's call will take (the session's Engine.NextSeq when the request
//     was heard, plus the call's place in the response), so that a call the
//     parse hands over after the agent has moved on is refused as late.
//
// The invariant: the parse runs beside the copy and can never alter or stall
// it. The copy loop hands each read to a bounded buffer without waiting; a
// parser that falls behind, meets a body it cannot parse (compressed streams,
// unknown shapes) or exceeds its limits gives up, and the bytes are relayed
// whole all the same.
//
// A request belongs to a session in one of two ways. Explicitly: its
// Ahead-Session header names the session the agent's tool calls use (the
// HTTP API's session path, the MCP session). Automatically, when Options
// has a Linker: a request without the header gets a session the gateway
// names itself ("llm-…"); a later request that returns the results of calls
// that exactly one such session's model emitted (by call id) continues it;
// and when the agent's call reaches the tool side with the key (tool and
// canonical arguments) of a call exactly one such session's model emitted,
// the engine folds that session into the tool side's (engine.Linker,
// Engine.Join): the work its stream started serves the call, and from then
// on the gateway hears and offers in the tool side's session (what it
// sends under its own name after the fold reaches the tool side's session
// too: the engine remembers the fold). The parser runs beside the copy, so
// the agent's call may reach the tool side first: the Linker keeps such
// calls, and the gateway links when it hears the emission instead
// (Linker.Remember); a request that names no session waits for the
// parsers of the responses that had ended when it began, off the agent's
// path, before it looks for its conversation. Evidence that
// fits two sessions links neither. Without a Linker, a request without the
// header is only relayed.
//
// What the gateway never stores: api keys and other headers (they pass
// through and are never logged), message text, tool arguments, or bodies.
// It keeps, per session, one 64-bit digest per message heard, and the
// Linker keeps 64-bit digests of the call keys, and the call ids, of a bounded
// number of recent calls.
package gateway
