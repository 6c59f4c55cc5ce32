package mcpproxy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Notifications for 2026-07-28 clients (issue 26). The revision has no
// session stream for what a server sends unasked: a client opens a
// subscriptions/listen request (SEP-2575) naming what it wants (tools,
// prompts or resources list_changed; updates of given resource URIs), the
// server acknowledges what it agrees to as the stream's first message, and
// sends each such notification on that request's stream, its _meta naming
// the listen (io.modelcontextprotocol/subscriptionId), until the client
// cancels it.
//
// A listen is served in the run it names, as any request (runFor; over
// stdio, the process's session), and is one of its session's listeners: what
// the session's upstreams send it (session.notify) goes to the listeners
// that asked for it, never to another run's. ahead agrees to what the run's
// upstreams offer; a resource subscription is the session's on the
// upstream that owns the URI, counted, so that two listens of one run
// subscribe once and the last to end unsubscribes.
//
// The SDK's own listen handler does the protocol (the acknowledgement, the
// wait for the client's cancellation, the request id); the proxy agrees,
// subscribes upstream through the server's SubscribeHandler (called by that
// handler for each URI, with the listen's context) and learns the id from
// the acknowledgement it sends (listenAck), which is when the listener
// starts to receive.

// listenKey carries the listener of the subscriptions/listen request being
// served.
type listenKey struct{}

// listener is one subscriptions/listen stream of a session.
type listener struct {
	s  *session
	ss *mcp.ServerSession // the SDK session of the listen request: its stream
	id any                // the listen's request id, set by the acknowledgement
	// want is what ahead agreed to (set by the acknowledgement).
	want mcp.NotificationSubscriptions
	// acked is closed once the acknowledgement is sent (ok: it was):
	// the listener is one of its session's from just before, so that a
	// client that read the acknowledgement misses nothing, but nothing is
	// sent on the stream before it.
	acked chan struct{}
	ok    bool
}

// wants reports whether l asked for notifications of method (about params).
func (l *listener) wants(method string, params mcp.Params) bool {
	switch method {
	case "notifications/tools/list_changed":
		return l.want.ToolsListChanged
	case "notifications/prompts/list_changed":
		return l.want.PromptsListChanged
	case "notifications/resources/list_changed":
		return l.want.ResourcesListChanged
	case "notifications/resources/updated":
		p, ok := params.(*mcp.ResourceUpdatedNotificationParams)
		return ok && slices.Contains(l.want.ResourceSubscriptions, p.URI)
	}
	return false
}

// listened reports whether notifications of method go to a 2026-07-28
// client's listens rather than on its session (logging does not: a
// client asks for it per request).
func listened(method string) bool {
	switch method {
	case "notifications/tools/list_changed", "notifications/prompts/list_changed",
		"notifications/resources/list_changed", "notifications/resources/updated":
		return true
	}
	return false
}

// stamped returns params for the listen of id: a copy with the
// subscription id in its _meta (params may go to several listens).
func stamped(params mcp.Params, id any) mcp.Params {
	meta := mcp.Meta{mcp.MetaKeySubscriptionID: id}
	switch p := params.(type) {
	case *mcp.ToolListChangedParams:
		return &mcp.ToolListChangedParams{Meta: meta}
	case *mcp.PromptListChangedParams:
		return &mcp.PromptListChangedParams{Meta: meta}
	case *mcp.ResourceListChangedParams:
		return &mcp.ResourceListChangedParams{Meta: meta}
	case *mcp.ResourceUpdatedNotificationParams:
		cp := *p
		for k, v := range p.Meta {
			if _, ok := meta[k]; !ok {
				meta[k] = v
			}
		}
		cp.Meta = meta
		return &cp
	}
	return params
}

// listenTimeout bounds sending one notification on a listen stream (a
// client that does not read its stream holds up only this long).
const listenTimeout = 10 * time.Second

// notifyListeners sends a notification to the session's listens that asked
// for it, and reports whether the session has any listen.
func (s *session) notifyListeners(method string, params mcp.Params) bool {
	s.mu.Lock()
	ls := slices.Clone(s.listeners)
	s.mu.Unlock()
	for _, l := range ls {
		if !l.wants(method, params) {
			continue
		}
		// Not the upstream's context: a notification unrelated to any
		// request goes on the listen's own stream.
		ctx, cancel := context.WithTimeout(context.Background(), listenTimeout)
		sent := false
		select {
		case <-l.acked:
			sent = l.ok
		case <-ctx.Done():
		}
		if !sent {
			cancel()
			continue
		}
		if err := notifyRaw(ctx, l.ss, method, stamped(params, l.id)); err != nil {
			s.p.log.Debug("notifying a listen", "session", s.id, "method", method, "err", err)
		}
		cancel()
	}
	return len(ls) > 0
}

