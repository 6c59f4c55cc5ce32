package mcpproxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Upstreams of MCP 2026-07-28 (issue 26). That revision removed protocol
// sessions: no initialize handshake, no Mcp-Session-Id; a client discovers
// the server (server/discover) and every request carries its protocol
// version, client info and client capabilities in _meta. An HTTP upstream
// that speaks it keeps no state per connection, so one connection, the
// upstream's hub, serves every session of ahead; each call carries its
// agent's identity and capabilities. A server that keeps sessions (every
// revision up to 2025-11-25) is reached as before: a connection per
// session, asked for the agent's own revision.
//
// Which era an HTTP upstream is in is learnt by the hub's connection: the
// Go SDK's client discovers first and falls back to the initialize
// handshake when the server refuses; it is learnt again when the upstream
// refuses the revision later (forget) and whenever the hub reconnects. A fallback connection is
// closed at once (its session is ahead's, not an agent's), and every
// session then connects on its own, exactly as before. Command and
// transport upstreams have a connection (a process) per session whatever
// they speak: a process keeps state whatever the protocol says; they are
// asked for the agent's revision, and the SDK discovers when that is
// 2026-07-28.
//
// A hub cannot tell the runs apart in what the upstream sends unasked, so
// it forwards only what names its run: progress (the agent's token is
// replaced by one of the hub's for the call), list changes (to every
// session: each lists again) and resource updates (to the sessions that
// subscribed). Log messages of a stateless upstream are not forwarded
// (its calls carry no log level, so it sends none).

// revisionStateless is the first MCP revision without protocol sessions.
const revisionStateless = "2026-07-28"

// era is what ahead knows of an HTTP upstream's protocol revision.
type era int

const (
	eraUnknown   era = iota // not reached yet
	eraSessions             // keeps sessions (2025-11-25 and older): a connection per session
	eraStateless            // 2026-07-28 or later: the hub serves every session
)

// errSessions: the upstream keeps sessions, so the hub does not serve; each
// session connects on its own.
var errSessions = errors.New("upstream keeps protocol sessions")

// stateless reports whether cs speaks a revision without sessions.
func stateless(cs *mcp.ClientSession) bool {
	res := cs.InitializeResult()
	return res != nil && res.ProtocolVersion >= revisionStateless
}

// newHub returns the hub of an HTTP upstream: a slot of no session.
func newHub(p *Proxy, u *upstream) *slot {
	return &slot{s: &session{p: p, id: "upstream " + u.Name}, up: u, hub: true}
}

func (u *upstream) eraOf() era {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.era
}

// reached records the revision a connection to u negotiated.
func (u *upstream) reached(cs *mcp.ClientSession, hub bool) {
	res := cs.InitializeResult()
	if res == nil {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	u.revision = res.ProtocolVersion
	if hub {
		u.era = eraSessions
		if stateless(cs) {
			u.era = eraStateless
		}
	}
}

// sharing returns the hub that serves sl's session, if the upstream is
// stateless.
func (sl *slot) sharing() *slot {
	if h := sl.up.hub; h != nil && !sl.hub && sl.up.eraOf() == eraStateless {
		return h
	}
	return nil
}

// UpstreamState is what ahead knows of one upstream, for stats.
type UpstreamState struct {
	Name string `json:"name"`
	// Revision is the MCP revision the upstream was last reached with
	// ("" before it was).
	Revision string `json:"revision"`
	// Shared: one connection serves every session (a stateless HTTP
	// upstream); otherwise each session has its own.
	Shared bool `json:"shared"`
	// Connections counts the connections made to it (every session's,
	// and the hub's), restarts included.
	Connections int64 `json:"connections"`
}

// Upstreams returns the state of every upstream, in configuration order.
func (p *Proxy) Upstreams() []UpstreamState {
	out := make([]UpstreamState, 0, len(p.ups))
	for _, u := range p.ups {
		u.mu.Lock()
		out = append(out, UpstreamState{Name: u.Name, Revision: u.revision, Shared: u.era == eraStateless, Connections: u.connections})
		u.mu.Unlock()
	}
	return out
}

// progressRoute is where progress a hub's upstream reports for one call
// goes: the agent's session and its own token.
type progressRoute struct {
	s     *session
	token any
}

// routeProgress gives a call on the hub its own progress token, so that
// the upstream's progress reaches the agent that asked for it; the
// returned function ends the route.
func (u *upstream) routeProgress(s *session, meta mcp.Meta) func() {
	tok, ok := meta["progressToken"]
	if !ok || tok == nil {
		return func() {}
	}
	u.mu.Lock()
	u.progressSeq++
	key := fmt.Sprintf("ahead-%d", u.progressSeq)
	if u.progress == nil {
		u.progress = make(map[string]progressRoute)
	}
	u.progress[key] = progressRoute{s: s, token: tok}
	u.mu.Unlock()
	meta["progressToken"] = key
	return func() {
		u.mu.Lock()
		delete(u.progress, key)
		u.mu.Unlock()
	}
}

// subscribe adds s to the subscribers of a resource of the hub's upstream:
// the first subscription opens the upstream's.
func (u *upstream) subscribe(ctx context.Context, s *session, cs *mcp.ClientSession, params *mcp.SubscribeParams) error {
	u.mu.Lock()
	if u.subs == nil {
		u.subs = make(map[string]map[*session]bool)
	}
	first := len(u.subs[params.URI]) == 0
	if first {
		u.subs[params.URI] = make(map[*session]bool)
	}
	u.subs[params.URI][s] = true
	u.mu.Unlock()
	if !first {
		return nil
	}
	if err := u.hub.s.p.acks.subscribe(ctx, cs, params); err != nil {
		u.unsubscribe(context.WithoutCancel(ctx), s, nil, params.URI)
		return err
	}
	return nil
}

// unsubscribe removes s from the subscribers of uri (every uri if "");
// the last one leaving closes the upstream's subscription. cs nil means
// the hub's live connection, if any.
func (u *upstream) unsubscribe(ctx context.Context, s *session, cs *mcp.ClientSession, uri string) error {
	u.mu.Lock()
	var last []string
	for k, subs := range u.subs {
		if (uri == "" || k == uri) && subs[s] {
			delete(subs, s)
			if len(subs) == 0 {
				delete(u.subs, k)
				last = append(last, k)
			}
		}
	}
	u.mu.Unlock()
	if cs == nil {
		cs = u.hub.live()
	}
	if cs == nil {
		return nil
	}
	var errs []error
	for _, k := range last {
		errs = append(errs, cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: k}))
	}
	return errors.Join(errs...)
}

