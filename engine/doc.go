// Package engine is ahead's core: it serves authoritative tool calls,
// records them, asks a predictor for the next calls, and runs the safe ones
// speculatively so that a matching call later finds its result ready.
//
// The engine keeps DESIGN.md's promise:
//   - Lossless: a speculative result is handed to an agent only when an
//     authoritative call of the same session has exactly the same call key
//     (tool and canonical arguments), the result is not an error, has not
//     expired, and no write ahead saw may have changed it since: a write
//     invalidates the speculative reads of what it writes (by the policy's
//     hazard rule, policy.Effect.Invalidates) in every session sharing the
//     backend's state, shared results included, when it arrives and when
//     it completes (Backend.PerSession confines it to the writing session).
//     With a fleet (Options.Fleet), writes are announced to the other
//     replicas before they are forwarded and when they complete, and a
//     result other sessions' writes can reach is handed over only after a
//     fence: the replica has applied every write announced before the call.
//     Writes ahead does not see are bounded only by a result's lifetime:
//     the tool's ttl, by default twice the 95th percentile of recent think
//     times, and one think window for volatile tools. A tool that is not
//     cancellable is never cancelled; its invalidated result is discarded.
//   - Safe: only tools the policy allows are speculated, and only at the
//     level it allows (full, dry run, warm-up).
//   - Never slower: the scheduler does not limit authoritative calls on a
//     backend without slots (as without ahead); speculation runs inside its
//     own budget there. Where slots are set, authoritative calls go first,
//     fairly between sessions and in a bounded queue (sched.QueueFullError
//     when full), and speculation runs on slack, preempted when a real call
//     needs the slot. The predictor works on a result after the agent has
//     it, and on a message after Message returned; the session's next call
//     waits for that work only if it arrives first, so it finds the same
//     speculation it would have found had prediction come first (after.go).
//   - Bounded cost: speculative executions per authoritative call average
//     at most Options.Amplification; while the budget is scarce the least
//     likely predictions are declined first (the probability a prediction
//     needs rises with the scarcity). Likely is judged honestly: each
//     origin's p for a tool is scaled by how many of its executions of that
//     tool were claimed against how many its p promised (calibrate.go).
//
// Fronts (the HTTP API, the MCP proxy, the replay benchmark, Go programs)
// all call Engine.Call:
//
//	eng := engine.New(&engine.Options{
//		Backends: map[string]engine.Backend{"local": {Backend: backend.Funcs{...}}},
//		Policy:   pol,
//		Predictor: pred,
//	})
//	defer eng.Close()
//	res, err := eng.Call(ctx, "session-1", "read_file", json.RawMessage(`{"path":"a.txt"}`))
//
// # Layout
//
// All mutable state (sessions, speculative entries, learned durations,
// counters) is one struct, state, behind one door: it is read and changed
// only between e.lock() and e.unlock(), and what must follow a change (the
// records, the predictor forgetting dropped sessions, the metrics, the
// debug lines, waking those who wait for prediction) is queued in the
// state's tail and done by unlock once the lock is released (state.go).
// The other files are the steps a call takes, in order:
//
//   - call.go: accept (Call: key, route, link, session, hazard of a write
//     on arrival, claim) and execute.
//   - link.go: a session linked to the call's (Join), and the names folded
//     away.
//   - after.go: the session's pending prediction, which a call waits for
//     before it looks for its counterpart.
//   - hazard.go: invalidation, the one place a write is decided to
//     invalidate speculative work (on arrival and on completion).
//   - reuse.go: reuse or promotion, the one place a speculative result is
//     handed to an authoritative call.
//   - record.go: finish (account, record) and settle (the end of every
//     speculative execution).
//   - orphan.go: a call whose requester left while it ran runs on, and
//     the same call re-issued in its session joins it (Source Joined).
//   - speculate.go: the predictions after a result or a message (after.go)
//     through policy, merge, budget and utility to the scheduler; the
//     speculative run and its filed result.
//   - fresh.go: lifetimes (volatile windows, TTLs, refresh, the sweeper).
//   - memory.go: the memory and session bounds.
//   - message.go: the conversation side (Message, Offer, ThinkTime).
//   - session.go, stats.go, calibrate.go, origin.go, metrics.go, spans.go:
//     what the steps share (sessions and entries, counters, honest p,
//     origins, Prometheus, OpenTelemetry).
package engine
