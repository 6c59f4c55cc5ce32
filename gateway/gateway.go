package gateway

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/ahead-dev/ahead/predict"
)

// SessionHeader links a model request to an ahead session. It is removed
// before the request is forwarded.
const SessionHeader = "Ahead-Session"

// DefaultMaxBody is the largest request body read to be heard when Options
// sets none. Larger bodies are relayed unheard.
const DefaultMaxBody = 32 << 20

// ErrNoUpstream is returned by New when neither upstream is configured.
var ErrNoUpstream = errors.New("gateway: no upstream configured")

// Engine is what the gateway tells the engine. *engine.Engine satisfies it;
// every method must return quickly (the gateway calls them from its parse
// goroutines, never from the copy).
type Engine interface {
	// Message records a message of the session's conversation; role is
	// "system", "user" or "assistant".
	Message(ctx context.Context, session, role, content string) error
	// Offer hands the engine calls the model has completed in its stream
	// (P 1, Origin predict.OriginStream); the engine alone decides
	// whether they run. seq is the seq the agent's call will take if it
	// makes the response's calls in order: NextSeq as the request was
	// heard, plus the call's place in the response. It reports whether
	// the offer came in time (engine.Engine.Offer): one that comes after
	// the agent has begun a later step is refused.
	Offer(session string, seq int, preds []predict.Prediction) bool
	// NextSeq returns the seq the session's next call will take (the
	// calls it has made so far), read as a model request is heard.
	NextSeq(session string) int
	// ThinkTime reports the time from a model request being sent to its
	// first tool call being complete in the response.
	ThinkTime(session string, d time.Duration)
	// Join folds session from into session into (engine.Engine.Join):
	// the Linker linked them after the agent's call had reached the
	// tool side.
	Join(from, into string)
	// Resolve returns the session a name stands for: the one Join folded
	// it into, or the name itself (engine.Engine.Resolve).
	Resolve(session string) string
}

// Upstream is a model API the gateway forwards to.
type Upstream struct {
	// BaseURL is what the API's SDK takes as its base URL: OpenAI's
	// includes /v1 ("https://api.openai.com/v1"), Anthropic's does not
	// ("https://api.anthropic.com"). A trailing slash is optional.
	BaseURL string
}

// Options configure a Gateway.
type Options struct {
	// OpenAI receives /v1/chat/completions, /v1/responses, /v1/models and
	// every other /v1/ path that is not Anthropic's. Nil: those answer 404.
	OpenAI *Upstream
	// Anthropic receives /v1/messages and everything under it
	// (count_tokens, batches), and /v1/models when the request carries
	// an anthropic-version header. Nil: those answer 404.
	Anthropic *Upstream
	// Engine hears messages and stream-time calls. Nil: the gateway only
	// relays.
	Engine Engine
	// Linker, if set, lets the gateway hear requests without
	// Ahead-Session: it names their sessions itself (a conversation's
	// next request is known by the call ids of the tool results it
	// returns) and remembers the calls their models emit, so that the
	// agent's call, reaching the tool side, links the two (see Linker).
	// Nil: requests without Ahead-Session are only relayed.
	Linker *Linker
	// Logger logs relay failures, never headers or bodies. Nil means
	// slog.Default().
	Logger *slog.Logger
	// MaxBody bounds the request body read into memory to be heard; a
	// larger body is relayed unheard. 0 means DefaultMaxBody (32 MiB).
	MaxBody int64
	// MaxSessions bounds the sessions whose history digests are kept;
	// the least recently heard is forgotten first. 0 means 10,000.
	MaxSessions int
	// Transport sends upstream requests. Nil means a clone of
	// http.DefaultTransport with DisableCompression, so the agent's
	// Accept-Encoding passes through and nothing is decompressed. A
	// Transport given here should do the same.
	Transport http.RoundTripper
	// WriteTimeout, if positive, is set as the write deadline before each
	// write to the agent (extended as each write succeeds), so a server
	// write timeout never cuts a stream that keeps flowing. 0 leaves the
	// server's deadlines alone.
	WriteTimeout time.Duration
}

// Gateway relays model API requests and hears them. Create it with New;
// it is safe for concurrent use.
type Gateway struct {
	opts      Options
	openai    *url.URL
	anthropic *url.URL
	log       *slog.Logger
	hist      *histories
	wg        sync.WaitGroup // parse goroutines

	mu    sync.Mutex         // protects ended
	ended map[*turn]struct{} // turns whose body has ended and whose parser has not (turn.before)
}

