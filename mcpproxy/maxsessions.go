package mcpproxy

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// The bound on sessions (Options.MaxSessions). Every session may hold a
// connection to each upstream, and a command upstream's connection is a
// process: without a bound, a client naming a new run per request
// (Ahead-Session, traceparent) or initializing session after session
// would start processes until the machine gives out, each reaped only
// after SessionTimeout idle.

// DefaultMaxSessions is Options.MaxSessions when unset.
const DefaultMaxSessions = 1000

// sessionsRetryAfter is when a refused client may try again: an idle
// session then takes the place of none.
const sessionsRetryAfter = time.Second

// sessionsFull refuses a new session: max sessions are held, none idle
// that may give way. As an MCP client receives it: an internal error
// naming the bound, whose data says when to try again, as HTTP's
// Retry-After would (as for a full queue: callTool).
func sessionsFull(max int) *jsonrpc.Error {
	data, _ := json.Marshal(map[string]int64{"retry_after_ms": sessionsRetryAfter.Milliseconds()})
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Data: data,
		Message: fmt.Sprintf("ahead: %d MCP sessions held (max_mcp_sessions), none idle to give way; try again later", max)}
}

// makeRoomLocked makes room for one more session under MaxSessions. At
// the bound it takes the least recently used idle session out (not an MCP
// client's: closing that would end the client's protocol session; not one
// held or with a call in flight) and returns it, for the caller to evict
// once p.mu is released. p.mu is held.
func (p *Proxy) makeRoomLocked() (*session, error) {
	if p.opts.MaxSessions < 0 || len(p.byID) < p.opts.MaxSessions {
		return nil, nil
	}
	var lru *session
	for _, s := range p.byID {
		if s.ss != nil || s.pins > 0 || (lru != nil && !s.used.Before(lru.used)) || s.busy() {
			continue
		}
		lru = s
	}
	if lru == nil {
		return nil, sessionsFull(p.opts.MaxSessions)
	}
	delete(p.byID, lru.id)
	return lru, nil
}

// evict ends a session taken out by makeRoomLocked: its speculative work
// in the engine (its upstream state is gone, so none of it may be handed
// over) and its upstream connections. nil does nothing.
func (p *Proxy) evict(s *session) {
	if s == nil {
		return
	}
	p.log.Debug("session evicted to make room under max_mcp_sessions", "session", s.id)
	if eng := p.engine(); eng != nil {
		eng.EndSession(s.id)
	}
	s.close()
}
