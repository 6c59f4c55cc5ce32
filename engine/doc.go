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
//	eng := engine.New(engine.Options{
//		Backends: map[string]engine.Backend{"local": {Backend: backend.Funcs{...}}},
//		Policy:   pol,
//		Predictor: pred,
//	})
//	defer eng.Close()
//	res, err := eng.Call(ctx, "session-1", "read_file", json.RawMessage(`{"path":"a.txt"}`))
//
// All shared state (sessions, speculative entries, learned durations) is
// guarded by Engine.mu and changed only by the engine's own methods.
package engine
