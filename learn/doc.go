// Package learn provides a pool in use: the patterns of a pool file (an
// online predictor, package pattern) joined with the conversation model
// it carries (package convo), learning as it serves, and the checkpoints
// that save what it learnt.
//
// The server, ahead bench and ahead eval all serve a pool through New (or
// Open, for a file): one assembly, so what is measured is what runs. With
// Options.Learn a Learner keeps the authoritative calls it observes and
// mines them for the patterns the pool lacks, at every checkpoint (and,
// for a replay, every RelearnEvery ended sessions).
//
// A Learner also fills the patterns' tool-only guess of a tool the
// session already called with that call's arguments (repeat.go): agents
// retry and loop, and a pool learnt elsewhere knows the tool before it
// knows where its arguments come from.
//
// Memory: the calls kept for mining are bounded by MaxCalls and MaxBytes
// (arguments, outputs, names and a per-call overhead), one session's by
// MaxSessionBytes, the session in progress included; a live session's
// kept calls are in its SessionBytes, which the engine counts in its
// budget, and EndedBytes tells what the ended sessions' hold (issue 23).
//
// The serving path (engine, gateway) sees only the prediction contract of
// package predict; this package, which imports the offline miner, is
// wired in by the server and the command.
package learn
