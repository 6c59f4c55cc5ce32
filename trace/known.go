package trace

import "iter"

// Known yields a session's calls and messages in the order they became
// known to anyone watching the session live (../shared/traces/README.md):
// a system or user message as soon as it was sent, before the call that
// follows it; an assistant message with a Step only once every call of
// that step was issued, since its text streamed during the same model
// turn that produced those calls. Mining, evaluation and replay all read
// sessions through Known, so that no predictor of step K ever sees the
// assistant text of step K.
func Known(s Session) iter.Seq[Event] {
	return func(yield func(Event) bool) {
		var held []Event // assistant messages whose step is not all issued yet
		// release yields the held messages of steps before step.
		release := func(step int) bool {
			n := 0
			for _, m := range held {
				if m.Step >= step {
					held[n] = m
					n++
				} else if !yield(m) {
					return false
				}
			}
			held = held[:n]
			return true
		}
		const all = int(^uint(0) >> 1)
		mi := 0
		for _, call := range s.Events {
			for ; mi < len(s.Messages) && s.Messages[mi].Seq <= call.Seq; mi++ {
				m := s.Messages[mi]
				if m.Role == RoleAssistant && m.Step > 0 {
					held = append(held, m)
					continue
				}
				// Anything said after a turn's text means the turn ended
				// and its calls were issued.
				if !release(all) || !yield(m) {
					return
				}
			}
			if !release(call.Step) || !yield(call) {
				return
			}
		}
		if !release(all) {
			return
		}
		for _, m := range s.Messages[mi:] {
			if !yield(m) {
				return
			}
		}
	}
}