// New returns a gateway. opts must name at least one upstream.
func New(opts *Options) (*Gateway, error) {
	g := &Gateway{ended: map[*turn]struct{}{}}
	if opts != nil {
		g.opts = *opts
	}
	o := &g.opts
	if o.OpenAI == nil && o.Anthropic == nil {
		return nil, ErrNoUpstream
	}
	var err error
	if o.OpenAI != nil {
		if g.openai, err = parseBase(o.OpenAI.BaseURL); err != nil {
			return nil, fmt.Errorf("gateway: openai base_url: %w", err)
		}
	}
	if o.Anthropic != nil {
		if g.anthropic, err = parseBase(o.Anthropic.BaseURL); err != nil {
			return nil, fmt.Errorf("gateway: anthropic base_url: %w", err)
		}
	}
	if o.MaxBody <= 0 {
		o.MaxBody = DefaultMaxBody
	}
	if o.MaxSessions <= 0 {
		o.MaxSessions = 10000
	}
	if o.Transport == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.DisableCompression = true
		o.Transport = t
	}
	g.log = o.Logger
	if g.log == nil {
		g.log = slog.Default()
	}
	g.hist = newHistories(o.MaxSessions)
	return g, nil
}

func parseBase(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, err
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%q is not an absolute http(s) URL", s)
	}
	return u, nil
}

// Close waits for the parse goroutines of finished responses. Call it after
// the server has stopped serving the handler.
func (g *Gateway) Close() { g.wg.Wait() }

// api names what a route's bodies are, for hearing and parsing.
type api int

const (
	apiNone api = iota // relayed unparsed
	apiChat
	apiResponses
	apiMessages
)

// Handler serves the model API routes:
//
//	POST /v1/chat/completions      OpenAI, heard and parsed
//	POST /v1/responses             OpenAI, heard and parsed
//	POST /v1/messages              Anthropic, heard and parsed
//	     /v1/messages/...          Anthropic (count_tokens, batches), unparsed
//	     /v1/models                Anthropic if the request has an
//	                               anthropic-version header, else OpenAI
//	     /v1/...                   every other path: OpenAI, unparsed
//
// Mount it beside ahead's own /v1/ routes; the more specific patterns of
// the enclosing mux win.
func (g *Gateway) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", g.serve(false, apiChat))
	mux.HandleFunc("POST /v1/responses", g.serve(false, apiResponses))
	mux.HandleFunc("POST /v1/messages", g.serve(true, apiMessages))
	mux.HandleFunc("/v1/messages/", g.serve(true, apiNone))
	mux.HandleFunc("/v1/", func(w http.ResponseWriter, r *http.Request) {
		anthropic := r.Header.Get("Anthropic-Version") != "" && g.anthropic != nil
		g.relay(w, r, anthropic, apiNone)
	})
	// GET /v1/messages and the like fall to the Anthropic upstream
	// unparsed rather than to OpenAI's.
	mux.HandleFunc("/v1/messages", g.serve(true, apiNone))
	return mux
}

func (g *Gateway) serve(anthropic bool, a api) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) { g.relay(w, r, anthropic, a) }
}

// target returns the upstream URL for a request path. OpenAI's base URL
// already ends in /v1, so the path's /v1 is replaced by it; Anthropic's
// base is the server root, so the whole path is appended.
func (g *Gateway) target(anthropic bool, r *http.Request) *url.URL {
	base, path := g.openai, strings.TrimPrefix(r.URL.Path, "/v1")
	if anthropic {
		base, path = g.anthropic, r.URL.Path
	}
	if base == nil {
		return nil
	}
	u := *base
	u.Path = joinPath(base.Path, path)
	u.RawPath = ""
	switch {
	case base.RawQuery == "":
		u.RawQuery = r.URL.RawQuery
	case r.URL.RawQuery != "":
		u.RawQuery = base.RawQuery + "&" + r.URL.RawQuery
	}
	return &u
}

// joinPath joins a base path and a request path with exactly one slash.
func joinPath(a, b string) string {
	aslash, bslash := strings.HasSuffix(a, "/"), strings.HasPrefix(b, "/")
	switch {
	case aslash && bslash:
		return a + b[1:]
	case !aslash && !bslash && b != "":
		return a + "/" + b
	}
	return a + b
}

// hopHeaders are removed in both directions (RFC 9110 section 7.6.1), as
// httputil.ReverseProxy does.
var hopHeaders = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

func removeHop(h http.Header) {
	for _, f := range h.Values("Connection") {
		for sf := range strings.SplitSeq(f, ",") {
			if sf = strings.TrimSpace(sf); sf != "" {
				h.Del(sf)
			}
		}
	}
	for _, k := range hopHeaders {
		h.Del(k)
	}
}

