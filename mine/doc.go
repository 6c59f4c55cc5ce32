// Package mine mines tool-call patterns from traces: the (C, T, f, p)
// tuples of the PASTE paper, as a pattern.Pool.
//
// A pattern says: when a session's recent calls match the context C (a
// sequence of signatures), the next call is to tool T with the arguments
// the value mappings f derive from the payloads of the matched events, with
// probability p. Everything is discovered from the traces; nothing about
// any tool, argument or domain is written into the code:
//
//   - Signatures are tool and status, refined by a discriminator where one
//     argument, read whole or by its first word, takes few values across
//     sessions and tells what happens next (a shell command's program). The
//     number of values kept is the one that maximises the information about
//     the next call after a BIC penalty, so identifiers, which predict only
//     within their own task, stay out.
//   - Phase I (PrefixSpan over the reversed windows of up to k calls before
//     each call, plus the session start) finds the contexts with at least
//     σ occurrences; gaps are allowed, and a context always ends with the
//     latest call, except the session start alone: the context of a
//     session's first call, whose patterns predict before any call (tool
//     only, or with constant arguments, as nothing precedes).
//   - Phase II searches, for every argument of the calls that follow a
//     context, the events before them for the value's source: a JSON path
//     into an output or earlier arguments (stepping into JSON documents
//     inside strings), a list element (the first not called yet first, in
//     one event or across the recent events of a signature, the lists the
//     session has started on first), a line or token of a text, a
//     normalisation (case, path clean/base/dir) and a constant frame
//     around it (a template), a value of two sources (a value of the
//     same event or of the most recent event of another signature, whole
//     or a word or line of it, a constant, then the rest: a folder + "/" +
//     each listed name, a base URL + "/items/" + each id listed elsewhere,
//     the program an earlier call ran + " " + the script just written), or
//     a constant. The source event is a context element, the most recent
//     event of a signature, or the one before it (a test run before the
//     last, run again after an edit). Mappings must
//     explain varying values (else they are constants in disguise); each
//     candidate is validated over every occurrence of the context, and the
//     best combinations are kept.
//   - Validation defines p: the share of the context's occurrences, among
//     those where f could be evaluated, whose very next call is the
//     predicted one (same call key). Where f cannot be evaluated (a list
//     has run out), the tool's own odds are counted apart, so the predictor
//     knows the agent is moving on. For a pattern predicting one call,
//     the occurrences at which that call had already been made are counted
//     apart too (Repeats): most calls are never repeated, a few always are.
//
// Mining is deterministic: the same traces and options give a
// byte-identical pool file. Text is read by line and token: a token is a
// maximal run of letters, digits, non-ASCII bytes and the characters
// _ . / - ~ + @ # %, so identifiers, numbers, paths and ids stay whole.
//
// Mining is offline: it reads whole traces and writes a pool file. Serving
// the pool (matching contexts, evaluating mappings, counting outcomes) is
// package pattern's, and mining validates its patterns with the same
// evaluation (pattern.Compiler), so p means the same on both sides.
//
// A minimal use:
//
//	sessions, err := trace.Collect(trace.NewReader(nil).Events("traces/"))
//	pool, err := mine.Mine(sessions, nil)
//	err = pool.Save("pool.json")
//	// later, in the sidecar: pattern.NewOnline(pool, nil)
package mine
