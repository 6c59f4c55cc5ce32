package gateway

import (
	"sync"

	"github.com/ahead-dev/ahead/callkey"
)

// DefaultLinkerCalls is how many recent calls a Linker remembers when
// NewLinker is given 0.
const DefaultLinkerCalls = 4096

// Linker links tool-side calls to the session whose model emitted them, on
// exact evidence only: the call's key (tool name and canonical arguments,
// package callkey) or its call id. It answers only when exactly one session
// emitted a matching call among the last calls it remembers; when two could
// match it links neither. It keeps keys and ids, never anything else, and
// forgets the oldest call first. It is safe for concurrent use.
type Linker struct {
	mu    sync.Mutex // protects the fields below
	ring  []linked   // the remembered calls, oldest at next once full
	next  int
	full  bool
	keys  map[callkey.Key]map[string]int // call key → session → count
	ids   map[string]map[string]int      // call id → session → count
	limit int
}

type linked struct {
	session string
	key     callkey.Key
	id      string
	valid   bool // false once forgotten
}

// NewLinker returns a Linker that remembers the last n calls (0 means
// DefaultLinkerCalls).
func NewLinker(n int) *Linker {
	if n <= 0 {
		n = DefaultLinkerCalls
	}
	return &Linker{
		ring: make([]linked, n), limit: n,
		keys: map[callkey.Key]map[string]int{}, ids: map[string]map[string]int{},
	}
}

// Remember records that session's model emitted a call. Arguments that are
// not a JSON object are remembered by id alone.
func (l *Linker) Remember(session, id, tool string, args []byte) {
	if session == "" {
		return
	}
	key, err := callkey.Make(tool, args)
	e := linked{session: session, id: id, valid: true}
	if err == nil {
		e.key = key
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.full {
		l.dropLocked(&l.ring[l.next])
	}
	l.ring[l.next] = e
	if l.next++; l.next == l.limit {
		l.next, l.full = 0, true
	}
	if e.key.Tool != "" {
		add(l.keys, e.key, session)
	}
	if id != "" {
		add(l.ids, id, session)
	}
}

func add[K comparable](m map[K]map[string]int, k K, session string) {
	s := m[k]
	if s == nil {
		s = map[string]int{}
		m[k] = s
	}
	s[session]++
}

func remove[K comparable](m map[K]map[string]int, k K, session string) {
	s := m[k]
	if s[session]--; s[session] <= 0 {
		delete(s, session)
	}
	if len(s) == 0 {
		delete(m, k)
	}
}

func (l *Linker) dropLocked(e *linked) {
	if !e.valid {
		return
	}
	if e.key.Tool != "" {
		remove(l.keys, e.key, e.session)
	}
	if e.id != "" {
		remove(l.ids, e.id, e.session)
	}
	*e = linked{}
}

func only(s map[string]int) (string, bool) {
	if len(s) != 1 {
		return "", false
	}
	for id := range s {
		return id, true
	}
	return "", false
}

// Session returns the one session whose model emitted a call to tool with
// these arguments; ok is false when none or several did.
func (l *Linker) Session(tool string, args []byte) (session string, ok bool) {
	key, err := callkey.Make(tool, args)
	if err != nil {
		return "", false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return only(l.keys[key])
}

// SessionOfID returns the one session whose model emitted the call with
// this id (as it returns in a tool result); ok is false when none or
// several did.
func (l *Linker) SessionOfID(id string) (session string, ok bool) {
	if id == "" {
		return "", false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return only(l.ids[id])
}

// Forget drops the calls of a session.
func (l *Linker) Forget(session string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range l.ring {
		if l.ring[i].valid && l.ring[i].session == session {
			l.dropLocked(&l.ring[i])
		}
	}
}