func (g *Gateway) relay(w http.ResponseWriter, r *http.Request, anthropic bool, a api) {
	u := g.target(anthropic, r)
	if u == nil {
		writeError(w, http.StatusNotFound, "no upstream is configured for this API")
		return
	}
	ctx := r.Context()
	out := r.Clone(ctx)
	out.URL, out.Host, out.RequestURI = u, "", ""
	out.Close = false
	removeHop(out.Header)
	session := out.Header.Get(SessionHeader)
	out.Header.Del(SessionHeader)
	if _, ok := out.Header["User-Agent"]; !ok {
		out.Header.Set("User-Agent", "") // do not add Go's
	}

	// Read the body of a parsed route to hear it; anything larger than
	// MaxBody, or any unparsed route, streams through as it came.
	// Without Ahead-Session, a Linker lets the gateway name the session
	// itself (turn.run): heard all the same, linked on evidence.
	hear := a != apiNone && g.opts.Engine != nil && (session != "" || g.opts.Linker != nil)
	var body []byte
	if hear && r.Body != nil && r.ContentLength <= g.opts.MaxBody {
		var err error
		body, err = io.ReadAll(io.LimitReader(r.Body, g.opts.MaxBody+1))
		if err != nil {
			if ctx.Err() == nil {
				writeError(w, http.StatusBadRequest, "reading the request body failed")
			}
			return
		}
		if int64(len(body)) > g.opts.MaxBody {
			hear = false
			out.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), r.Body))
		} else {
			out.Body = io.NopCloser(bytes.NewReader(body))
			out.ContentLength = int64(len(body))
			out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		}
	} else {
		hear = false
	}
	if r.ContentLength == 0 {
		out.Body = nil
	}

	var t *turn
	if hear {
		t = g.startTurn(ctx, session, a, body)
	}
	sent := time.Now()
	res, err := g.opts.Transport.RoundTrip(out)
	if err != nil {
		if t != nil {
			t.abandon()
		}
		if ctx.Err() != nil {
			return // the agent left; nobody to answer
		}
		g.log.Warn("gateway: upstream unreachable", "host", u.Host, "path", u.Path, "err", err)
		writeError(w, http.StatusBadGateway, "the upstream model API is unreachable")
		return
	}
	defer res.Body.Close()

	removeHop(res.Header)
	h := w.Header()
	for k, vv := range res.Header {
		h[k] = vv
	}
	if len(res.Trailer) > 0 {
		for k := range res.Trailer {
			h.Add("Trailer", k)
		}
	}
	if t != nil {
		t.respond(sent, res)
	}
	w.WriteHeader(res.StatusCode)
	rc := http.NewResponseController(w)
	// The head goes out now, as the upstream sent it: a stream may be
	// silent for a while before its first event.
	if err := rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		if t != nil {
			t.close(true)
		}
		return
	}

	err = g.copyBody(w, rc, res.Body, t)
	if t != nil {
		t.close(err != nil)
	}
	if err != nil {
		if ctx.Err() == nil && !errors.Is(err, errClientWrite) {
			g.log.Warn("gateway: upstream body failed", "host", u.Host, "path", u.Path, "err", err)
		}
		// Returning now makes the server drop the connection rather than
		// end the response cleanly, so a cut stream is not mistaken for a
		// complete one (as httputil.ReverseProxy does, via panic).
		panic(http.ErrAbortHandler)
	}
	for k, vv := range res.Trailer {
		h[http.TrailerPrefix+k] = vv
	}
}

var errClientWrite = errors.New("gateway: writing to the agent failed")

// bufPool holds the copy buffers; the copy allocates nothing else.
var bufPool = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// copyBody relays the body read by read, flushing each, and hands every
// read to the turn's tee, which never blocks.
func (g *Gateway) copyBody(w http.ResponseWriter, rc *http.ResponseController, body io.Reader, t *turn) error {
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	buf := *bp
	for {
		n, rerr := body.Read(buf)
		if n > 0 {
			if g.opts.WriteTimeout > 0 {
				_ = rc.SetWriteDeadline(time.Now().Add(g.opts.WriteTimeout))
			}
			if _, err := w.Write(buf[:n]); err != nil {
				return errClientWrite
			}
			if err := rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
				return errClientWrite
			}
			if t != nil {
				t.tee.Write(buf[:n])
			}
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			return rerr
		}
	}
}

// engineSession is the session the engine knows a conversation by: the
// tool side's, once linked (the engine keeps the links).
func (g *Gateway) engineSession(session string) string {
	if g.opts.Linker == nil {
		return session // nothing links sessions
	}
	return g.opts.Engine.Resolve(session)
}

// autoPrefix starts the names of the sessions the gateway gives requests
// without Ahead-Session.
const autoPrefix = "llm-"

// conversation names the session of a request without Ahead-Session: the
// one session whose model emitted the calls whose results the request
// returns, or, with no such evidence (a first request, or results of calls
// from several sessions), a new one.
func (g *Gateway) conversation(msgs []message) string {
	found := ""
	for _, m := range msgs {
		for _, id := range m.results {
			s, ok := g.opts.Linker.SessionOfID(id)
			if !ok {
				continue
			}
			if found != "" && s != found {
				return newSessionName()
			}
			found = s
		}
	}
	if found != "" {
		return found
	}
	return newSessionName()
}

func newSessionName() string {
	var b [12]byte
	rand.Read(b[:])
	return autoPrefix + hex.EncodeToString(b[:])
}

// writeError answers with a JSON error in the shape both APIs use.
func writeError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	fmt.Fprintf(w, `{"type":"error","error":{"type":"ahead_gateway_error","message":%q}}`+"\n", msg)
}
