package mcpproxy

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"reflect"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MCP's 2026-07-28 revision (SEP-2575, SEP-2567) has no protocol sessions:
// no initialize handshake, no Mcp-Session-Id; every request carries its
// protocol version, the client's capabilities and identity in _meta, and
// server/discover replaces the handshake's answer. Speculation needs to
// know which calls belong to one agent run, so ahead serves both eras on
// one endpoint and names a run without a protocol session (runName):
//
//   - Streamable HTTP (Handler): a request whose Mcp-Protocol-Version
//     header is 2026-07-28 or later goes to a stateless handler (the Go
//     SDK offers the revision only there), every other request (an
//     initialize, one with Mcp-Session-Id, GET, DELETE) to the stateful
//     handler of the older revisions, as before.
//   - stdio (Serve): the process is the run; new-era requests are served
//     on the same connection as an older client's would be.
//
// Results forwarded raw from an upstream that speaks an older revision
// lack resultType, which 2026-07-28 clients require: the new-era path
// marks them complete. Notifications (list_changed, resource updates) go
// to the run's subscriptions/listen streams (listen.go); a call's log
// messages go on its own stream when it asked for them (a level in its
// _meta) and the run has a 2026-07-28 connection of its own to the
// upstream; requests to the user (sampling, elicitation, roots) have no
// channel in a stateless run: its capabilities do not offer them.

// newEraVersion is the first revision without protocol sessions.
const newEraVersion = "2026-07-28"

// SessionHeader is the HTTP header that names an agent run's session, as
// the model gateway and the HTTP API read it.
const SessionHeader = "Ahead-Session"

// maxRunName bounds a run name taken from a request (the header's value).
const maxRunName = 256

// requestVersion returns the protocol version a request carries in its
// _meta (the new era), or "".
func requestVersion(req mcp.Request) string {
	p := req.GetParams()
	if p == nil || reflect.ValueOf(p).IsNil() {
		return ""
	}
	v, _ := p.GetMeta()[mcp.MetaKeyProtocolVersion].(string)
	return v
}

func isNewEra(req mcp.Request) bool { return requestVersion(req) >= newEraVersion }

// newEraHTTP reports whether an HTTP request follows the 2026-07-28
// revision: its Mcp-Protocol-Version header (which the revision requires
// on every request, equal to the version in _meta) says so.
func newEraHTTP(r *http.Request) bool {
	return r.Header.Get("Mcp-Protocol-Version") >= newEraVersion
}

// runName names the agent run of a request without a protocol session, in
// this order: the Ahead-Session header; the trace id of a W3C traceparent
// in the request's _meta (SEP-414) or its headers ("trace-" + the id).
// "" means the request names no run.
func runName(req mcp.Request) (string, error) {
	var h http.Header
	if e := req.GetExtra(); e != nil {
		h = e.Header
	}
	if v := strings.TrimSpace(h.Get(SessionHeader)); v != "" {
		if len(v) > maxRunName {
			return "", &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest,
				Message: fmt.Sprintf("ahead: %s header: %d bytes, at most %d", SessionHeader, len(v), maxRunName)}
		}
		return v, nil
	}
	var tp string
	if p := req.GetParams(); p != nil && !reflect.ValueOf(p).IsNil() {
		tp, _ = p.GetMeta()["traceparent"].(string)
	}
	if tp == "" {
		tp = h.Get("traceparent")
	}
	if tp == "" {
		return "", nil
	}
	id, ok := traceID(tp)
	if !ok {
		// A malformed traceparent names nothing (W3C: ignore it); the
		// request is served as one that names no run.
		return "", nil
	}
	return "trace-" + id, nil
}

// traceID returns the trace id of a W3C traceparent
// (version-traceid-parentid-flags), if it is valid.
func traceID(tp string) (string, bool) {
	parts := strings.Split(strings.TrimSpace(tp), "-")
	if len(parts) < 4 || len(parts[0]) != 2 || parts[0] == "ff" || (parts[0] == "00" && len(parts) != 4) {
		return "", false
	}
	if len(parts[1]) != 32 || len(parts[2]) != 16 || len(parts[3]) != 2 {
		return "", false
	}
	for _, p := range parts[:4] {
		if strings.Trim(p, "0123456789abcdef") != "" {
			return "", false
		}
	}
	if strings.Trim(parts[1], "0") == "" || strings.Trim(parts[2], "0") == "" {
		return "", false
	}
	return parts[1], true
}

