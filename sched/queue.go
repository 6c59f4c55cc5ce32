package sched

import "container/heap"

// authWaiter is an entry of a backend's authoritative queue: a caller of Do
// waiting for a slot or a rate token, or a promoted job waiting to start.
type authWaiter struct {
	job     *Job // the promoted job; nil for a caller of Do
	session string
	ready   chan struct{} // closed when a caller is granted a slot, or refused
	ok      bool          // granted; guarded by s.mu
	err     error         // refused: pushed out of a full queue; guarded by s.mu
	tag     uint64        // virtual start time: the order of service
	seq     uint64        // arrival, to break ties of tag
	idx     int           // index in the heap
}

// fairQueue is a backend's authoritative queue. It is fair between
// sessions by start-time fair queueing, every call costing one: a waiter's
// tag is the later of the queue's virtual time (the tag of the last waiter
// served) and the tag after its session's previous waiter, and the lowest
// tag is served first, arrivals breaking ties. A session with 100 calls
// waiting holds tags v, v+1, …, v+99, so a call of another session, tagged
// v, is served at the next free slot: one session's queued calls delay
// another's by at most one tool execution (one per other session with
// calls waiting, when there are several), where a FIFO made it wait for
// all 100. A session with a single call at a time is served as soon as a
// FIFO would serve it, or sooner.
//
// A session's tags count the calls it has running too (a call granted at
// once takes a tag as well), so the next free slot goes to a newcomer
// rather than to the next call of a session that holds the running ones.
// Per-session state lives only while the session has calls waiting or
// running, so the queue's memory is bounded by its length (Limits.Queue
// callers of Do, and promoted jobs, which speculation's budgets bound) and
// the backend's slots.
type fairQueue struct {
	h        waiterHeap
	sessions map[string]*sessionQueue
	vtime    uint64
	calls    int // callers of Do waiting: what Limits.Queue bounds
}

// sessionQueue is what the queue knows of a session with waiters.
type sessionQueue struct {
	finish  uint64 // the earliest tag of its next waiter
	waiting int    // its waiters
	calls   int    // of which callers of Do
	running int    // its callers of Do granted a slot, not done yet
}

func (q *fairQueue) len() int { return len(q.h) }

func (q *fairQueue) session(name string) *sessionQueue {
	if q.sessions == nil {
		q.sessions = make(map[string]*sessionQueue)
	}
	sq := q.sessions[name]
	if sq == nil {
		sq = &sessionQueue{}
		q.sessions[name] = sq
	}
	return sq
}

// serve accounts for a call of session granted without waiting: it takes
// the session's next tag, as if it had been queued and served at once.
func (q *fairQueue) serve(session string) {
	sq := q.session(session)
	q.vtime = max(q.vtime, sq.finish)
	sq.finish = q.vtime + 1
	sq.running++
}

// done accounts for the end of a call of session granted a slot (by serve,
// or popped from the queue).
func (q *fairQueue) done(session string) {
	sq := q.sessions[session]
	if sq == nil {
		return
	}
	sq.running--
	q.drop(session, sq)
}

// push adds w, a waiter of w.session; seq numbers arrivals.
func (q *fairQueue) push(w *authWaiter, seq *uint64) {
	sq := q.session(w.session)
	w.tag = max(q.vtime, sq.finish)
	sq.finish = w.tag + 1
	sq.waiting++
	if w.job == nil {
		sq.calls++
		q.calls++
	}
	*seq++
	w.seq = *seq
	heap.Push(&q.h, w)
}

// peek returns the waiter served next.
func (q *fairQueue) peek() *authWaiter { return q.h[0] }

// pop removes and returns the waiter served next.
func (q *fairQueue) pop() *authWaiter {
	w := heap.Pop(&q.h).(*authWaiter)
	q.vtime = w.tag
	if w.job == nil {
		q.sessions[w.session].running++
	}
	q.forget(w)
	return w
}

// remove takes w out of the queue (it gave up, was cancelled or refused).
func (q *fairQueue) remove(w *authWaiter) {
	if w.idx < 0 || w.idx >= len(q.h) || q.h[w.idx] != w {
		return
	}
	heap.Remove(&q.h, w.idx)
	q.forget(w)
}

func (q *fairQueue) forget(w *authWaiter) {
	w.idx = -1
	sq := q.sessions[w.session]
	sq.waiting--
	if w.job == nil {
		sq.calls--
		q.calls--
	}
	q.drop(w.session, sq)
}

func (q *fairQueue) drop(session string, sq *sessionQueue) {
	if sq.waiting == 0 && sq.running <= 0 {
		// Its tags are all served or gone: from now on it starts at
		// the virtual time like any session that was not waiting.
		delete(q.sessions, session)
	}
}

// victim returns the call to push out of a full queue so that one of
// session's calls can wait instead: the newest call of the session with the
// most calls waiting, if that is at least two more than session has. Nil
// means session itself holds (about) the largest share, and its new call
// is the one refused. So one session filling the queue cannot lock another
// out of it.
func (q *fairQueue) victim(session string) *authWaiter {
	mine := 0
	if sq := q.sessions[session]; sq != nil {
		mine = sq.calls
	}
	var top string
	most := 0
	for name, sq := range q.sessions {
		if sq.calls > most || (sq.calls == most && name < top) {
			top, most = name, sq.calls
		}
	}
	if most <= mine+1 {
		return nil
	}
	var v *authWaiter
	for _, w := range q.h {
		if w.job == nil && w.session == top && (v == nil || w.tag > v.tag || (w.tag == v.tag && w.seq > v.seq)) {
			v = w
		}
	}
	return v
}

// waiterHeap is a container/heap of waiters, lowest (tag, seq) first.
type waiterHeap []*authWaiter

func (h waiterHeap) Len() int { return len(h) }
func (h waiterHeap) Less(i, j int) bool {
	if h[i].tag != h[j].tag {
		return h[i].tag < h[j].tag
	}
	return h[i].seq < h[j].seq
}
func (h waiterHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx = i
	h[j].idx = j
}
func (h *waiterHeap) Push(x any) {
	w := x.(*authWaiter)
	w.idx = len(*h)
	*h = append(*h, w)
}
func (h *waiterHeap) Pop() any {
	old := *h
	w := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return w
}
