package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/ahead-dev/ahead/callkey"
	"github.com/ahead-dev/ahead/predict"
	"github.com/ahead-dev/ahead/trace"
)

// ErrInvalidMessage is wrapped by Message for a message it refuses: an
// unknown role or no content.
var ErrInvalidMessage = errors.New("engine: invalid message")

// Message hands the engine a message of a session's conversation as soon
// as it is known: a system prompt or a user message when it is sent, the
// model's own text when its turn ends (never earlier: a turn's text must
// not predict that turn's calls). role is "system", "user" or "assistant";
// content is the text. The message is recorded, kept in the session's
// window of recent conversation (Conversation), and given to the predictor
// if it listens (predict.Hearer), whose predictions are speculated on as
// soon as it has heard it: after Message returns, before the session's
// next call looks for its speculative counterpart (after.go). Tool
// results are not messages: they reach the engine as calls.
func (e *Engine) Message(ctx context.Context, sessionID, role, content string) error {
	switch role {
	case trace.RoleSystem, trace.RoleUser, trace.RoleAssistant:
	default:
		return fmt.Errorf("%w: role %q: want system, user or assistant", ErrInvalidMessage, role)
	}
	if content == "" {
		return fmt.Errorf("%w: no content", ErrInvalidMessage)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	now := time.Now()
	e.lock()
	if e.st.closed {
		e.unlock()
		return ErrClosed
	}
	sessionID = e.resolveLocked(sessionID) // a name folded away (Join)
	s := e.sessionLocked(sessionID, now)
	s, err := e.waitPredictedLocked(ctx, s, maxAfter, now)
	if err != nil {
		e.unlock()
		return err
	}
	s.lastActive = now
	e.idleLocked(s)
	ev := trace.Event{
		Kind: trace.KindMessage, Session: sessionID, Seq: s.seq,
		Role: role, Content: content, TS: now.UTC().Format(time.RFC3339Nano),
	}
	s.hearLocked(ev, e.opts.MaxMessageBytes)
	e.resizeLocked(s)
	e.enforceBudgetLocked(now)
	if _, ok := e.opts.Predictor.(predict.Hearer); ok && e.policy.Load() != nil {
		// Heard after Message returns (after.go), in order with the
		// session's calls.
		e.afterLocked(s, afterWork{kind: afterHear, ev: ev, seq: s.seq})
	}
	e.recordLocked(ev)
	e.unlock()
	return nil
}

// NextCall is Offer's seq for predictions meant for whatever call a session
// makes next, from an origin that cannot know its seq (a call complete in
// the model's stream comes just before the agent's own call).
const NextCall = -1

// Offer hands the engine predictions of a session's next calls from an
// origin that speaks on its own time: a call complete in a model's stream,
// a fast model's guesses. They go through the same policy, merge, budget
// and scheduler as the predictor's, merged by call key with what is
// already speculated (the better probability wins; every origin is
// credited). Offer never blocks on tool work.
//
// seq is the seq of the call the predictions are meant for: the seq after
// the calls whose results the origin has seen, or the Seq of the message it
// heard (NextCall: whatever comes next). Guesses that
// arrive once the agent has begun the step that call opens are late: for a
// later step they would be guesses nobody made, so Offer drops them and
// reports false, and the origin counts them. Calls started before seq in
// the same step as seq-1 (the rest of a step of parallel calls) do not make
// an answer late: the agent thinks after the whole step.
//
// A call complete in the model's stream (OriginStream) is recorded as a
// line of kind trace.KindEmitted, whatever the policy: the model asked for
// it, which is not a call. The agent's call, if it reaches the tool side,
// is recorded there as a call line, once.
func (e *Engine) Offer(sessionID string, seq int, preds []predict.Prediction) bool {
	e.lock()
	if e.st.closed {
		e.unlock()
		return true
	}
	now := time.Now()
	var folded *fold
	if el := e.st.folded[sessionID]; el != nil {
		// A name folded away (Join): its seqs counted another session's
		// calls, so the offer is for whatever call comes next.
		folded = el.Value.(*fold)
		sessionID, seq = folded.into, NextCall
	}
	s, ok := e.st.sessions[sessionID]
	if ok && seq >= 0 && s.seq > seq && s.stepSeq >= seq {
		e.unlock()
		return false
	}
	record := e.opts.Recorder != nil && slices.ContainsFunc(preds, func(p predict.Prediction) bool { return p.Origin == predict.OriginStream })
	if len(preds) == 0 || (!record && e.policy.Load() == nil) {
		e.unlock()
		return true
	}
	if !ok {
		s = e.sessionLocked(sessionID, now)
	}
	next, step := s.emitAt()
	if record {
		// Recorded where the model asked for them: in a name folded away
		// since its request was sent (the agent's call linked it while
		// the response was still parsed), as the name stood then, so
		// that a response's calls are the lines of one session however
		// far behind the stream its parser is; from the link on, requests
		// are sent in the session it was folded into.
		at, atSeq, atStep := sessionID, next, step
		if folded != nil {
			at, atSeq, atStep = folded.from, folded.seq, folded.step
		}
		for _, p := range preds {
			if p.Origin != predict.OriginStream {
				continue
			}
			key, err := callkey.Make(p.Tool, p.Args)
			if err != nil {
				continue // not a call anyone could make: arguments that are not an object
			}
			e.recordLocked(trace.Event{
				Kind: trace.KindEmitted, Session: at, Seq: atSeq, Step: atStep,
				Tool: p.Tool, Args: json.RawMessage(key.Args), CallID: p.CallID, TS: now.UTC().Format(time.RFC3339Nano),
			})
		}
	}
	e.unlock()
	if e.policy.Load() != nil {
		e.speculate(s, next, preds, -1)
	}
	return true
}

// NextSeq returns the seq the session's next call will take: the calls it
// has made so far (0 for a session the engine does not know, or a name
// folded away, under which Offer takes any seq for the next call). An
// origin that learns what the agent knows when the agent asks its model
// (the gateway, as a model request is sent) reads it then and offers what
// the answer holds for that seq and the ones after, so that an offer that
// comes after the agent has moved on is refused as late, not speculated
// for a later step.
func (e *Engine) NextSeq(sessionID string) int {
	e.lock()
	defer e.unlock()
	if s, ok := e.st.sessions[sessionID]; ok {
		return s.seq
	}
	return 0
}

// Conversation returns a copy of the session's window of recent messages
// (of the session a name folded away stands for, see Join),
// oldest first: the first system prompt, the latest user message, and as
// much recent text as MaxMessageBytes holds (the middle goes first).
func (e *Engine) Conversation(sessionID string) []trace.Event {
	e.lock()
	defer e.unlock()
	s, ok := e.st.sessions[e.resolveLocked(sessionID)]
	if !ok {
		return nil
	}
	return append([]trace.Event(nil), s.msgs...)
}

// hearLocked adds a message to the session's window and trims the window to
// max bytes of content: the oldest messages go first, except the first
// system prompt and the latest user message, which stay while they fit.
func (s *session) hearLocked(ev trace.Event, max int64) {
	s.msgs = append(s.msgs, ev)
	s.msgBytes += int64(len(ev.Content))
	for s.msgBytes > max && len(s.msgs) > 1 {
		keep := func(i int) bool {
			m := s.msgs[i]
			return (i == 0 && m.Role == trace.RoleSystem) || (m.Role == trace.RoleUser && s.lastUser() == i)
		}
		drop := -1
		for i := range s.msgs {
			if !keep(i) {
				drop = i
				break
			}
		}
		if drop < 0 {
			drop = 0 // only kept messages left: the oldest goes
		}
		s.msgBytes -= int64(len(s.msgs[drop].Content))
		s.msgs = append(s.msgs[:drop], s.msgs[drop+1:]...)
	}
	if s.msgBytes > max && len(s.msgs) == 1 {
		// One message larger than the window: keep its tail, the most
		// recent text.
		m := &s.msgs[0]
		cut := int64(len(m.Content)) - max
		for cut < int64(len(m.Content)) && !utf8.RuneStart(m.Content[cut]) {
			cut++
		}
		m.Content = m.Content[cut:]
		s.msgBytes = int64(len(m.Content))
	}
}

func (s *session) lastUser() int {
	for i := len(s.msgs) - 1; i >= 0; i-- {
		if s.msgs[i].Role == trace.RoleUser {
			return i
		}
	}
	return -1
}

// ThinkTime gives the engine a model's think time measured where the model
// is seen (the gateway: request sent → first tool call complete in the
// stream), a sample beside those it measures itself between a result and
// the next call. Default result lifetimes follow them. Each step counts
// once: the step's own result→call sample, when its call arrives, is not
// added again (the model side's is the more precise: it excludes the rest
// of the stream and the agent's own overhead).
func (e *Engine) ThinkTime(sessionID string, d time.Duration) {
	if d <= 0 {
		return
	}
	e.lock()
	defer e.unlock()
	if e.st.closed {
		return
	}
	s := e.sessionLocked(e.resolveLocked(sessionID), time.Now())
	s.thinkHeard = true
	e.st.thinks.observe(d)
}
