package gateway

import (
	"slices"
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
//
// The gateway remembers the calls of the sessions it names itself (requests
// without Ahead-Session). A conversation's next request is known by the
// call ids of the tool results it returns (SessionOfID). When the agent's
// call reaches the tool side in a session of its own, the engine asks Link
// (engine.Linker), folds the gateway's session into the tool side's, and
// from then on the gateway speaks to the engine in the tool side's session
// (Resolve).
type Linker struct {
	mu    sync.Mutex // protects the fields below
	ring  []linked   // the remembered calls, oldest at next once full
	next  int
	full  bool
	keys  map[callkey.Key]map[string]int // call key → session → count
	ids   map[string]map[string]int      // call id → session → count
	limit int
	links map[string]string // gateway session → the tool-side session it was folded into
	order []string          // keys of links, oldest first (bounded by limit)
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
		links: map[string]string{},
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
	if len(s) != 1 {
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

// Link reports the one gateway session whose model emitted the call with
// key, if the call, now made in the tool-side session, links them: exactly
// one session emitted it among the remembered calls, that session is not
// the caller's own and has not been linked before. The link is then kept
// (Resolve) and from is returned once; the caller folds from into session.
// A session that could be either of two links to neither.
func (l *Linker) Link(session string, key callkey.Key) (from string, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	from, ok = only(l.keys[key])
	if !ok || from == session {
		return "", false
	}
	if _, linked := l.links[from]; linked {
		// Folded already: into this session (nothing to do), or into
		// another, which one call in a third cannot overrule.
		return "", false
	}
	if len(l.order) >= l.limit {
		delete(l.links, l.order[0])
		l.order = l.order[1:]
	}
	l.links[from] = session
	l.order = append(l.order, from)
	return from, true
}

// Resolve returns the session a gateway session was linked to, or the
// session itself when it is not linked.
func (l *Linker) Resolve(session string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if to, ok := l.links[session]; ok {
		return to
	}
	return session
}

// Forget drops the calls of a session and its link.
func (l *Linker) Forget(session string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.links[session]; ok {
		delete(l.links, session)
		l.order = slices.DeleteFunc(l.order, func(s string) bool { return s == session })
	}
	for i := range l.ring {
		if l.ring[i].valid && l.ring[i].session == session {
			l.dropLocked(&l.ring[i])
		}
	}
}