// listen serves a subscriptions/listen request in session s.
func (s *session) listen(ctx context.Context, ss *mcp.ServerSession, next mcp.MethodHandler, method string, req mcp.Request) (mcp.Result, error) {
	params, _ := req.GetParams().(*mcp.SubscriptionsListenParams)
	if params == nil || params.Notifications == nil {
		return next(ctx, method, req) // the SDK's error
	}
	s.connectAll(ctx)
	caps, _, _ := s.capabilities()
	agreed := agree(params.Notifications, caps)
	params.Notifications = &agreed // the request's own params: the SDK's handler reads them
	l := &listener{s: s, ss: ss}
	defer s.unlisten(l)
	return next(context.WithValue(ctx, listenKey{}, l), method, req)
}

// agree returns what ahead sends of what a listen asks for: what the
// upstreams offer (caps, merged).
func agree(want *mcp.NotificationSubscriptions, caps *mcp.ServerCapabilities) mcp.NotificationSubscriptions {
	var out mcp.NotificationSubscriptions
	out.ToolsListChanged = want.ToolsListChanged && caps.Tools != nil && caps.Tools.ListChanged
	out.PromptsListChanged = want.PromptsListChanged && caps.Prompts != nil && caps.Prompts.ListChanged
	out.ResourcesListChanged = want.ResourcesListChanged && caps.Resources != nil && caps.Resources.ListChanged
	if caps.Resources != nil && caps.Resources.Subscribe {
		out.ResourceSubscriptions = slices.Clone(want.ResourceSubscriptions)
	}
	return out
}

// listenAck is the sending middleware that learns a listen's id and what
// was agreed from its acknowledgement, and starts the listener with it: a
// notification for it waits until the acknowledgement (the stream's first
// message) is sent.
func listenAck(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		l, ok := ctx.Value(listenKey{}).(*listener)
		if !ok || method != "notifications/subscriptions/acknowledged" {
			return next(ctx, method, req)
		}
		params, ok := req.GetParams().(*mcp.SubscriptionsAcknowledgedParams)
		if !ok {
			return next(ctx, method, req)
		}
		l.id = params.Meta[mcp.MetaKeySubscriptionID]
		l.want = params.Notifications
		l.acked = make(chan struct{})
		l.s.mu.Lock()
		l.s.listeners = append(l.s.listeners, l)
		l.s.mu.Unlock()
		res, err := next(ctx, method, req)
		l.ok = err == nil
		close(l.acked)
		if err != nil {
			l.s.unlisten(l)
		}
		return res, err
	}
}

// unlisten ends a listener.
func (s *session) unlisten(l *listener) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.listeners = slices.DeleteFunc(s.listeners, func(x *listener) bool { return x == l })
}

// listening reports whether a listen of the session is open.
func (s *session) listening() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.listeners) > 0
}

// watch is a resource subscription of a session's listens on an upstream.
type watch struct {
	n   int                // listens subscribed
	cs  *mcp.ClientSession // the connection subscribed on
	hub *upstream          // the upstream whose hub cs is, if it is one
}

// errNoListen: a subscription outside a listen (the SDK calls the server's
// SubscribeHandler only from its listen handler; resources/subscribe is the
// proxy's).
var errNoListen = &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "ahead: a subscription outside subscriptions/listen"}

// subscribeHandler is the downstream servers' SubscribeHandler: a listen
// subscribing to a resource.
func subscribeHandler(ctx context.Context, req *mcp.SubscribeRequest) error {
	l, ok := ctx.Value(listenKey{}).(*listener)
	if !ok {
		return errNoListen
	}
	return l.s.watch(ctx, req.Params.URI)
}

// unsubscribeHandler is the downstream servers' UnsubscribeHandler: a
// listen ending (its context is done: the upstream is told regardless).
func unsubscribeHandler(ctx context.Context, req *mcp.UnsubscribeRequest) error {
	l, ok := ctx.Value(listenKey{}).(*listener)
	if !ok {
		return errNoListen
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), listenTimeout)
	defer cancel()
	return l.s.unwatch(ctx, req.Params.URI)
}

