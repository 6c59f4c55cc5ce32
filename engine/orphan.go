package engine

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ahead-dev/ahead/backend"
	"github.com/ahead-dev/ahead/callkey"
)

// Orphans and joined calls (issue 26 item 4). MCP 2026-07-28 has no
// resumable streams: a client whose response stream breaks while a call
// runs sends the same request again. Ahead cannot unsend what it already
// forwarded (a write may have taken effect), and a front whose requests
// end only when their requester can no longer be answered (an HTTP request
// whose connection broke: the HTTP API, a 2026-07-28 request to /mcp)
// cannot tell a broken stream from a request the agent gave up on. Such a
// front marks its calls' contexts with KeepRunning, and an authoritative
// execution of a marked call that has started is not cut when its
// requester leaves: it is orphaned. (A call whose requester can cancel it
// explicitly, an MCP notifications/cancelled of the older revisions or
// over stdio, is not marked: it is cut, as its agent asked.) Call returns
// ctx.Err() at once (cancellation still preempts the caller), and the
// execution runs on, owned by the engine (Close cancels and waits for it),
// and is recorded as any execution. A later call of the same session with
// the same call key joins it (Source Joined): it gets the orphan's result
// instead of executing again, while it runs or up to
// Options.AdoptWindow after it finished (for a read, no longer than a
// speculative result of the tool would live). One call joins an orphan;
// a joiner that leaves in turn hands it back. A call whose twin is still
// being answered to a live requester is not joined: two identical calls of
// a live agent are two calls. A read is joined only if no write ahead saw
// (in any session, on any backend, or announced by a fleet) arrived or
// completed since the orphan arrived: the joiner would otherwise get what
// may predate a write made before it asked. A write is joined whatever
// happened since: it is the same write, and running it twice is what this
// prevents. A call that had not started when its requester left (queued
// for a slot, waiting for a fleet's result) is dropped, as before: nothing
// was sent.
//
// Over older MCP revisions the Go SDK keeps a call whose stream broke
// running (answered to no one): the engine does not see it leave, and the
// client's re-issue is a second call.
//
// Bounds: at most maxRunningOrphans orphans running at once (beyond, a
// call whose requester leaves is cut); at most maxOrphans per session that
// may be joined (beyond, the oldest can no longer be); a finished orphan's result is counted in the
// session's memory (Options.MaxBytes) until it is joined, expires (looked
// at on the session's next call) or the session goes. While it runs, the
// output it reads is counted in Options.MaxBytes too (orphanBudget): the
// budget its requester's front counted it in (backend.Budget: ahead
// serve's answer budget) ends with the request, and 16 orphans each
// reading up to 16 MiB were counted nowhere (issue 23).

type keepRunningKey struct{}

// KeepRunning returns ctx marked so that a call made with it keeps running
// if ctx ends after the call's backend has it (its requester left: a
// broken stream), for the same call re-issued in its session to join (see
// Joined). Unmarked, a call is cut when its ctx ends.
func KeepRunning(ctx context.Context) context.Context {
	return context.WithValue(ctx, keepRunningKey{}, true)
}

// keepsRunning reports whether a call made with ctx may be orphaned.
func keepsRunning(ctx context.Context) bool {
	return ctx.Done() != nil && ctx.Value(keepRunningKey{}) != nil
}

// Joined: the call had been made before in its session by a requester that
// left while it ran (a broken stream re-issued); its result was handed over
// instead of executing again (orphan.go).
const Joined Source = "joined"

// maxOrphans bounds a session's orphans that may be joined.
const maxOrphans = 16

// maxRunningOrphans bounds the orphans running at once, all sessions: a
// call whose requester leaves beyond it is cut, as an unmarked call is, so
// that clients that leave every call they make cannot pile up executions
// (nor, in ahead serve, outputs read after their requests ended, which no
// answer budget counts: at most this many, each within its backend's
// max_response_bytes).
const maxRunningOrphans = 16

// orphanOverhead approximates a kept orphan's memory beside its output.
const orphanOverhead = 512

// Gate states of an authoritative execution (authCall.gate).
const (
	gateWaiting   int32 = iota // not started: the requester may still drop it
	gateStarted                // the backend has it (or a speculative run was promoted)
	gateAbandoned              // the requester left before it started
)

// flight is an authoritative call served on a goroutine of its own, so
// that its requester may leave while it runs (see above).
type flight struct {
	key    callkey.Key
	tool   string
	write  bool   // not read-only: joined whatever was written since
	joinOK bool   // may be joined (Call; a Continue is a call of its own)
	epoch  uint64 // state.writes when the call arrived
	arrive time.Time
	ttl    time.Duration // how long after it finished a read may be joined

	done chan struct{} // closed once res, err and finished are set
	// Set before done closes, under the lock.
	res      Result
	err      error
	finished time.Time
	took     time.Duration // the tool's run
	size     int64         // counted in the session's own memory while kept

	orphaned bool        // its requester left while it ran: Engine.orphans owns it
	joined   bool        // a call joined it and waits for it (not among the session's orphans)
	stop     func() bool // unhooks it from Close once orphaned
	budget   *orphanBudget
}

