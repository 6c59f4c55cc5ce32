package server

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ahead-dev/ahead/backend"
	"github.com/ahead-dev/ahead/httpapi"
)

// Bytes held for answers (issue 23), all connections together: the tool
// outputs being read for the calls of HTTP requests and the answers being
// written to clients, within one budget (max_answer_bytes).
//
// Answers: an answer a handler writes stays in memory until the client has
// taken it: 40 clients that asked for 8 MiB answers and read nothing held
// 1 GiB until the write timeout. A write that brings the answers' total
// over the budget cuts the writes whose client took bytes the least
// recently (a write waiting longest on its client), so a slow reader gives
// way to the others, and an answer larger than the whole budget is still
// written when it is alone.
//
// Outputs: with slots unset, calls in flight are not limited, and each
// held up to its backend's max_response_bytes while its output was read
// and answered (40 clients calling a tool of 8 MiB outputs at once took
// RSS to 862 MiB). A request's hold (backend.Budget, in its context)
// counts its call's output as the backend reads it; a read that would
// bring the total over the budget waits (the tool's connection is not
// read meanwhile, nothing is lost) until answers end, or cuts a write
// whose client has taken nothing for silentGrace while others took theirs
// (stalledGrace when none did). When no answer is being
// written, the oldest read goes on regardless, so reads alone cannot
// deadlock: the total exceeds the budget by at most one output. When the
// call's answer is written, the hold's bytes become the answer's.
//
// Small outputs do not queue behind large ones. Beside 100 clients that
// asked for 8 MiB answers and read nothing, a normal call's 3-byte output
// waited for the budget for up to 26 s (its p99 9-14 ms on a quiet
// machine, 15-20 times its p99 alone): the stalled answers and 46 large
// reads, each holding a part of the budget while waiting for more, left
// no byte free, and each stalled answer, once cut, let one more large
// read go. So a hold of at most smallRead bytes may use a reserve (a
// quarter of the budget) that large ones cannot: answers and holds beyond
// smallRead stay within the rest. And large reads take freed bytes oldest
// read first, so that bytes freed go to completing one output rather than
// to growing many by a part each. The reserve holds 256 small reads of
// smallRead bytes at once; beyond, small reads wait as well.
//
// Writes of at most answerSmall bytes are not counted: they fit the
// server's own per-connection buffer, which the connection holds anyway.

// answerChunk is what a large write hands the connection at a time: each
// piece renews the write deadline and tells how recently the client took
// bytes.
const answerChunk = 256 << 10

// answerSmall is the largest write left uncounted.
const answerSmall = 4 << 10

// smallRead is the largest hold that may use the budget's reserve: a
// ReadCounted of an output of unknown length grows its buffer by this much
// first.
const smallRead = 64 << 10

// errAnswerCut is the write error of an answer cut for the budget.
var errAnswerCut = errors.New("server: answer cut: answer bytes in flight over max_answer_bytes, and this client took its bytes the least recently")

// answers is the budget of bytes held for answers.
type answers struct {
	budget  int64
	reserve int64        // of the budget, for holds of at most smallRead bytes
	cuts    atomic.Int64 // answers cut, for the log, /v1/stats and tests
	sheds   atomic.Int64 // queued reads shed for a connection slot (tests)

	mu      sync.Mutex // protects everything below and every flight's and hold's fields
	held    int64      // bytes of the answers being written
	outputs int64      // bytes of the outputs being read
	small   int64      // of outputs, those of holds of at most smallRead bytes
	flights map[*flight]struct{}
	holds   map[*hold]struct{} // the holds reading an output
	queued  map[*hold]struct{} // the holds waiting for bytes beyond smallRead
	seq     uint64             // orders holds by their first read
	changed chan struct{}      // closed when bytes are released, if a read waits
	took    time.Time          // when a client last took a piece of its answer
	shedAt  time.Time          // when a queued read was last shed
}

// stalledGrace is how long a read waiting for bytes lets a write whose
// client has taken nothing go on, when no other client took bytes
// meanwhile either: then the whole machine may be starved (readers
// descheduled, not slow), and a reader is cut only after five graces. A
// client that took nothing for silentGrace while others took theirs is
// slow, and gives way at once.
const stalledGrace = 5 * silentGrace

// graceLocked is how long f may still wait on its client before a read
// waiting for bytes cuts it (0 or less: now).
func (a *answers) graceLocked(f *flight) time.Duration {
	grace := stalledGrace
	if a.took.After(f.waiting) {
		grace = silentGrace
	}
	return grace - time.Since(f.waiting)
}

func newAnswers(budget int64) *answers {
	return &answers{budget: budget, reserve: budget / 4, flights: make(map[*flight]struct{}),
		holds: make(map[*hold]struct{}), queued: make(map[*hold]struct{})}
}

