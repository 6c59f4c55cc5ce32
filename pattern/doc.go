// Package pattern holds tool-call patterns, the (C, T, f, p) tuples of the
// PASTE paper: their pool file, the compiled Index, and Online, the
// predictor that serves them (the paper's Algorithm 2).
//
// A pattern says: when a session's recent calls match the context C (a
// sequence of signatures), the next call is to tool T with the arguments
// the value mappings f derive from the payloads of the matched events, with
// probability p. Package mine discovers them from traces; this package
// reads and writes them and evaluates them online:
//
//   - Pool, Load, Save: the pool file, versioned and validated on load;
//     encoding is deterministic, so the same pool gives the same bytes.
//   - Signer: an event's Signature (tool, status, and a discriminator's
//     value, such as a shell command's program).
//   - Index: the pool compiled. Match finds the patterns whose context
//     matches a window of signatures by hash, never scanning the pool;
//     Eval derives the predicted calls' arguments from the matched events'
//     Payloads, reading paths in raw JSON without decoding it; Record
//     keeps the counts behind p up to date as the session goes on, and
//     Snapshot writes them back into a pool.
//   - Online: the pattern predictor (a predict.Predictor). Per session it
//     keeps a bounded window of recent signatures and payloads, looks up the
//     patterns matching it, derives their arguments lazily, ranks the
//     candidate calls, and learns the counts online unless Frozen.
//   - Compiler: the same compilation and evaluation for patterns in no pool
//     yet, with which the miner validates what it finds.
//
// Text is read by line and token: a token is a maximal run of letters,
// digits, non-ASCII bytes and the characters _ . / - ~ + @ # %, so
// identifiers, numbers, paths and ids stay whole.
//
// A minimal use:
//
//	pool, err := pattern.Load("pool.json") // from ahead mine
//	o, err := pattern.NewOnline(pool, nil) // a predict.Predictor
//	preds := o.Observe(ev)                 // after each authoritative call
//
// A pool in use (patterns and conversation model joined, learning new
// patterns, checkpoints) is package learn's.
package pattern
