// Package pattern holds tool-call patterns, the (C, T, f, p) tuples of the
// PASTE paper: their pool file, and the compiled Index a predictor serves
// them from.
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
//	x, err := pattern.NewIndex(pool)
//	// or, through a predictor: predict.NewOnline(pool, nil)
package pattern