// watch subscribes the session to uri on the upstream that owns it, unless
// another of its listens did.
func (s *session) watch(ctx context.Context, uri string) error {
	s.mu.Lock()
	if w := s.watches[uri]; w != nil {
		w.n++
		s.mu.Unlock()
		return nil
	}
	s.mu.Unlock()
	cs, err := s.resourceOwner(ctx, uri)
	if err != nil {
		return err
	}
	w := &watch{n: 1, cs: cs, hub: s.hubOf(cs)}
	params := &mcp.SubscribeParams{URI: uri}
	if w.hub != nil {
		err = w.hub.subscribe(ctx, s, cs, params)
	} else {
		err = s.p.acks.subscribe(ctx, cs, params)
	}
	if err != nil {
		return passErrOnly(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.watches == nil {
		s.watches = make(map[string]*watch)
	}
	if old := s.watches[uri]; old != nil {
		// Another listen subscribed meanwhile: one subscription is
		// enough, and ours is as good (subscribing is idempotent).
		old.n++
		return nil
	}
	s.watches[uri] = w
	return nil
}

// unwatch ends a listen's subscription to uri; the last one leaving
// unsubscribes upstream.
func (s *session) unwatch(ctx context.Context, uri string) error {
	s.mu.Lock()
	w := s.watches[uri]
	if w == nil {
		s.mu.Unlock()
		return nil
	}
	w.n--
	if w.n > 0 {
		s.mu.Unlock()
		return nil
	}
	delete(s.watches, uri)
	s.mu.Unlock()
	var err error
	if w.hub != nil {
		err = w.hub.unsubscribe(ctx, s, w.cs, uri)
	} else {
		err = w.cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: uri})
	}
	if err != nil && !errors.Is(err, mcp.ErrConnectionClosed) {
		s.p.log.Debug("unsubscribing upstream", "session", s.id, "uri", uri, "err", err)
	}
	return nil
}

// listenCapabilities are the downstream servers' own capabilities: every
// notification a listen may ask for. They are never announced (initialize
// and server/discover answer the upstreams'); the SDK's listen handler
// agrees to what a listen asks within them, after ahead narrowed it to
// what the run's upstreams offer (session.listen).
func listenCapabilities() *mcp.ServerCapabilities {
	return &mcp.ServerCapabilities{
		Tools:     &mcp.ToolCapabilities{ListChanged: true},
		Prompts:   &mcp.PromptCapabilities{ListChanged: true},
		Resources: &mcp.ResourceCapabilities{ListChanged: true, Subscribe: true},
	}
}

// subAcks lets a subscription on a 2026-07-28 upstream connection wait for
// the upstream's acknowledgement: the SDK's ClientSession.Subscribe opens
// the listen and returns before the upstream answers, and a run told it is
// subscribed must not miss an update sent meanwhile.
type subAcks struct {
	mu      sync.Mutex // protects waiting
	waiting map[subAck][]chan struct{}
}

type subAck struct {
	cs  *mcp.ClientSession
	uri string
}

// expect returns a channel closed when cs's upstream acknowledges a
// subscription to uri.
func (a *subAcks) expect(cs *mcp.ClientSession, uri string) chan struct{} {
	ch := make(chan struct{})
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.waiting == nil {
		a.waiting = make(map[subAck][]chan struct{})
	}
	k := subAck{cs, uri}
	a.waiting[k] = append(a.waiting[k], ch)
	return ch
}

// drop stops waiting on ch (closed or not).
func (a *subAcks) drop(cs *mcp.ClientSession, uri string, ch chan struct{}) {
	a.mu.Lock()
	defer a.mu.Unlock()
	k := subAck{cs, uri}
	a.waiting[k] = slices.DeleteFunc(a.waiting[k], func(c chan struct{}) bool { return c == ch })
	if len(a.waiting[k]) == 0 {
		delete(a.waiting, k)
	}
}

// middleware is the upstream clients' receiving middleware that sees the
// acknowledgements.
func (a *subAcks) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method == "notifications/subscriptions/acknowledged" {
			cs, _ := req.GetSession().(*mcp.ClientSession)
			if params, ok := req.GetParams().(*mcp.SubscriptionsAcknowledgedParams); ok && cs != nil {
				a.mu.Lock()
				for _, uri := range params.Notifications.ResourceSubscriptions {
					k := subAck{cs, uri}
					for _, ch := range a.waiting[k] {
						close(ch)
					}
					delete(a.waiting, k)
				}
				a.mu.Unlock()
			}
		}
		return next(ctx, method, req)
	}
}

// subscribe subscribes cs to params.URI and, on a 2026-07-28 connection,
// waits (at most listenTimeout) for the upstream to acknowledge it.
func (a *subAcks) subscribe(ctx context.Context, cs *mcp.ClientSession, params *mcp.SubscribeParams) error {
	if !stateless(cs) {
		return cs.Subscribe(ctx, params)
	}
	if !hasCap(cs, func(c *mcp.ServerCapabilities) bool { return c.Resources != nil && c.Resources.Subscribe }) {
		// It would acknowledge nothing: say so now, as an upstream of an
		// older revision answers resources/subscribe.
		return &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "the upstream offers no resource subscriptions"}
	}
	ch := a.expect(cs, params.URI)
	defer a.drop(cs, params.URI, ch)
	if err := cs.Subscribe(ctx, params); err != nil {
		return err
	}
	t := time.NewTimer(listenTimeout)
	defer t.Stop()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return fmt.Errorf("subscribing to %q: the upstream did not acknowledge within %s", params.URI, listenTimeout)
	}
}
