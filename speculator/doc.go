// Package speculator is ahead's second predictor: a fast language model
// that reads the session's conversation and recent calls and guesses the
// agent's next tool calls (Speculative Actions, arXiv 2510.04371), asked
// only when the guess can pay for itself (SPAgent, arXiv 2511.20048).
//
// A Speculator is a predict.Predictor and predict.Hearer. Observe and Hear
// return nil at once; when a think window opens — a tool result returned,
// a user message arrived — it asks the model in the background, one
// non-streamed chat completion per window, with the tools and tool_choice
// "required" ("auto" once a server refuses that), and takes the answer's
// parallel tool calls (at most MaxBreadth) as guesses. Valid guesses become
// predictions of origin speculator, offered to the engine through
// Options.Offer (engine.Engine.Offer), which runs them under the same
// policy, call-key merge, budget and scheduler as any prediction. Each
// guess's P is learned per (rank, tool) from how often such guesses matched
// the session's next calls (a prior of 0.3 for the first guess, halved per
// rank, until 20 outcomes).
//
// Admission: a window is asked about only when the server is not backing
// us off (after failures or a 429), the measured latency says the answer
// comes before the agent's own call, the expected tool time saved exceeds
// the request's cost against the token budget (MaxTokensPerMinute), and
// a slot is free (MaxConcurrency; earlier steps of a session first, then
// the shortest requests). An answer that arrives after the session's next
// call (or after the model's turn ended) is late and dropped.
//
// Failure never reaches the agent: a server that is down, slow, rate
// limiting or answering nonsense (bad JSON, unknown tools, arguments that
// are not a JSON object or fail the tool's schema) costs a metric and a
// debug log line; the agent's calls run as without it.
//
// What it sends where: every request goes to Options.BaseURL (plus
// "/chat/completions") and carries the session's recent conversation
// (system prompt, user and assistant messages, at most ContextTokens), the
// recent calls with their arguments and outputs, and the tools'
// definitions. It never sends the outputs of tools Options.Private marks
// (the policy's private: true): they are replaced by a placeholder. It
// sends an Authorization header only with Options.APIKey; the
// environment's OPENAI_* variables are never read.
//
// Sim is a simulated speculator for the replay benchmark (sim:ACC:LAT): it
// knows the true next call from the harness and is labelled a simulation
// in its metrics and stats.
package speculator
