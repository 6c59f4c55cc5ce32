package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/ahead-dev/ahead/predict"
	"github.com/ahead-dev/ahead/trace"
)

// Tools hands the engine the tools declared to a session's agent: from
// (trace.FromMCP, trace.FromOpenAI, trace.FromAnthropic or trace.FromHTTP)
// says where, an MCP upstreams' tools/list, the tools of a model request,
// or the HTTP API's. A session's
// first declaration from a source, and each one that differs from the
// previous (trace.ToolsDigest), is bounded (trace.BoundTools), recorded
// as a line of kind trace.KindTools and given to the predictor if it reads
// definitions (predict.Declarer), whose predictions are speculated on as
// a message's are; the same declaration again (agents send their tools
// with every model request) costs a digest of it and nothing else.
func (e *Engine) Tools(ctx context.Context, sessionID, from string, defs []trace.ToolDef) error {
	switch from {
	case trace.FromMCP, trace.FromOpenAI, trace.FromAnthropic, trace.FromHTTP:
	default:
		return fmt.Errorf("engine: tools declared by %q: want %q, %q, %q or %q", from, trace.FromMCP, trace.FromOpenAI, trace.FromAnthropic, trace.FromHTTP)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	// The declaration as given is what is compared: agents resend the
	// same tools with every request, and the same ones cost a digest, not
	// a bounding (which compacts every schema, and is done outside the
	// lock).
	digest := trace.ToolsDigest(defs)
	now := time.Now()
	var bounded bool
	e.lock()
	for {
		if e.st.closed {
			e.unlock()
			return ErrClosed
		}
		if d, ok := e.sessionLocked(e.resolveLocked(sessionID), now).declared[from]; ok && d == digest {
			e.unlock()
			return nil
		}
		if bounded {
			break
		}
		e.unlock()
		defs, bounded = trace.BoundTools(defs), true
		e.lock()
	}
	sessionID = e.resolveLocked(sessionID)
	s := e.sessionLocked(sessionID, now)
	s, err := e.waitPredictedLocked(ctx, s, maxAfter, now)
	if err != nil {
		e.unlock()
		return err
	}
	if s.declared == nil {
		// At most one digest per source: four.
		s.declared = make(map[string]uint64, 1)
	}
	s.declared[from] = digest
	s.lastActive = now
	e.idleLocked(s)
	ev := trace.Event{
		Kind: trace.KindTools, Session: sessionID, Seq: s.seq, From: from, Tools: defs,
		TS: now.UTC().Format(time.RFC3339Nano),
	}
	if _, ok := e.opts.Predictor.(predict.Declarer); ok && e.policy.Load() != nil {
		e.afterLocked(s, afterWork{kind: afterDeclare, ev: ev, seq: s.seq})
	}
	e.recordLocked(ev)
	e.unlock()
	return nil
}
