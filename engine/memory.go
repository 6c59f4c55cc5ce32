package engine

import (
	"container/heap"
	"time"

	"github.com/ahead-dev/ahead/policy"
)

// Memory (issue 13, "Memory within its limit"): everything the engine keeps
// per session is counted against one budget, Options.MaxBytes: the
// speculative entries, the session's own state (conversation window, served
// calls, a fixed overhead) and what the predictor keeps for it, when the
// predictor can say (SessionSizer). The number of sessions is capped by
// Options.MaxSessions. Both limits are enforced in O(log n) whatever the
// number of sessions, with three heaps kept in the engine's state (state.go):
//   - e.st.byUtility: every entry (shared ones too), lowest utility on top,
//     for MaxEntries;
//   - e.st.filed: the entries holding a result, lowest utility on top, for
//     the byte budget;
//   - e.st.idle: the sessions with no call in flight, least recently active
//     on top, for MaxSessions, the byte budget and IdleTimeout.

// SessionSizer is a Predictor that can say how much memory it keeps for a
// session, in bytes. The engine counts it in Options.MaxBytes and drops
// (and makes the predictor Forget) the least recently active sessions when
// the budget is exceeded. A predictor that keeps per-session state should
// implement it: what it does not report is outside the budget.
type SessionSizer interface {
	SessionBytes(session string) int64
}

// sessionOverhead approximates a session's fixed memory cost in bytes (the
// struct and its maps); eventOverhead that of a message kept in its
// conversation window beside the content; keyOverhead that of a served call
// beside its arguments.
const (
	sessionOverhead = 1024
	eventOverhead   = 256
	keyOverhead     = 64
)

// resizeLocked recomputes what session s holds beside its entries and
// updates the budget's total.
func (e *Engine) resizeLocked(s *session) {
	if s.gone {
		return
	}
	n := int64(sessionOverhead) + s.msgBytes + int64(len(s.msgs))*eventOverhead + s.servedBytes + s.predBytes + s.aliasBytes + s.orphanBytes
	e.st.sessBytes += n - s.own
	s.own = n
}

// overBudgetLocked reports whether entries and sessions together exceed
// MaxBytes.
func (e *Engine) overBudgetLocked() bool {
	return e.st.bytes+e.st.sessBytes+e.st.orphanReading > e.opts.MaxBytes
}

// enforceBudgetLocked frees memory until the budget holds: sessions idle
// longer than an unshared result lives go first (least recently active
// first; their results would have expired anyway), then the
// lowest-utility results, then the remaining idle sessions. Sessions with a
// call in flight are never dropped.
func (e *Engine) enforceBudgetLocked(now time.Time) {
	stale := e.ttlLocked(policy.Tool{})
	for e.overBudgetLocked() {
		var old *session
		if e.st.idle.Len() > 0 {
			old = e.st.idle[0]
		}
		switch {
		case old != nil && now.Sub(old.lastActive) >= stale:
			e.evictSessionLocked(old)
		case e.st.filed.Len() > 0:
			e.removeLocked(e.st.filed.top(), OutcomeEvicted)
		case old != nil:
			e.evictSessionLocked(old)
		default:
			return // everything left is in flight
		}
	}
}

// evictSessionLocked drops a session for memory or the session cap.
func (e *Engine) evictSessionLocked(s *session) {
	e.st.totals.SessionsEvicted++
	e.dropSessionLocked(s, OutcomeEvicted)
}

// admitSessionLocked makes room for one more session under MaxSessions,
// dropping the least recently active idle ones.
func (e *Engine) admitSessionLocked() {
	for len(e.st.sessions) >= e.opts.MaxSessions && e.st.idle.Len() > 0 {
		e.evictSessionLocked(e.st.idle[0])
	}
}

// busyLocked notes that s has a call in flight: it is not idle.
func (e *Engine) busyLocked(s *session) {
	if s.idleAt >= 0 {
		heap.Remove(&e.st.idle, s.idleAt)
	}
}

// idleLocked notes that s has no call in flight, or that its lastActive
// changed.
func (e *Engine) idleLocked(s *session) {
	switch {
	case s.gone || s.inflight > 0:
	case s.idleAt >= 0:
		heap.Fix(&e.st.idle, s.idleAt)
	default:
		heap.Push(&e.st.idle, s)
	}
}

// sessionHeap orders idle sessions by last activity, oldest first.
type sessionHeap []*session

func (h sessionHeap) Len() int { return len(h) }
func (h sessionHeap) Less(i, j int) bool {
	return h[i].lastActive.Before(h[j].lastActive)
}
func (h sessionHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idleAt, h[j].idleAt = i, j
}
func (h *sessionHeap) Push(x any) {
	s := x.(*session)
	s.idleAt = len(*h)
	*h = append(*h, s)
}
func (h *sessionHeap) Pop() any {
	old := *h
	s := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	s.idleAt = -1
	return s
}

// entryHeap orders entries by utility, lowest first. at selects which of an
// entry's two heap positions it maintains.
type entryHeap struct {
	es []*entry
	at func(*entry) *int
}

func (h *entryHeap) Len() int           { return len(h.es) }
func (h *entryHeap) Less(i, j int) bool { return h.es[i].utility < h.es[j].utility }
func (h *entryHeap) Swap(i, j int) {
	h.es[i], h.es[j] = h.es[j], h.es[i]
	*h.at(h.es[i]), *h.at(h.es[j]) = i, j
}
func (h *entryHeap) Push(x any) {
	en := x.(*entry)
	*h.at(en) = len(h.es)
	h.es = append(h.es, en)
}
func (h *entryHeap) Pop() any {
	en := h.es[len(h.es)-1]
	h.es[len(h.es)-1] = nil
	h.es = h.es[:len(h.es)-1]
	*h.at(en) = -1
	return en
}

func (h *entryHeap) top() *entry {
	if len(h.es) == 0 {
		return nil
	}
	return h.es[0]
}

func (h *entryHeap) add(en *entry) {
	if *h.at(en) < 0 {
		heap.Push(h, en)
	}
}

func (h *entryHeap) remove(en *entry) {
	if i := *h.at(en); i >= 0 {
		heap.Remove(h, i)
	}
}

func (h *entryHeap) fix(en *entry) {
	if i := *h.at(en); i >= 0 {
		heap.Fix(h, i)
	}
}