// hopMeta returns a request's _meta without what 2026-07-28 puts there
// about the agent's own hop (its protocol version, identity, capabilities
// and log level): ahead's connection to the upstream says its own (an
// upstream that keeps sessions refuses a request that carries them). m is
// not changed; without such keys it is returned as is.
func hopMeta(m mcp.Meta) mcp.Meta {
	var out mcp.Meta
	for _, k := range hopKeys {
		if _, ok := m[k]; ok {
			if out == nil {
				out = maps.Clone(m)
			}
			delete(out, k)
		}
	}
	if out == nil {
		return m
	}
	return out
}

var hopKeys = []string{mcp.MetaKeyProtocolVersion, mcp.MetaKeyClientInfo, mcp.MetaKeyClientCapabilities, mcp.MetaKeyLogLevel}

// Linker finds the session of the model that emitted a call, on exact
// evidence (gateway.Linker is one): it lets a new-era call that names no
// run join its conversation's run.
type Linker interface {
	Session(tool string, args []byte) (session string, ok bool)
}

// resolver is what the proxy asks of the engine about names: the session a
// name stands for after the engine folded it into another (Join).
type resolver interface{ Resolve(session string) string }

// runFor returns the session of a new-era HTTP request and the function
// to call when the request is served. A named run is one session for all
// its requests (its upstream connections, its speculation, its traces),
// kept until it has been idle for SessionTimeout. A tools/call that names
// no run joins the conversation whose model emitted it (Linker), if
// exactly one did. Any other request that names no run is a run of its
// own: a fresh session, ended with the request, so nothing per session is
// shared between requests that cannot be told apart and no prediction comes
// from another run.
//
// init is what the request says of its client (its protocol version,
// identity and capabilities, from _meta): a run keeps its first request's.
func (p *Proxy) runFor(method string, req mcp.Request, init *mcp.InitializeParams) (*session, func(), error) {
	name, err := runName(req)
	if err != nil {
		return nil, nil, err
	}
	if name == "" && method == "tools/call" {
		name = p.linkedRun(req.GetParams().(*mcp.CallToolParamsRaw))
	}
	if name != "" {
		return p.runSession(name, init)
	}
	id := "mcp-" + rand.Text()
	s, release, err := p.runSession(id, init)
	if err != nil {
		return nil, nil, err
	}
	return s, func() {
		release()
		if eng := p.engine(); eng != nil {
			eng.EndSession(id)
		}
		p.EndSession(id)
	}, nil
}

// linkedRun returns the session whose model emitted the call, as the
// engine knows it now, or "".
func (p *Proxy) linkedRun(params *mcp.CallToolParamsRaw) string {
	p.mu.Lock()
	l, eng := p.linker, p.eng
	p.mu.Unlock()
	if l == nil || params == nil {
		return ""
	}
	args := params.Arguments
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage("{}")
	}
	id, ok := l.Session(params.Name, args)
	if !ok {
		return ""
	}
	if r, ok := eng.(resolver); ok {
		id = r.Resolve(id)
	}
	return id
}

// runSession returns the session of run id, started on first use with the
// identity and capabilities of the request that started it (init), and
// held until release is called (holdSession).
func (p *Proxy) runSession(id string, init *mcp.InitializeParams) (s *session, release func(), err error) {
	s, release, err = p.holdSession(id)
	if err != nil {
		return nil, nil, err
	}
	first := s.client.CompareAndSwap(false, true)
	if init != nil {
		s.mu.Lock()
		if s.init == nil {
			s.init = init
		}
		s.mu.Unlock()
	}
	if first && s.ss == nil {
		// The run exists before its first call: let the engine speculate
		// on that call too (the predictor's session-start patterns).
		if b, ok := p.engine().(interface{ Begin(session string) }); ok {
			b.Begin(s.id)
		}
	}
	return s, release, nil
}