// orphanBudget counts the output an execution served on its own goroutine
// (serveOwned) reads: in the budget its requester's context carried
// (inner; nil: none) while the requester waits, in the engine's memory
// (Engine.st.orphanReading, within Options.MaxBytes) once it is orphaned,
// what it had read until then included; released when it finishes (its
// result is then counted as the session's, keepOrphanLocked). Over
// MaxBytes, the engine frees what it can (speculative results, idle
// sessions) rather than wait: no one would release bytes for an orphan.
type orphanBudget struct {
	e     *Engine
	inner backend.Budget

	mu       sync.Mutex // protects n and orphaned; taken after the engine's lock, never before
	n        int64      // read before it was orphaned
	orphaned bool

	counted int64 // in Engine.st.orphanReading; under the engine's lock
}

var _ backend.Budget = (*orphanBudget)(nil)

func (b *orphanBudget) Grow(ctx context.Context, n int64) error {
	b.mu.Lock()
	orphaned := b.orphaned
	b.mu.Unlock()
	if !orphaned {
		if b.inner != nil {
			if err := b.inner.Grow(ctx, n); err != nil {
				return err
			}
		}
		b.mu.Lock()
		if !b.orphaned {
			b.n += n
			b.mu.Unlock()
			return nil
		}
		b.mu.Unlock() // orphaned meanwhile: the engine counts it
	}
	e := b.e
	e.lock()
	defer e.unlock()
	b.counted += n
	e.st.orphanReading += n
	e.enforceBudgetLocked(time.Now())
	return nil
}

// Shrink gives back n of the bytes counted (a stdio MCP upstream's reader
// counted a message in the wrong call, mcpproxy).
func (b *orphanBudget) Shrink(n int64) {
	b.mu.Lock()
	if !b.orphaned {
		n = min(n, b.n)
		b.n -= n
		b.mu.Unlock()
		if s, ok := b.inner.(interface{ Shrink(int64) }); ok {
			s.Shrink(n)
		}
		return
	}
	b.mu.Unlock()
	e := b.e
	e.lock()
	defer e.unlock()
	n = min(n, b.counted)
	b.counted -= n
	e.st.orphanReading -= n
}

// orphanLocked moves what b counted to the engine's memory: its requester
// left.
func (b *orphanBudget) orphanLocked() {
	b.mu.Lock()
	b.orphaned = true
	n := b.n
	b.mu.Unlock()
	b.counted += n
	b.e.st.orphanReading += n
}

// releaseLocked uncounts what b counted in the engine's memory: the
// execution finished.
func (b *orphanBudget) releaseLocked() {
	b.e.st.orphanReading -= b.counted
	b.counted = 0
}

// gated reports whether the execution may start, marking it started: false
// once the requester left before it did.
func (c *authCall) gated() bool {
	return c.gate == nil || c.gate.CompareAndSwap(gateWaiting, gateStarted) || c.gate.Load() == gateStarted
}

// serveOwned serves call on a goroutine of its own, awaited until ctx is
// done, and returns its result; with ctx done, the execution is dropped if
// it has not started, orphaned if it has (see the top of this file). The
// goroutine is the requester's until then, the engine's after (Close
// cancels orphans and waits for them).
func (e *Engine) serveOwned(ctx context.Context, call *authCall, b backend.Backend, en *entry, after func(ctx context.Context, res Result, err error)) (Result, error) {
	fl := &flight{
		key: call.key, tool: call.tool, write: !call.rule.IsReadOnly(), joinOK: !call.own,
		epoch: call.epoch, ttl: call.ttl, arrive: call.arrive, done: make(chan struct{}),
	}
	call.gate = new(atomic.Int32)
	fl.budget = &orphanBudget{e: e, inner: backend.BudgetOf(ctx)}
	ectx, cancel := context.WithCancel(backend.WithBudget(context.WithoutCancel(ctx), fl.budget))
	go func() {
		defer cancel()
		res, err := call.serve(ectx, b, en)
		call.finish(res, err)
		after(ectx, res, err)
		now := time.Now()
		e.lock()
		fl.res, fl.err, fl.finished, fl.took = res, err, now, call.toolTime
		orphaned := fl.orphaned
		if orphaned {
			e.st.orphansRunning--
			fl.budget.releaseLocked()
			if !fl.joined {
				e.keepOrphanLocked(call.s, fl)
			}
		}
		close(fl.done)
		e.unlock()
		if orphaned {
			fl.stop()
			e.orphans.Done()
		}
	}()

	select {
	case <-fl.done:
		return fl.res, fl.err
	case <-ctx.Done():
	}
	e.lock()
	select {
	case <-fl.done:
		e.unlock()
	default:
		if call.gate.CompareAndSwap(gateWaiting, gateAbandoned) || e.st.closed || e.st.orphansRunning >= maxRunningOrphans {
			// Nothing was sent, or the engine is closing, or too many
			// run on already: cut it, as before; it returns at once.
			e.unlock()
			cancel()
			<-fl.done
		} else {
			fl.orphaned = true
			fl.budget.orphanLocked()
			e.enforceBudgetLocked(time.Now())
			fl.stop = context.AfterFunc(e.life, cancel)
			e.orphans.Add(1)
			e.st.orphansRunning++
			e.st.totals.Orphaned++
			e.keepOrphanLocked(call.s, fl)
			e.unlock()
			if e.debug {
				e.opts.Logger.Debug("orphaned", "session", call.s.id, "seq", call.seq, "tool", call.tool,
					"args", argsDigest(call.key.Args))
			}
		}
	}
	return Result{}, fmt.Errorf("calling %s: %w", call.tool, ctx.Err())
}

