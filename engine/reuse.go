package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/ahead-dev/ahead/callkey"
	"github.com/ahead-dev/ahead/policy"
	"github.com/ahead-dev/ahead/sched"
)

// Step 2 of a call, when it has a speculative counterpart: reuse or
// promotion. This file is the one place a speculative result is handed to
// an authoritative call: claimLocked takes the counterpart out of the
// tables (or, for a shared result, reads it) inside the door, and
// fromSpeculation hands it over, completed (Reused) or awaited after
// promotion (Promoted). Anything that must hold before a result is handed
// over (the lossless checks here; a fleet's fence) belongs here.

// fenceWantedLocked reports whether the speculative counterpart of a call
// with key can be reached by other replicas' writes, and so needs a fence
// (Options.Fleet) before it is handed over, and on which backend.
func (e *Engine) fenceWantedLocked(s *session, key callkey.Key, rule policy.Tool) (string, bool) {
	if e.opts.Fleet == nil {
		return "", false
	}
	en := s.entries[key]
	if en == nil && rule.Shared {
		en = e.st.shared[key]
	}
	if en == nil || en.level != policy.LevelFull || !e.crossSession(en) {
		return "", false
	}
	return en.backend, true
}

// claimLocked finds the speculative counterpart of an authoritative call
// and takes it out of the tables: the caller owns it from now on. It returns
// nil when there is none worth waiting for.
func (e *Engine) claimLocked(s *session, key callkey.Key, rule policy.Tool, now time.Time) *entry {
	en := s.entries[key]
	if en == nil && rule.Shared {
		en = e.st.shared[key]
	}
	if en == nil {
		return nil
	}
	if e.staleLocked(en, s) {
		// A volatile result from an earlier think window (or another
		// session's): something may have changed it behind ahead's back.
		e.removeLocked(en, OutcomeExpired)
		return nil
	}
	if en.level != policy.LevelFull {
		// A dry run's result is never handed over; it has done its job
		// of warming caches. Let it finish; the real call executes.
		e.removeLocked(en, OutcomeWarmed)
		return nil
	}
	if en.done && !en.reusableLocked(now) {
		switch {
		case en.err == nil && en.resp.NeedsInput:
			e.removeLocked(en, OutcomeNeedsInput)
		case en.err != nil || en.resp.IsError:
			e.removeLocked(en, OutcomeFailed)
		default:
			e.removeLocked(en, OutcomeExpired)
		}
		return nil
	}
	if en.sess == nil {
		// A shared result stays for other sessions; this one reads it.
		if en.done {
			return en
		}
		return nil // another session's work in flight: do not share a promotion
	}
	e.detachLocked(en)
	return en
}

// fromSpeculation serves the call from its claimed speculative entry: a
// completed result is reused; a queued or running one is promoted and
// awaited. It reports false if the speculation failed and the call must
// execute.
func (c *authCall) fromSpeculation(ctx context.Context, en *entry) (Result, bool, error) {
	e := c.e
	e.lock()
	if en.done {
		// claimLocked only hands out completed entries that are reusable.
		res := c.result(en.resp, Reused, en.finished.Sub(en.started))
		c.toolTime = en.finished.Sub(en.started)
		en.saved = c.toolTime // (a shared one's origins are credited once)
		if en.sess != nil {
			e.settleLocked(en, OutcomeReused)
		} else {
			en.reuses++
		}
		e.unlock()
		return res, true, nil
	}
	e.unlock()

	if !c.gated() {
		// Its requester left before it was promoted (orphan.go).
		en.job.Cancel()
		e.lock()
		e.settleLocked(en, OutcomeCancelled)
		e.unlock()
		return Result{}, false, fmt.Errorf("calling %s: %w", c.tool, context.Canceled)
	}
	if !en.job.Promote(c.s.id) && en.job.State() != sched.Finished {
		// Preempted, cancelled or dropped: it brings nothing, and a
		// cancelled run may take the backend a while to return. Waiting
		// for it would make the call wait on speculation (issue 13).
		e.lock()
		why := OutcomeDropped
		switch {
		case en.job.State() == sched.Preempted:
			why = OutcomePreempted
		case en.ran:
			why = OutcomeCancelled
		}
		e.settleLocked(en, why)
		e.unlock()
		return Result{}, false, nil
	}
	select {
	case <-en.job.Done():
	case <-ctx.Done():
		// The caller left: nobody wants this execution any more.
		en.job.Cancel()
		e.lock()
		e.settleLocked(en, OutcomeCancelled)
		e.unlock()
		return Result{}, false, fmt.Errorf("calling %s: %w", c.tool, ctx.Err())
	}

	e.lock()
	defer e.unlock()
	if !en.done || en.err != nil || en.resp.IsError || en.resp.NeedsInput {
		// Dropped before it ran, or failed: never reuse an error result;
		// nor a request for the user's input, which only the agent's own
		// call may get.
		why := OutcomeFailed
		switch {
		case !en.ran:
			why = OutcomeDropped
		case en.err == nil && en.resp.NeedsInput:
			why = OutcomeNeedsInput
		}
		e.settleLocked(en, why)
		return Result{}, false, nil
	}
	saved := time.Duration(0)
	if en.started.Before(c.arrive) {
		saved = c.arrive.Sub(en.started)
	}
	c.toolTime = en.finished.Sub(en.started)
	en.saved = saved
	e.settleLocked(en, OutcomePromoted)
	return c.result(en.resp, Promoted, saved), true, nil
}