// A hold counts the output of one request's call as it is read
// (backend.Budget), until its answer is written or the request ends.
type hold struct {
	a    *answers
	n    int64         // bytes counted
	seq  uint64        // when it started reading; 0 before
	wake chan struct{} // signalled when it becomes the oldest queued read
	// ended: its request ended while its call's output was still being
	// read (a call that runs on for a re-issue to join, engine/orphan.go,
	// at most a few at once): what is read after is not counted, as no
	// one would release it.
	ended bool
	// shed, if set, ends the request with a cause (httpapi.ErrBusy) when
	// its read, queued for bytes, gives way to a newcomer (shedQueued).
	shed     context.CancelCauseFunc
	shedded  bool      // shed was called
	queuedAt time.Time // when it last joined the queue
}

var _ backend.Budget = (*hold)(nil)

// newHold returns a hold for one request; end it when the request ends.
func (a *answers) newHold() *hold { return &hold{a: a, wake: make(chan struct{}, 1)} }

// Grow counts n more bytes of h's output, waiting while they would bring
// the total over the budget (see above).
func (h *hold) Grow(ctx context.Context, n int64) error {
	a := h.a
	a.mu.Lock()
	if h.ended {
		a.mu.Unlock()
		return nil
	}
	if h.seq == 0 {
		a.seq++
		h.seq = a.seq
		a.holds[h] = struct{}{}
	}
	for {
		if h.ended {
			// Its request ended while it waited (see hold.ended).
			a.mu.Unlock()
			return nil
		}
		if a.fitsLocked(h, n) || (len(a.flights) == 0 && a.oldestReadLocked() == h) {
			if _, ok := a.queued[h]; ok {
				delete(a.queued, h)
				a.wakeHeadLocked() // the next queued read may go now
			}
			if h.n <= smallRead {
				a.small -= h.n
			}
			h.n += n
			a.outputs += n
			if h.n <= smallRead {
				a.small += h.n
			}
			a.mu.Unlock()
			return nil
		}
		if h.n+n > smallRead {
			if _, ok := a.queued[h]; !ok {
				h.queuedAt = time.Now()
			}
			a.queued[h] = struct{}{}
			if head := a.headLocked(); head != h {
				// Only the oldest queued read watches the budget
				// (beside 100 queued reads, every release woke them
				// all to find they were not first, on one mutex);
				// the others wait for their turn.
				a.mu.Unlock()
				select {
				case <-h.wake:
				case <-ctx.Done():
					a.mu.Lock()
					h.leaveLocked()
					a.mu.Unlock()
					return context.Cause(ctx)
				}
				a.mu.Lock()
				continue
			}
		}
		// A client that has taken nothing of its answer for silentGrace
		// while others took theirs (or for stalledGrace) gives way;
		// otherwise wait for bytes to be released, or for the slowest
		// client to pass its grace.
		slowest := a.slowestLocked(nil)
		var retry <-chan time.Time
		var t *time.Timer
		if slowest != nil {
			wait := a.graceLocked(slowest)
			if wait > 0 {
				// Checked again from silentGrace on: another client
				// taking bytes meanwhile shortens the grace.
				wait = min(wait, max(silentGrace-time.Since(slowest.waiting), silentGrace/4))
			}
			if wait <= 0 {
				a.cutLocked(slowest)
				continue
			}
			t = time.NewTimer(wait)
			retry = t.C
		}
		if a.changed == nil {
			a.changed = make(chan struct{})
		}
		changed := a.changed
		a.mu.Unlock()
		var err error
		select {
		case <-changed:
		case <-h.wake: // it became the oldest queued read again
		case <-retry:
		case <-ctx.Done():
			err = context.Cause(ctx)
		}
		if t != nil {
			t.Stop()
		}
		if err != nil {
			a.mu.Lock()
			h.leaveLocked()
			a.mu.Unlock()
			return err
		}
		a.mu.Lock()
	}
}

// fitsLocked reports whether n more bytes of h fit the budget now. A hold
// that stays within smallRead may use the reserve; a larger one must
// leave it free and wait for the older reads waiting as well.
func (a *answers) fitsLocked(h *hold, n int64) bool {
	total := a.held + a.outputs + n
	if h.n+n <= smallRead {
		return total <= a.budget || a.small+n <= a.reserve
	}
	large := a.held + a.outputs - a.small + n
	if h.n <= smallRead {
		large += h.n // its bytes leave the reserve
	}
	if total > a.budget || large > a.budget-a.reserve {
		return false
	}
	for q := range a.queued {
		if q.seq < h.seq {
			return false // an older read waits for bytes: it goes first
		}
	}
	return true
}

// oldestReadLocked is the hold that started reading first among those
// still reading.
func (a *answers) oldestReadLocked() *hold { return oldestHold(a.holds) }