// keepOrphanLocked files an orphan of session s where a later call of the
// same key may join it, or takes it out if it can no longer be joined; a
// finished one's result is counted in the session's memory.
func (e *Engine) keepOrphanLocked(s *session, fl *flight) {
	if s.gone || !fl.joinOK {
		return
	}
	i := slices.Index(s.orphans, fl)
	if i < 0 {
		if len(s.orphans) >= maxOrphans {
			e.dropOrphanLocked(s, 0)
		}
		s.orphans = append(s.orphans, fl)
		i = len(s.orphans) - 1
	}
	if fl.finished.IsZero() {
		return
	}
	if !e.joinableLocked(fl, fl.finished) {
		e.dropOrphanLocked(s, i)
		return
	}
	fl.size = int64(len(fl.res.Output)+len(fl.key.Args)) + orphanOverhead
	s.orphanBytes += fl.size
	e.resizeLocked(s)
}

// dropOrphanLocked takes the i-th orphan of s out: no call joins it.
func (e *Engine) dropOrphanLocked(s *session, i int) {
	fl := s.orphans[i]
	s.orphans = slices.Delete(s.orphans, i, i+1)
	if fl.size > 0 {
		s.orphanBytes -= fl.size
		fl.size = 0
		e.resizeLocked(s)
	}
}

// joinableLocked reports whether a call arriving now may join fl.
func (e *Engine) joinableLocked(fl *flight, now time.Time) bool {
	if e.opts.AdoptWindow < 0 {
		return false
	}
	if !fl.write && fl.epoch != e.st.writes {
		return false // a write since: the result may predate it
	}
	if fl.finished.IsZero() {
		return true // still running
	}
	if fl.err != nil {
		return false // not served (backend unreachable): the call runs again
	}
	window := e.opts.AdoptWindow
	if !fl.write {
		window = fl.ttl
	}
	return now.Sub(fl.finished) < window
}

// adoptLocked finds the orphan a call of key in s arriving now joins and
// takes it out (one call joins an orphan); it drops the orphans that can
// no longer be joined on the way.
func (e *Engine) adoptLocked(s *session, key callkey.Key, now time.Time) *flight {
	var found *flight
	for i := 0; i < len(s.orphans); {
		fl := s.orphans[i]
		if !e.joinableLocked(fl, now) {
			e.dropOrphanLocked(s, i)
			continue
		}
		if found == nil && fl.key == key {
			found = fl
			e.dropOrphanLocked(s, i)
			continue
		}
		i++
	}
	return found
}

// join serves a call of s from the orphan fl it joined: its result once it
// has one. A joiner that leaves first hands the orphan back.
func (e *Engine) join(ctx context.Context, s *session, fl *flight, arrive time.Time) (Result, error) {
	select {
	case <-fl.done:
	case <-ctx.Done():
		e.lock()
		select {
		case <-fl.done:
		default:
			fl.joined = false
			e.keepOrphanLocked(s, fl)
		}
		s.inflight--
		e.idleLocked(s)
		e.unlock()
		return Result{}, fmt.Errorf("calling %s: %w", fl.tool, ctx.Err())
	}
	now := time.Now()
	res := fl.res
	res.Source = Joined
	// What the joiner did not wait: the run up to its arrival.
	upTo := arrive
	if fl.finished.Before(upTo) {
		upTo = fl.finished
	}
	res.Saved = max(0, min(fl.took, upTo.Sub(fl.arrive)))
	e.lock()
	s.inflight--
	s.lastActive = now
	e.idleLocked(s)
	if fl.err == nil {
		e.toolLocked(fl.tool).count(Joined)
		e.st.totals.count(Joined, res.Saved)
	}
	e.st.tail.call = callDone{tool: fl.tool, source: Joined, took: now.Sub(arrive), saved: res.Saved, err: fl.err}
	e.st.tail.hasCall = true
	e.unlock()
	if e.debug {
		attrs := []any{
			"session", s.id, "seq", res.Seq, "tool", fl.tool, "args", argsDigest(fl.key.Args),
			"source", string(Joined), "saved_ms", float64(res.Saved.Microseconds()) / 1000,
			"duration_ms", float64(now.Sub(arrive).Microseconds()) / 1000,
		}
		if fl.err != nil {
			attrs = append(attrs, "err", fl.err)
		}
		e.opts.Logger.Debug("call", attrs...)
	}
	return res, fl.err
}