// discover answers server/discover with the upstreams' merged
// capabilities, instructions and (with one upstream) server info, as the
// older revisions' initialize does.
func (s *session) discover(ctx context.Context, res mcp.Result) mcp.Result {
	dr, ok := res.(*mcp.DiscoverResult)
	if !ok {
		return res
	}
	s.connectAll(ctx)
	out := *dr
	caps, instr, info := s.capabilities()
	out.Capabilities = newEraCapabilities(caps)
	if instr != "" {
		out.Instructions = instr
	}
	if info != nil {
		meta := make(mcp.Meta, len(dr.Meta)+1)
		for k, v := range dr.Meta {
			meta[k] = v
		}
		meta[mcp.MetaKeyServerInfo] = info
		out.Meta = meta
	}
	return &out
}

// newEraCapabilities is what a new-era client may use through ahead:
// everything the upstreams offer but logging, which ahead cannot offer
// whole: a call's log messages reach the run that asked (a level in the
// call's _meta) only from an upstream connection of its own, not through a
// hub (stateless.go). Notifications (list_changed, resource updates) come
// on the client's subscriptions/listen (listen.go).
func newEraCapabilities(c *mcp.ServerCapabilities) *mcp.ServerCapabilities {
	out := *c
	out.Logging = nil
	return &out
}

// The results whose resultType a 2026-07-28 client reads. The SDK keeps it
// unexported (set only by its own handlers), so a forwarded result is copied
// onto a template decoded with resultType "complete".
var (
	completeCall   = completeTemplate[mcp.CallToolResult]()
	completePrompt = completeTemplate[mcp.GetPromptResult]()
	completeRead   = completeTemplate[mcp.ReadResourceResult]()
)

func completeTemplate[T any]() *T {
	t := new(T)
	if err := json.Unmarshal([]byte(`{"resultType":"complete"}`), t); err != nil {
		panic(fmt.Sprintf("mcpproxy: decoding a complete %T: %v", t, err))
	}
	return t
}

// completed returns r marked complete, unless it asks for input
// (input_required passes as the upstream sent it). r is not changed (a
// stored result may be shared): the exported fields are copied onto tmpl.
func completed[T any, P interface {
	*T
	NeedsInput() bool
}](r P, tmpl *T) P {
	if r == nil || r.NeedsInput() {
		return r
	}
	out := new(T)
	*out = *tmpl
	src, dst := reflect.ValueOf(r).Elem(), reflect.ValueOf(out).Elem()
	for i := range src.NumField() {
		if src.Type().Field(i).IsExported() {
			dst.Field(i).Set(src.Field(i))
		}
	}
	return out
}

// completeResult marks a forwarded result complete for a new-era client,
// and gives a result that carries cache hints a scope (2026-07-28 requires
// one: "public", the protocol's default, when neither ahead nor the
// upstream says; ttlMs 0 then says it is stale at once).
func completeResult(res mcp.Result) mcp.Result {
	switch r := res.(type) {
	case *mcp.CallToolResult:
		return completed(r, completeCall)
	case *mcp.GetPromptResult:
		return completed(r, completePrompt)
	case *mcp.ReadResourceResult:
		out := completed(r, completeRead)
		if out.CacheScope == "" {
			if out == r {
				cp := *r
				out = &cp
			}
			out.CacheScope = "public"
		}
		return out
	case *mcp.ListPromptsResult:
		scoped(&r.Cacheable)
	case *mcp.ListResourcesResult:
		scoped(&r.Cacheable)
	case *mcp.ListResourceTemplatesResult:
		scoped(&r.Cacheable)
	case *mcp.ListToolsResult:
		scoped(&r.Cacheable)
	}
	return res
}

// scoped gives cache hints ahead built a scope (the lists are ahead's own
// results, built for this request).
func scoped(c *mcp.Cacheable) {
	if c.CacheScope == "" {
		c.CacheScope = "public"
	}
}

// mergeCache folds an upstream's cache hints into the merged listing's:
// the shortest time to live, and private if any is private (a client may
// keep the merged list only as long as every part of it).
func mergeCache(acc *mcp.Cacheable, first bool, c mcp.Cacheable) {
	if first || c.TTLMs < acc.TTLMs {
		acc.TTLMs = c.TTLMs
	}
	scope := c.CacheScope
	if scope == "" {
		scope = "public"
	}
	if first || scope == "private" {
		acc.CacheScope = scope
	}
}
