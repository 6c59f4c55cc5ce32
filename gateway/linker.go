package gateway

import (
	"sync"
	"time"

	"github.com/ahead-dev/ahead/callkey"
)

// DefaultLinkerCalls is how many recent calls a Linker remembers when
// NewLinker is given 0.
const DefaultLinkerCalls = 4096

// Linker links tool-side calls to the session whose model emitted them, on
// exact evidence only: the call's key (tool name and canonical arguments,
// package callkey) or its call id. It answers only when exactly one session
// emitted a matching call among the last calls it remembers; when two could
// match it links neither. It keeps 64-bit digests of keys (a call's
// arguments may be large; a collision would only link two sessions that
// share no work) and ids, never anything else, and forgets the oldest call
// first. It is safe for concurrent use.
//
// The gateway remembers the calls of the sessions it names itself (requests
// without Ahead-Session). A conversation's next request is known by the
// call ids of the tool results it returns (SessionOfID). When the agent's
// call reaches the tool side in a session of its own, the engine asks Link
// (engine.Linker) and folds the gateway's session into the tool side's
// (engine.Engine.Join); from then on the gateway speaks to the engine in
// the tool side's session. Which session a name stands for is kept once,
// by the engine with its own sessions (engine.Engine.Resolve): the Linker
// holds only the evidence.
//
// The gateway parses a response beside the copy that reaches the agent,
// never holding the copy back, so on a loaded machine the agent may make a
// call before the gateway has remembered it. A tool-side call that no
// model had emitted is kept as well, with its time, and Remember links the
// other way: the one tool-side session that made the call after the
// response that emits it began.
type Linker struct {
	mu    sync.Mutex // protects the fields below
	ring  []linked   // the remembered calls, oldest at next once full
	next  int
	full  bool
	keys  map[uint64]map[string]int // call key digest (callkey.Key.Hash) → session → count
	ids   map[string]map[string]int // call id → session → count
	limit int

	// Tool-side calls no model had emitted when they were made.
	made     []madeCall // a ring like ring
	madeNext int
	madeKeys map[uint64]map[string]time.Time // key digest → tool-side session → latest time
}

type madeCall struct {
	session string
	key     uint64
	at      time.Time
}

type linked struct {
	session string
	key     uint64 // the call key's digest, if hasKey
	hasKey  bool
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
		keys: map[uint64]map[string]int{}, ids: map[string]map[string]int{},
		made: make([]madeCall, n), madeKeys: map[uint64]map[string]time.Time{},
	}
}

// Remember records that session's model emitted a call, in a response
// whose request was sent at since. Arguments that are not a JSON object
// are remembered by id alone. If the agent made the call already (the
// gateway heard it late), Remember links session to the agent's tool-side
// session and returns it, as Link would have; the caller folds session
// into it (the engine ignores a session folded already). It does so only on the same evidence as Link: exactly
// one session emitted the call, and exactly one tool-side session made it
// since, without a model's emission to link it to.
func (l *Linker) Remember(session, id, tool string, args []byte, since time.Time) (into string, ok bool) {
	if session == "" {
		return "", false
	}
	key, err := callkey.Make(tool, args)
	e := linked{session: session, id: id, valid: true}
	if err == nil {
		e.key, e.hasKey = key.Hash(), true
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
	if e.hasKey {
		add(l.keys, e.key, session)
	}
	if id != "" {
		add(l.ids, id, session)
	}
	if !e.hasKey {
		return "", false
	}
	return l.lateLinkLocked(session, e.key, since)
}

// lateLinkLocked links session, whose model has just emitted the call
// whose key has digest d, to the one tool-side session that made that call
// at or after since, when nothing else could claim it.
func (l *Linker) lateLinkLocked(session string, d uint64, since time.Time) (into string, ok bool) {
	if from, ok := only(l.keys[d]); !ok || from != session {
		return "", false
	}
	for s, at := range l.madeKeys[d] {
		if at.Before(since) || s == session {
			continue
		}
		if into != "" {
			return "", false // two sessions made it: neither
		}
		into = s
	}
	if into == "" {
		return "", false
	}
	if m := l.madeKeys[d]; len(m) == 1 {
		delete(l.madeKeys, d)
	} else {
		delete(m, into)
	}
	return into, true
}

// madeLocked keeps a tool-side call no model had emitted.
func (l *Linker) madeLocked(session string, key uint64, at time.Time) {
	old := &l.made[l.madeNext]
	if m := l.madeKeys[old.key]; m != nil && old.session != "" && m[old.session].Equal(old.at) {
		if delete(m, old.session); len(m) == 0 {
			delete(l.madeKeys, old.key)
		}
	}
	*old = madeCall{session: session, key: key, at: at}
	if l.madeNext++; l.madeNext == l.limit {
		l.madeNext = 0
	}
	m := l.madeKeys[key]
	if m == nil {
		m = map[string]time.Time{}
		l.madeKeys[key] = m
	}
	m[session] = at
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
	if e.hasKey {
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
	d := key.Hash()
	l.mu.Lock()
	defer l.mu.Unlock()
	return only(l.keys[d])
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
// one session emitted it among the remembered calls, and that session is
// not the caller's own. The caller folds from into session; the engine
// keeps the fold, and ignores a from folded already (into this session,
// or into another, which one call in a third cannot overrule). A session
// that could be either of two links to neither. A call no session has
// emitted is kept for Remember, which may link it later.
func (l *Linker) Link(session string, key callkey.Key) (from string, ok bool) {
	now, d := time.Now(), key.Hash()
	l.mu.Lock()
	defer l.mu.Unlock()
	emitted := l.keys[d]
	if len(emitted) == 0 {
		l.madeLocked(session, d, now)
		return "", false
	}
	from, ok = only(emitted)
	if !ok || from == session {
		return "", false
	}
	return from, true
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
