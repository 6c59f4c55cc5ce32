// Package convo predicts tool calls from the conversation: what the user,
// the system prompt and the model's earlier turns said. It is the
// "message" origin of predictions (predict.OriginMessage), beside the
// call-sequence patterns of package pattern.
//
// Mine learns a Model from recorded sessions (calls and messages, read in
// the order they became known, trace.Known) with general means only;
// nothing names a tool, an argument or a domain:
//
//   - Tool choice: a multinomial logistic regression over the lower-case
//     words of the user's recent message(s) and, as features of their
//     own, those of the model's latest message (for the two calls after
//     it: the reply the user answers, the text of the turn that made the
//     previous calls), fitted with the call sequence (the previous call's
//     signature or the session start, and whether the user spoke since)
//     as its offset, so that the words learn only what the context does
//     not say. The words' weight is the
//     one under which each half of a cross-fit predicted the other half's
//     tools best.
//   - Argument values: for each (tool, argument), the shapes of the tokens
//     of the conversation its values came from (character classes
//     collapsed, class set, length), the lower-case words around them, the
//     normalisations agents applied (case, a '#' dropped or added, the
//     number inside, an ISO date a day later or earlier), plus constant
//     values. Dates written in words ("May 24th", "24 May 2024") are
//     read as ISO date tokens (dates.go), and a capitalised word that
//     begins a sentence is marked, since it is rarely a value. A candidate token of the
//     session's recent text (or an earlier call's argument) is scored by a
//     conditional logit over these features, whose few weights are shared
//     by every argument; how recently the token was mentioned, and by
//     whom, are features too. A call puts one value in two arguments as
//     often as the tool's calls did (for most tools, rarely).
//   - Honest probabilities: Mine fits twice on halves of the sessions,
//     predicts the other half, and fits an isotonic map from raw scores to
//     the hit rate observed there; a prediction's P is that map's value.
//
// Privacy (ISSUE-NOTES, "Hear the conversation"): a Model holds no message
// text. From messages it keeps only statistics of alphabetic lower-case
// words seen in at least MineOptions.MinSessions sessions, and shapes; as
// constants only values without a digit, '@', '#' or an upper-case letter.
//
// A Predictor serves a Model online (Hear, Observe, Start, Forget), with a
// bounded window of each session's text.
package convo
