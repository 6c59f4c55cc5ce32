// Package learn provides a pool in use: the patterns of a pool file (an
// online predictor, package pattern) joined with the conversation model
// it carries (package convo), learning as it serves, and the checkpoints
// that save what it learnt.
//
// The server, ahead bench and ahead eval all serve a pool through New (or
// Open, for a file): one assembly, so what is measured is what runs. With
// Options.Learn a Learner keeps the authoritative calls it observes
// (bounded by MaxCalls and MaxBytes) and mines them for the patterns the
// pool lacks, at every checkpoint (and, for a replay, every RelearnEvery
// ended sessions).
//
// The serving path (engine, gateway) sees only the prediction contract of
// package predict; this package, which imports the offline miner, is
// wired in by the server and the command.
package learn
