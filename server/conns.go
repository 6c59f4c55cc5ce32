package server

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// Connections under max_connections (issue 23). netutil.LimitListener
// counted a keep-alive connection waiting for its next request like a busy
// one: 100 idle connections, each opened by one GET /healthz, locked every
// other client out for the 2-minute idle timeout. connLimit gives way
// instead: when every slot is taken, the connection idle the longest is
// closed for the newcomer (then one that has sent nothing for
// silentGrace); else the one whose client is not reading its answer gives
// way at once: the answer budget cuts the answer that has waited longest
// on its client, once that client has taken none of its bytes for
// notReadingGrace while others took theirs (silentGrace if none did). A
// newcomer that cut one waits for that connection to close (up to
// silentGrace) before cutting another. A client whose idle connection
// is closed under it sees what an idle timeout does; Go's and most HTTP
// clients retry on a new connection. Only connections busy with a request
// that is being served make a newcomer wait.
//
// The newcomer is accepted before a slot is free, so at most one
// connection beyond the limit is open while it waits.
//
// One connection at a time borrows a slot this way: while the connection
// that got its slot by closing another is busy with its request, a
// newcomer waits for a slot (that connection's end or idleness, or any
// other connection's end) and closes none, for at most silentGrace. Else
// the client whose idle connection was closed, reconnecting at once,
// closed another idle one, whose client did the same, until the borrower
// ended: 5 idle connections closed per normal call with 100 idle clients
// at max_connections 100, every reconnection served before the next
// newcomer by the one accept loop (a normal call's p99 61 ms beside them,
// 11-17 ms alone).

// silentGrace is how long a new connection may stay silent before it can
// give way like an idle one: a real client sends its request at once.
const silentGrace = time.Second

// connLimit is a listener of at most n connections at once. Its track
// method is the http.Server's ConnState hook.
type connLimit struct {
	net.Listener
	slots chan struct{} // one token per open connection
	freed chan struct{} // signalled when a connection may give way
	done  chan struct{} // closed by Close
	once  sync.Once     // closes done
	// answers, if set, cuts a connection whose client takes no bytes of
	// its answer when a slot is wanted.
	answers *answers
	mu      sync.Mutex // protects conns and lent
	conns   map[*limitedConn]connState
	// lent is the connection that got its slot by closing another, while
	// it is busy with its request (nil once it idles or closes).
	lent *limitedConn
}

// connState is what the server last told of a connection.
type connState struct {
	state http.ConnState
	since time.Time
}

func newConnLimit(ln net.Listener, n int) *connLimit {
	return &connLimit{Listener: ln, slots: make(chan struct{}, n), freed: make(chan struct{}, 1),
		done: make(chan struct{}), conns: make(map[*limitedConn]connState)}
}

// Accept accepts a connection, then waits for a slot, closing an idle
// connection to make one if there is no free slot.
func (l *connLimit) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	since := time.Now() // the newcomer's wait began
	borrowed := false   // a connection was closed for it
	var cutAt time.Time // when an answer not being read was cut for it
	for {
		select {
		case l.slots <- struct{}{}:
			return l.admit(c, borrowed), nil
		default:
		}
		lentBusy := l.lentBusy()
		if (!lentBusy || time.Since(since) >= silentGrace) && l.giveWay() {
			borrowed = true
			continue
		}
		// A client not reading its answer gives way at once; its
		// handler ends and its connection closes, which frees a slot:
		// wait for that (up to silentGrace) before cutting another.
		// A read queued for bytes, whose client has received nothing,
		// gives way first (answers.shedQueued).
		if l.answers != nil && (cutAt.IsZero() || time.Since(cutAt) >= silentGrace) &&
			(l.answers.shedQueued() || l.answers.cutNotReading()) {
			cutAt = time.Now()
		}
		closing := !cutAt.IsZero() && time.Since(cutAt) < silentGrace
		// Every connection is busy: wait for one to end or to idle (or
		// for a silent one, or a client not reading, to pass its grace).
		var retry <-chan time.Time
		var t *time.Timer
		wait := time.Duration(-1)
		if !closing && l.hasSilent() {
			wait = silentGrace
		}
		if closing {
			wait = max(silentGrace-time.Since(cutAt), time.Millisecond)
		} else if l.answers != nil {
			if left, ok := l.answers.notReadingIn(); ok {
				// Looked at again within notReadingGrace: another client
				// taking bytes meanwhile shortens the grace.
				w := max(min(left, notReadingGrace), time.Millisecond)
				if wait < 0 || w < wait {
					wait = w
				}
			}
			if left, ok := l.answers.shedIn(); ok {
				w := max(left, time.Millisecond)
				if wait < 0 || w < wait {
					wait = w
				}
			}
		}
		if lentBusy {
			// The borrower's end or idleness signals freed; past
			// silentGrace, the newcomer closes one anyway.
			w := max(silentGrace-time.Since(since), time.Millisecond)
			if wait < 0 || w < wait {
				wait = w
			}
		}
		if wait >= 0 {
			t = time.NewTimer(wait)
			retry = t.C
		}
		got, closed := false, false
		select {
		case l.slots <- struct{}{}:
			got = true
		case <-l.freed:
		case <-retry:
		case <-l.done:
			closed = true
		}
		if t != nil {
			t.Stop()
		}
		switch {
		case got:
			return l.admit(c, borrowed), nil
		case closed:
			c.Close()
			return nil, net.ErrClosed
		}
	}
}