// oldestHold is the hold of hs that started reading first; nil if none.
func oldestHold(hs map[*hold]struct{}) *hold {
	var o *hold
	for h := range hs {
		if o == nil || h.seq < o.seq {
			o = h
		}
	}
	return o
}

// releasedLocked wakes the reads waiting for bytes: the small ones and
// the oldest queued one.
func (a *answers) releasedLocked() {
	if a.changed != nil {
		close(a.changed)
		a.changed = nil
	}
	a.wakeHeadLocked()
}

// headLocked is the oldest queued read; nil if none.
func (a *answers) headLocked() *hold { return oldestHold(a.queued) }

// wakeHeadLocked tells the oldest queued read to look at the budget.
func (a *answers) wakeHeadLocked() {
	if head := a.headLocked(); head != nil {
		select {
		case head.wake <- struct{}{}:
		default:
		}
	}
}

// leaveLocked takes h out of the queue: its read ended. A read queued
// behind it may go first now.
func (h *hold) leaveLocked() {
	if _, ok := h.a.queued[h]; ok {
		delete(h.a.queued, h)
		h.a.wakeHeadLocked()
	}
}

// Shrink uncounts n of the bytes h counted (at most all of them): a stdio
// MCP upstream's reader counts a message in the call it most likely
// answers before it can tell which call it answers (mcpproxy/stdio.go).
func (h *hold) Shrink(n int64) {
	a := h.a
	a.mu.Lock()
	defer a.mu.Unlock()
	if n = min(n, h.n); n <= 0 {
		return
	}
	if h.n <= smallRead {
		a.small -= h.n
	}
	h.n -= n
	a.outputs -= n
	if h.n <= smallRead {
		a.small += h.n
	}
	a.releasedLocked()
}

// end uncounts what h still holds: the request ended.
func (h *hold) end() {
	a := h.a
	a.mu.Lock()
	defer a.mu.Unlock()
	h.ended = true
	select { // a read of it waiting for the budget stops counting
	case h.wake <- struct{}{}:
	default:
	}
	h.dropLocked()
}

func (h *hold) dropLocked() {
	a := h.a
	delete(a.holds, h)
	h.leaveLocked()
	if h.n > 0 {
		if h.n <= smallRead {
			a.small -= h.n
		}
		a.outputs -= h.n
		h.n = 0
		a.releasedLocked()
	}
}

// stats is what /v1/stats shows of the budget: every byte counted,
// outputs being read and answers being written.
func (a *answers) stats() *httpapi.AnswerStats {
	a.mu.Lock()
	defer a.mu.Unlock()
	return &httpapi.AnswerStats{Bytes: a.held + a.outputs, Budget: a.budget, Cut: a.cuts.Load()}
}

// A flight is one counted write in progress.
type flight struct {
	n       int64
	rc      *http.ResponseController
	waiting time.Time // when the piece being written was handed over
	cut     bool      // cut for the budget: its bytes are no longer counted
}

// begin counts a write of n bytes to the connection behind rc, cutting
// other writes while the answers' total is over the budget. What h (nil:
// none) counted of the output this answer carries is released: the answer
// counts it now.
func (a *answers) begin(n int64, rc *http.ResponseController, h *hold) *flight {
	f := &flight{n: n, rc: rc, waiting: time.Now()}
	a.mu.Lock()
	defer a.mu.Unlock()
	// The bytes the request's output held were let in within the budget
	// (its read waited for them): carried over, they cut no other answer;
	// only what the answer adds to them may. (A read that went on because
	// no answer was being written may have brought the total over it:
	// cutting a reading client for that cut answers on a loaded machine.)
	var carried int64
	if h != nil {
		carried = h.n
		h.dropLocked()
	}
	a.flights[f] = struct{}{}
	a.held += n
	for added := n - carried; added > 0 && a.held > a.budget; {
		slowest := a.slowestLocked(f)
		if slowest == nil {
			break // alone: an answer larger than the budget still goes
		}
		added -= slowest.n
		a.cutLocked(slowest)
	}
	return f
}

// slowestLocked is the write, other than but, that has waited longest on
// its client; nil if none.
func (a *answers) slowestLocked(but *flight) *flight {
	var slowest *flight
	for g := range a.flights {
		if g != but && (slowest == nil || g.waiting.Before(slowest.waiting)) {
			slowest = g
		}
	}
	return slowest
}

func (a *answers) cutLocked(f *flight) {
	f.cut = true
	delete(a.flights, f)
	a.held -= f.n
	a.cuts.Add(1)
	a.releasedLocked()
	// A deadline in the past ends the write that is waiting now; the
	// flight's next piece sees cut.
	_ = f.rc.SetWriteDeadline(time.Unix(1, 0))
}

