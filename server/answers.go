package server

import (
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Answer bytes in flight (issue 23). An answer a handler writes stays in
// memory until the client has taken it: 40 clients that asked for 8 MiB
// answers and read nothing held 1 GiB until the write timeout. answers
// bounds those bytes, all connections together: a write that brings the
// total over the budget cuts the writes whose client took bytes the least
// recently (a write waiting longest on its client), so a slow reader gives
// way to the others, and an answer larger than the whole budget is still
// written when it is alone.
//
// Writes of at most answerSmall bytes are not counted: they fit the
// server's own per-connection buffer, which the connection holds anyway.

// answerChunk is what a large write hands the connection at a time: each
// piece renews the write deadline and tells how recently the client took
// bytes.
const answerChunk = 256 << 10

// answerSmall is the largest write left uncounted.
const answerSmall = 4 << 10

// errAnswerCut is the write error of an answer cut for the budget.
var errAnswerCut = errors.New("server: answer cut: answer bytes in flight over max_answer_bytes, and this client took its bytes the least recently")

// answers is the budget of answer bytes being written to clients.
type answers struct {
	budget int64
	cuts   atomic.Int64 // answers cut, for the log and tests

	mu      sync.Mutex // protects held, flights and every flight's fields
	held    int64
	flights map[*flight]struct{}
}

func newAnswers(budget int64) *answers {
	return &answers{budget: budget, flights: make(map[*flight]struct{})}
}

// A flight is one counted write in progress.
type flight struct {
	n       int64
	rc      *http.ResponseController
	waiting time.Time // when the piece being written was handed over
	cut     bool      // cut for the budget: its bytes are no longer counted
}

// begin counts a write of n bytes to the connection behind rc, cutting
// other writes while the total is over the budget.
func (a *answers) begin(n int64, rc *http.ResponseController) *flight {
	f := &flight{n: n, rc: rc, waiting: time.Now()}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.flights[f] = struct{}{}
	a.held += n
	for a.held > a.budget {
		var slowest *flight
		for g := range a.flights {
			if g != f && (slowest == nil || g.waiting.Before(slowest.waiting)) {
				slowest = g
			}
		}
		if slowest == nil {
			break // alone: an answer larger than the budget still goes
		}
		a.cutLocked(slowest)
	}
	return f
}

func (a *answers) cutLocked(f *flight) {
	f.cut = true
	delete(a.flights, f)
	a.held -= f.n
	a.cuts.Add(1)
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
	var dl time.Time
	if d > 0 {
		dl = f.waiting.Add(d)
	}
	_ = f.rc.SetWriteDeadline(dl)
	return true
}

// cutStalled cuts the write that has waited longest on its client, if it
// has waited at least d, and reports whether it cut one: a connection
// slot is wanted (connLimit), and that client is not taking its answer.
func (a *answers) cutStalled(d time.Duration) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	var slowest *flight
	for f := range a.flights {
		if slowest == nil || f.waiting.Before(slowest.waiting) {
			slowest = f
		}
	}
	if slowest == nil || time.Since(slowest.waiting) < d {
		return false
	}
	a.cutLocked(slowest)
	return true
}

// stalledSince is when the write waiting longest on its client started
// waiting; zero if none is.
func (a *answers) stalledSince() time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	var t time.Time
	for f := range a.flights {
		if t.IsZero() || f.waiting.Before(t) {
			t = f.waiting
		}
	}
	return t
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
	}
}

// heldBytes is what the writes in progress hold (tests).
func (a *answers) heldBytes() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.held
}