// admit wraps c, which holds a slot now; borrowed says whether a
// connection was closed for it.
func (l *connLimit) admit(c net.Conn, borrowed bool) net.Conn {
	lc := &limitedConn{Conn: c, l: l}
	l.mu.Lock()
	l.conns[lc] = connState{http.StateNew, time.Now()}
	if borrowed {
		l.lent = lc
	}
	l.mu.Unlock()
	return lc
}

// lentBusy reports whether the connection that got its slot by closing
// another is still busy with its request.
func (l *connLimit) lentBusy() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lent != nil
}

// giveWay closes the connection idle the longest, else the one silent the
// longest past silentGrace, and reports whether it closed one. Its slot is
// free once its Close returns.
func (l *connLimit) giveWay() bool {
	now := time.Now()
	l.mu.Lock()
	var victim *limitedConn
	var best connState
	for c, s := range l.conns {
		ok := s.state == http.StateIdle || (s.state == http.StateNew && now.Sub(s.since) >= silentGrace)
		if !ok {
			continue
		}
		// Idle ones first, then the oldest.
		if victim == nil || (s.state == http.StateIdle && best.state != http.StateIdle) ||
			(s.state == best.state && s.since.Before(best.since)) {
			victim, best = c, s
		}
	}
	if victim != nil {
		delete(l.conns, victim)
		if victim == l.lent {
			l.lent = nil
		}
	}
	l.mu.Unlock()
	if victim == nil {
		return false
	}
	victim.Close()
	return true
}

// hasSilent reports whether a new connection has sent nothing yet: it
// may give way once silentGrace has passed.
func (l *connLimit) hasSilent() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.conns {
		if s.state == http.StateNew {
			return true
		}
	}
	return false
}

// track is the server's ConnState hook.
func (l *connLimit) track(c net.Conn, state http.ConnState) {
	lc, ok := c.(*limitedConn)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, open := l.conns[lc]; !open {
		return // closed to give way, or already gone
	}
	if lc == l.lent && state != http.StateActive && state != http.StateNew {
		l.lent = nil // idle or gone: a newcomer may close an idle one again
	}
	switch state {
	case http.StateHijacked, http.StateClosed:
		delete(l.conns, lc)
		return
	}
	l.conns[lc] = connState{state, time.Now()}
	if state == http.StateIdle {
		select {
		case l.freed <- struct{}{}:
		default:
		}
	}
}

// Close closes the listener and ends an Accept waiting for a slot.
func (l *connLimit) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// limitedConn holds one slot until it is closed.
type limitedConn struct {
	net.Conn
	l    *connLimit
	once sync.Once
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.mu.Lock()
		delete(c.l.conns, c)
		if c.l.lent == c {
			c.l.lent = nil
		}
		c.l.mu.Unlock()
		<-c.l.slots
		select {
		case c.l.freed <- struct{}{}:
		default:
		}
	})
	return err
}