// next readies f's next piece: it renews the write deadline (d from now,
// or none with d 0) and reports false if f was cut. The deadline is set
// under the lock so that a cut's past deadline is never overwritten.
func (a *answers) next(f *flight, d time.Duration) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if f.cut {
		return false
	}
	f.waiting = time.Now()
	a.took = f.waiting
	var dl time.Time
	if d > 0 {
		dl = f.waiting.Add(d)
	}
	_ = f.rc.SetWriteDeadline(dl)
	return true
}

// notReadingGrace is how long a client may take no byte of its answer,
// while other clients take theirs, before it counts as not reading when a
// connection slot is wanted (connLimit): it then gives way at once.
// Without others taking bytes meanwhile (the whole machine may be starved,
// its reader descheduled), it counts as not reading after silentGrace.
//
// Beside 100 clients that asked for 8 MiB answers, read nothing, and asked
// again as soon as cut, a new client waited for an answer to have stalled
// for a whole silentGrace: a normal call's p50 236 ms, p99 981 ms (load
// 18) against 0.3 / 0.7-9.6 ms alone. A client that reads takes a piece
// (answerChunk) in far less than notReadingGrace on loopback or a LAN; one
// that takes less than answerChunk a notReadingGrace (2.5 MiB/s) is cut
// only when every slot is held and a newcomer waits.
const notReadingGrace = 100 * time.Millisecond

// notReadingLocked is how long the write that has waited longest on its
// client still has before that client counts as not reading (0 or less:
// now); ok false if no write is in progress.
func (a *answers) notReadingLocked() (f *flight, left time.Duration, ok bool) {
	f = a.slowestLocked(nil)
	if f == nil {
		return nil, 0, false
	}
	grace := silentGrace
	if a.took.After(f.waiting) {
		grace = notReadingGrace
	}
	return f, grace - time.Since(f.waiting), true
}

// cutNotReading cuts the write that has waited longest on its client if
// that client is not reading, and reports whether it cut one: a
// connection slot is wanted (connLimit).
func (a *answers) cutNotReading() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	f, left, ok := a.notReadingLocked()
	if !ok || left > 0 {
		return false
	}
	a.cutLocked(f)
	return true
}

// notReadingIn is how long until the client of the write that has waited
// longest counts as not reading; ok false if no write is in progress.
func (a *answers) notReadingIn() (time.Duration, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, left, ok := a.notReadingLocked()
	return left, ok
}

// wasCut reports whether f was cut for the budget.
func (a *answers) wasCut(f *flight) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return f.cut
}

// end uncounts f.
func (a *answers) end(f *flight) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !f.cut {
		delete(a.flights, f)
		a.held -= f.n
		a.releasedLocked()
	}
}

// heldBytes is what the writes in progress hold (tests).
func (a *answers) heldBytes() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.held
}

// shedQueued ends the request of the read that queued last for bytes
// beyond smallRead, once it has waited notReadingGrace, and reports
// whether it shed one: a connection slot is wanted (connLimit). Its
// client has received nothing: it is answered 503 with Retry-After and
// its connection closes (guard), its call running on for the same call
// asked again to join (engine/orphan.go). Beside 100 clients asking for 8
// MiB answers, reading nothing and asking again, most connections hold
// such reads, and a newcomer waited for an answer not being read to count
// as such (up to silentGrace when no client took bytes), in the one
// accept loop, behind the reconnections before it. At most one read is
// shed a notReadingGrace, so that clients shed and asking again at once
// do not shed one another without end.
func (a *answers) shedQueued() bool {
	a.mu.Lock()
	now := time.Now()
	if now.Sub(a.shedAt) < notReadingGrace {
		a.mu.Unlock()
		return false
	}
	var victim *hold
	for h := range a.queued {
		if h.shed != nil && !h.shedded && now.Sub(h.queuedAt) >= notReadingGrace && (victim == nil || h.seq > victim.seq) {
			victim = h
		}
	}
	if victim == nil {
		a.mu.Unlock()
		return false
	}
	victim.shedded = true
	a.shedAt = now
	a.sheds.Add(1)
	a.mu.Unlock()
	victim.shed(httpapi.ErrBusy) // outside a.mu: its read's wait may take it
	return true
}

// shedIn is how long until shedQueued may shed a read; ok false if no
// queued read can be shed.
func (a *answers) shedIn() (time.Duration, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := time.Now()
	left, ok := time.Duration(0), false
	for h := range a.queued {
		if h.shed == nil || h.shedded {
			continue
		}
		if l := notReadingGrace - now.Sub(h.queuedAt); !ok || l < left {
			left, ok = l, true
		}
	}
	return max(left, notReadingGrace-now.Sub(a.shedAt)), ok
}

// wasShed reports whether h's request was shed for a connection slot.
func (h *hold) wasShed() bool {
	h.a.mu.Lock()
	defer h.a.mu.Unlock()
	return h.shedded
}