func (u *upstream) subscribers(uri string) []*session {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Collect(maps.Keys(u.subs[uri]))
}

// newHubClient returns the MCP client of a hub: ahead's identity and no
// capabilities of its own (each call carries its agent's), no automatic
// answers to requests for input (they go to the agent, or are discarded),
// and what the upstream sends routed to the sessions it concerns.
func (p *Proxy) newHubClient(h *slot) *mcp.Client {
	u := h.up
	changed := func(what int) {
		for _, s := range p.liveSessions() {
			s.upstreamChanged(u, what)
		}
	}
	opts := &mcp.ClientOptions{
		Logger:         discardLogger,
		Capabilities:   &mcp.ClientCapabilities{},
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			changed(listTools)
		},
		PromptListChangedHandler: func(context.Context, *mcp.PromptListChangedRequest) {
			changed(listPrompts)
		},
		ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) {
			changed(listResources)
		},
		ResourceUpdatedHandler: func(ctx context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			for _, s := range u.subscribers(req.Params.URI) {
				s.notify(context.Background(), "notifications/resources/updated", req.Params)
			}
		},
		ProgressNotificationHandler: func(ctx context.Context, req *mcp.ProgressNotificationClientRequest) {
			key, _ := req.Params.ProgressToken.(string)
			u.mu.Lock()
			r, ok := u.progress[key]
			u.mu.Unlock()
			if !ok {
				return
			}
			params := *req.Params
			params.ProgressToken = r.token
			rctx, cancel := r.s.relate(ctx, r.token)
			defer cancel()
			to := r.s.downstream(rctx)
			if to == nil {
				return
			}
			if err := to.NotifyProgress(rctx, &params); err != nil {
				p.log.Debug("forwarding progress", "session", r.s.id, "err", err)
			}
		},
	}
	c := mcp.NewClient(&mcp.Implementation{Name: p.opts.Name, Version: p.opts.Version}, opts)
	c.AddSendingMiddleware(sendRaw, func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			res, err := next(ctx, method, req)
			if cs, ok := req.GetSession().(*mcp.ClientSession); ok && staleEra(err) {
				h.forget(cs)
			}
			return res, err
		}
	})
	return c
}

// staleEra reports whether err is the upstream refusing the revision the
// hub reached it with (2026-07-28's unsupported protocol version): it has
// changed since, restarted as a server of an older revision, say.
func staleEra(err error) bool {
	je, ok := errors.AsType[*jsonrpc.Error](err)
	return ok && je.Code == mcp.CodeUnsupportedProtocolVersion
}

// forget drops the hub's connection cs after the upstream refused its
// revision, and what was learnt of the upstream's era: the next request
// learns it again (discover, falling back to the handshake), instead of
// every call failing until ahead restarts. An upstream gone away (a broken
// connection, a 404 without a JSON-RPC answer) is a crash: the hub
// restarts, and learns the era again, as any start does.
func (h *slot) forget(cs *mcp.ClientSession) {
	h.mu.Lock()
	if h.cs != cs {
		h.mu.Unlock()
		return
	}
	h.cs = nil
	h.mu.Unlock()
	u := h.up
	u.mu.Lock()
	u.era = eraUnknown
	u.mu.Unlock()
	h.s.p.log.Info("upstream refuses "+revisionStateless+": learning its revision again", "upstream", u.Name)
	cs.Close()
}

// liveSessions returns every session of the proxy.
func (p *Proxy) liveSessions() []*session {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Collect(maps.Values(p.byID))
}

// requestMeta returns the _meta of a call s makes on a hub: the agent's
// own (cloned: the SDK adds to it), with the agent's identity and
// capabilities, which a stateless upstream reads from each request.
func (s *session) requestMeta(meta mcp.Meta) mcp.Meta {
	out := maps.Clone(meta)
	if out == nil {
		out = make(mcp.Meta)
	}
	// Computed on the first call (after initialize, which fixes them);
	// the SDK only reads the values.
	s.mu.Lock()
	add := s.hubMeta
	s.mu.Unlock()
	if add == nil {
		add = mcp.Meta{
			mcp.MetaKeyClientInfo:         &mcp.Implementation{Name: s.clientName(), Version: s.clientVersion()},
			mcp.MetaKeyClientCapabilities: capabilitiesMeta(s.mirroredCaps()),
		}
		s.mu.Lock()
		s.hubMeta = add
		s.mu.Unlock()
	}
	maps.Copy(out, add)
	return out
}

// capabilitiesMeta is caps as 2026-07-28 puts them in _meta (roots only
// when the client has them).
func capabilitiesMeta(caps *mcp.ClientCapabilities) map[string]any {
	b, err := json.Marshal(caps)
	m := map[string]any{}
	if err == nil {
		_ = json.Unmarshal(b, &m)
	}
	delete(m, "roots")
	if caps.RootsV2 != nil {
		m["roots"] = caps.RootsV2
	}
	return m
}
