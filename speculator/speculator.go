package speculator

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"github.com/ahead-dev/ahead/callkey"
	"github.com/ahead-dev/ahead/predict"
	"github.com/ahead-dev/ahead/trace"
)

// Defaults of Options.
const (
	DefaultMaxBreadth     = 3
	DefaultTimeout        = 2 * time.Second
	DefaultMaxConcurrency = 4
	DefaultContextTokens  = 4000
)

// probeInterval: while measured latency says answers come too late, one
// request per interval still goes, so that a model that got faster is
// noticed.
const probeInterval = 30 * time.Second

// maxBackoff bounds the pause after the server failed or limited us.
const maxBackoff = 30 * time.Second

// guessTokens is the completion tokens a guess is expected to take.
const guessTokens = 60

// Tool is a tool the agent can call, as the model is told about it.
type Tool struct {
	Name        string
	Description string
	// Schema is the JSON Schema of the tool's arguments (an object
	// schema); nil accepts any JSON object.
	Schema []byte
}

// Options configure a Speculator. BaseURL and Model are required.
type Options struct {
	// BaseURL is the OpenAI-compatible API's base, including its version
	// path ("http://localhost:11434/v1"); "/chat/completions" is appended.
	// Conversation text is sent there.
	BaseURL string
	// Model is the model asked.
	Model string
	// APIKey is sent as a bearer token; empty: no Authorization header
	// (the environment's OPENAI_API_KEY is never used).
	APIKey string
	// MaxBreadth is the most guesses asked per think window; 0:
	// DefaultMaxBreadth.
	MaxBreadth int
	// Timeout bounds each request; 0: DefaultTimeout.
	Timeout time.Duration
	// MaxConcurrency bounds the requests in flight; 0:
	// DefaultMaxConcurrency.
	MaxConcurrency int
	// ContextTokens bounds the conversation and calls sent per request (4
	// characters a token, newest kept, the system prompt kept); 0:
	// DefaultContextTokens.
	ContextTokens int
	// MaxTokensPerMinute is the token budget of the requests; 0: none.
	MaxTokensPerMinute int
	// Tools lists the agent's tools (MCP tools/list, the gateway's
	// request, the backends' tool names). Nil or empty: the tools the
	// session has called, without schemas.
	Tools func() []Tool
	// Private reports tools whose outputs must never be sent (the policy's
	// private: true); nil: none.
	Private func(tool string) bool
	// Offer receives the guesses (engine.Engine.Offer); nil: guesses are
	// made and counted but go nowhere, unless an engine is attached
	// (Attach).
	Offer OfferFunc
	// Conversation returns a session's recent messages
	// (engine.Engine.Conversation); nil: the messages Hear was given,
	// unless an engine is attached (Attach).
	Conversation func(session string) []trace.Event
	// Logger receives debug lines on failures; nil: discarded.
	Logger *slog.Logger
	// Registerer receives the metrics; nil: not registered.
	Registerer prometheus.Registerer
	// HTTPClient makes the requests; nil: a client of its own.
	HTTPClient *http.Client
}

// OfferFunc hands the engine a session's guesses meant for its call seq
// (engine.Engine.Offer); it reports false when they came too late, once the
// agent had begun that call.
type OfferFunc func(session string, seq int, preds []predict.Prediction) bool

// Engine is what the speculator needs of the engine it guesses for
// (engine.Engine is one): where its guesses go, and a session's recent
// conversation.
type Engine interface {
	Offer(session string, seq int, preds []predict.Prediction) bool
	Conversation(session string) []trace.Event
}

// Attach gives the speculator the engine its guesses go to, in place of
// Options.Offer and Options.Conversation: for an engine built after the
// speculator, as one whose predictor includes the speculator is. The
// engine calls the speculator only once it is built, so nothing is
// guessed before.
func (s *Speculator) Attach(e Engine) { s.eng.Store(&e) }

// offer hands guesses to the attached engine, or to Options.Offer; it
// reports false when they came too late.
func (s *Speculator) offer(session string, seq int, preds []predict.Prediction) bool {
	if e := s.eng.Load(); e != nil {
		return (*e).Offer(session, seq, preds)
	}
	if s.opts.Offer != nil {
		return s.opts.Offer(session, seq, preds)
	}
	return true
}

// conversation returns a session's recent messages from the attached
// engine or Options.Conversation; ok is false with neither.
func (s *Speculator) conversation(session string) (msgs []trace.Event, ok bool) {
	if e := s.eng.Load(); e != nil {
		return (*e).Conversation(session), true
	}
	if s.opts.Conversation != nil {
		return s.opts.Conversation(session), true
	}
	return nil, false
}

// Speculator asks a fast model for a session's next tool calls whenever a
// think window opens, and offers its guesses to the engine. It is a
// predict.Predictor and a predict.Hearer whose Observe and Hear return nil at
// once: guesses arrive later, through Options.Offer. It is safe for
// concurrent use. Close stops it.
type Speculator struct {
	opts    Options
	chat    openai.ChatCompletionService
	limiter *rate.Limiter // nil: no token budget
	m       *metrics
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup         // the requests in flight
	eng     atomic.Pointer[Engine] // set by Attach

	mu           sync.Mutex // protects everything below, and led
	led          *ledger
	queue        []*window // admitted windows waiting for a slot
	running      int
	closed       bool
	latency      ewma // request latency, ms
	lastAsked    time.Time
	backoffUntil time.Time
	failStreak   int
	auto         bool // the server refused tool_choice "required"
	toolChars    int  // size of the last tools' definitions
	checkers     map[string]*checker
}

var (
	_ predict.Predictor = (*Speculator)(nil)
	_ predict.Hearer    = (*Speculator)(nil)
)

// New returns a speculator for opts (copied; defaults filled in).
func New(opts *Options) (*Speculator, error) {
	if opts == nil || opts.BaseURL == "" || opts.Model == "" {
		return nil, errors.New("speculator: base URL and model are required")
	}
	o := *opts
	if _, err := url.Parse(o.BaseURL); err != nil {
		return nil, fmt.Errorf("speculator: base URL: %w", err)
	}
	if o.MaxBreadth <= 0 {
		o.MaxBreadth = DefaultMaxBreadth
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MaxConcurrency <= 0 {
		o.MaxConcurrency = DefaultMaxConcurrency
	}
	if o.ContextTokens <= 0 {
		o.ContextTokens = DefaultContextTokens
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{}
	}
	m, err := newMetrics(o.Registerer, "model")
	if err != nil {
		return nil, err
	}
	// Not openai.NewClient: it reads OPENAI_API_KEY, OPENAI_BASE_URL and
	// more from the environment. Only these options apply.
	ropts := []option.RequestOption{
		option.WithBaseURL(o.BaseURL),
		option.WithHTTPClient(o.HTTPClient),
		option.WithMaxRetries(0), // a retry would come after the agent's call
	}
	if o.APIKey != "" {
		ropts = append(ropts, option.WithAPIKey(o.APIKey))
	}
	s := &Speculator{
		opts:     o,
		chat:     openai.NewChatCompletionService(ropts...),
		m:        m,
		led:      newLedger(o.MaxBreadth, o.ContextTokens*charsPerToken, m),
		checkers: make(map[string]*checker),
	}
	if o.MaxTokensPerMinute > 0 {
		s.limiter = rate.NewLimiter(rate.Limit(float64(o.MaxTokensPerMinute)/60), o.MaxTokensPerMinute)
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s, nil
}

// Destination says where conversation text goes, for the start-up line.
func (s *Speculator) Destination() string {
	return fmt.Sprintf("speculator: conversation text and recent tool outputs (except private tools') are sent to %s (model %s)", s.opts.BaseURL, s.opts.Model)
}

// Observe opens a think window after a tool result; it returns nil at once.
func (s *Speculator) Observe(ev trace.Event) []predict.Prediction {
	if !ev.IsCall() {
		return nil
	}
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	opened, closed := s.led.observe(ev, now)
	s.closeLocked(closed)
	s.admitLocked(opened, now)
	return nil
}

// Hear opens a think window when a user message arrives, and closes the
// open one when the model's turn ends (an assistant message); it returns
// nil at once.
func (s *Speculator) Hear(msg trace.Event) []predict.Prediction {
	if !msg.IsMessage() {
		return nil
	}
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	opened, closed := s.led.hear(msg, now)
	s.closeLocked(closed)
	s.admitLocked(opened, now)
	return nil
}

// Forget drops a session; an answer still coming for it is dropped.
func (s *Speculator) Forget(session string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closeLocked(s.led.forget(session))
}

// Stats counts what the speculator did.
func (s *Speculator) Stats() Stats { return s.m.stats() }

// Close cancels the requests in flight and waits for them.
func (s *Speculator) Close() {
	s.mu.Lock()
	s.closed = true
	s.queue = nil
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
}

// closeLocked takes a closed window out of the queue. A running request
// is left to finish (its latency is worth measuring); its answer will be
// late.
func (s *Speculator) closeLocked(w *window) {
	if w == nil || w.state != winQueued {
		return
	}
	if i := slices.Index(s.queue, w); i >= 0 {
		s.queue = slices.Delete(s.queue, i, i+1)
	}
	w.state = winSkipped
	s.m.skip(ReasonClosed)
}

// admitLocked decides whether a new window is worth a request (SPAgent:
// admitted by expected value and load) and queues it.
func (s *Speculator) admitLocked(w *window, now time.Time) {
	if w == nil {
		return
	}
	spare := s.running+len(s.queue) < s.opts.MaxConcurrency
	w.k = s.led.breadth(spare)
	w.tokens = s.estimateLocked(w)
	if reason := s.declineLocked(w, now); reason != "" {
		w.state = winSkipped
		s.m.skip(reason)
		return
	}
	w.state = winQueued
	s.queue = append(s.queue, w)
	s.dispatchLocked(now)
}

// declineLocked is the admission rule: ask only when the server is not
// backing us off, the measured latency lets the answer come before the
// agent's own call (the expected think time), and the expected tool time
// saved exceeds the request's cost. The cost is the request's share of the
// token budget in milliseconds of budget, weighted by how scarce the
// budget is: free while the budget is full, dear as it runs out.
func (s *Speculator) declineLocked(w *window, now time.Time) string {
	if now.Before(s.backoffUntil) {
		return ReasonBackoff
	}
	if s.limiter != nil && w.tokens > s.limiter.Burst() {
		return ReasonBudget
	}
	probe := now.Sub(s.lastAsked) >= probeInterval
	lat, hasLat := s.latency.known()
	if think, ok := s.led.think.known(); ok && hasLat && lat >= think && !probe {
		return ReasonSlow
	}
	saving, known := s.led.expectedSaving(w.k, lat)
	if known && !probe && saving <= s.costLocked(w.tokens, now) {
		return ReasonNoGain
	}
	return ""
}

func (s *Speculator) costLocked(tokens int, now time.Time) float64 {
	if s.limiter == nil {
		return 0
	}
	burst := float64(s.limiter.Burst())
	scarcity := 1 - max(0, s.limiter.TokensAt(now))/burst
	msPerToken := 60000 / burst
	return float64(tokens) * msPerToken * scarcity
}

// estimateLocked is a request's expected tokens: its prompt (the session's
// known text, at most ContextTokens, and the tools) and its guesses.
func (s *Speculator) estimateLocked(w *window) int {
	chars := len(instructions) + s.toolChars
	if ss := s.led.sessions[w.session]; ss != nil {
		text := ss.msgBytes
		for _, c := range ss.calls {
			text += len(c.Tool) + len(c.Args) + len(c.Output)
		}
		chars += min(text, s.opts.ContextTokens*charsPerToken)
	}
	return chars/charsPerToken + w.k*guessTokens
}

// dispatchLocked starts queued requests while there are slots: earlier
// steps of a session first, then the shortest expected requests.
func (s *Speculator) dispatchLocked(now time.Time) {
	for s.running < s.opts.MaxConcurrency && len(s.queue) > 0 && !s.closed {
		best := 0
		for i, w := range s.queue {
			b := s.queue[best]
			if w.ordinal < b.ordinal || (w.ordinal == b.ordinal && w.tokens < b.tokens) {
				best = i
			}
		}
		w := s.queue[best]
		s.queue = slices.Delete(s.queue, best, best+1)
		if s.limiter != nil && !s.limiter.AllowN(now, w.tokens) {
			w.state = winSkipped
			s.m.skip(ReasonBudget)
			continue
		}
		w.state = winRunning
		s.running++
		s.lastAsked = now
		s.m.request()
		req := s.requestLocked(w)
		s.wg.Go(func() { s.ask(w, req) })
	}
}

// request is what a request needs from the ledger, copied under the lock.
type request struct {
	seq   int // the window's seq when asked (later results of its step raise it)
	calls []trace.Event
	msgs  []trace.Event
	tools []string // tools the session called (when Options.Tools is nil)
	auto  bool
}

func (s *Speculator) requestLocked(w *window) request {
	r := request{seq: w.seq, auto: s.auto}
	if ss := s.led.sessions[w.session]; ss != nil {
		r.calls = slices.Clone(ss.calls)
		r.msgs = slices.Clone(ss.msgs)
		for _, c := range ss.seen {
			if !slices.Contains(r.tools, c.tool) {
				r.tools = append(r.tools, c.tool)
			}
		}
	}
	return r
}

// ask makes a window's request and offers its guesses, unless late.
func (s *Speculator) ask(w *window, r request) {
	ctx, cancel := context.WithTimeout(s.ctx, s.opts.Timeout)
	defer cancel()
	log := s.opts.Logger.With("session", w.session, "seq", r.seq)

	var tools []Tool
	if s.opts.Tools != nil {
		tools = s.opts.Tools()
	}
	if len(tools) == 0 {
		for _, name := range r.tools {
			tools = append(tools, Tool{Name: name})
		}
	}
	conv := r.msgs
	if c, ok := s.conversation(w.session); ok {
		conv = c
	}
	msgs := buildMessages(w.k, conv, r.calls, s.opts.Private, s.opts.ContextTokens*charsPerToken)

	start := time.Now()
	var comp *openai.ChatCompletion
	var err error
	if len(tools) > 0 {
		comp, err = s.complete(ctx, msgs, tools, r.auto)
	}
	took := time.Since(start)

	var gs []guess
	var bad []string
	reason := ""
	switch {
	case len(tools) == 0:
		reason = ReasonNoTools
	case err != nil:
		reason = classify(err)
		log.Debug("speculator request failed", "reason", reason, "err", err)
	default:
		gs, bad = s.parse(comp, tools, w.k)
		if len(gs) == 0 && len(bad) == 0 {
			reason = ReasonNoGuesses
		}
	}

	now := time.Now()
	s.mu.Lock()
	s.running--
	s.toolChars = toolChars(tools)
	switch reason {
	case "":
		s.failStreak = 0
		s.latency.add(ms(took))
		s.m.latency.Observe(took.Seconds())
	case ReasonTimeout:
		s.latency.add(ms(s.opts.Timeout)) // at least that slow
	case ReasonDown, ReasonRateLimited:
		s.failStreak++
		s.backoffUntil = now.Add(backoff(err, s.failStreak))
	}
	var preds []predict.Prediction
	seq := w.seq
	if s.ctx.Err() == nil {
		switch reason {
		case "":
		case ReasonNoTools:
			s.m.skip(reason) // nothing was sent
		default:
			s.m.failed(reason)
		}
		for _, b := range bad {
			s.m.failed(b)
		}
		if comp != nil {
			s.m.answered()
			if t := comp.Usage.TotalTokens; t > 0 {
				s.m.used(int(t))
				if s.limiter != nil && int(t) > w.tokens {
					s.limiter.ReserveN(now, int(t)-w.tokens) // the estimate fell short
				}
			} else {
				s.m.used(w.tokens)
			}
		}
		if reason == "" && len(gs) > 0 {
			var ok bool
			if preds, ok = s.led.answer(w, gs); !ok {
				s.m.lateAnswer()
				log.Debug("speculator answer late", "took", took)
			}
			seq = w.seq // raised by the other results of the window's step
		}
	}
	w.state = winAnswered
	s.dispatchLocked(now)
	s.mu.Unlock()
	if len(preds) == 0 {
		return
	}
	if !s.offer(w.session, seq, preds) {
		s.mu.Lock()
		s.led.retract(w)
		s.mu.Unlock()
		s.m.lateAnswer()
		log.Debug("speculator answer late: the agent's call had begun", "took", took)
		return
	}
	s.m.guessed(len(preds))
}

// complete asks for the guesses: tool_choice "required", or "auto" once
// the server refused "required".
func (s *Speculator) complete(ctx context.Context, msgs []openai.ChatCompletionMessageParamUnion, tools []Tool, auto bool) (*openai.ChatCompletion, error) {
	params := openai.ChatCompletionNewParams{
		Model:             s.opts.Model,
		Messages:          msgs,
		Tools:             toolParams(tools),
		ToolChoice:        openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("required")},
		ParallelToolCalls: openai.Bool(true),
	}
	if auto {
		params.ToolChoice.OfAuto = openai.String("auto")
	}
	comp, err := s.chat.New(ctx, params)
	if err != nil && !auto && refusedRequired(err) {
		s.mu.Lock()
		s.auto = true
		s.mu.Unlock()
		params.ToolChoice.OfAuto = openai.String("auto")
		comp, err = s.chat.New(ctx, params)
	}
	return comp, err
}

func refusedRequired(err error) bool {
	apiErr, ok := errors.AsType[*openai.Error](err)
	if !ok || (apiErr.StatusCode != http.StatusBadRequest && apiErr.StatusCode != http.StatusUnprocessableEntity) {
		return false
	}
	return strings.Contains(strings.ToLower(apiErr.Error()+apiErr.RawJSON()), "tool_choice")
}

// classify names why a request failed.
func classify(err error) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return ReasonTimeout
	}
	if apiErr, ok := errors.AsType[*openai.Error](err); ok {
		switch {
		case apiErr.StatusCode == http.StatusTooManyRequests:
			return ReasonRateLimited
		case apiErr.StatusCode >= 500:
			return ReasonDown
		}
		return ReasonStatus
	}
	if _, ok := errors.AsType[*net.OpError](err); ok {
		return ReasonDown
	}
	if _, ok := errors.AsType[*url.Error](err); ok {
		return ReasonDown
	}
	return ReasonBadJSON
}

// backoff is the pause after the failStreak-th failure in a row: the
// server's Retry-After if it sent one, else 1s doubling to maxBackoff.
func backoff(err error, streak int) time.Duration {
	if apiErr, ok := errors.AsType[*openai.Error](err); ok && apiErr.Response != nil {
		if secs, err := strconv.Atoi(apiErr.Response.Header.Get("Retry-After")); err == nil && secs > 0 {
			return min(time.Duration(secs)*time.Second, maxBackoff)
		}
	}
	return min(time.Second<<min(streak-1, 5), maxBackoff)
}

// parse turns the answer's tool calls into at most k valid, distinct
// guesses, best first; bad holds a failure reason per rejected call.
func (s *Speculator) parse(comp *openai.ChatCompletion, tools []Tool, k int) (gs []guess, bad []string) {
	if comp == nil || len(comp.Choices) == 0 {
		return nil, nil
	}
	byName := make(map[string]Tool, len(tools))
	for _, t := range tools {
		byName[t.Name] = t
	}
	seen := make(map[callkey.Key]bool)
	for _, c := range comp.Choices[0].Message.ToolCalls {
		if len(gs) == k {
			break
		}
		t, ok := byName[c.Function.Name]
		if !ok || (c.Type != "" && c.Type != "function") {
			bad = append(bad, ReasonUnknownTool)
			continue
		}
		args := bytes.TrimSpace([]byte(c.Function.Arguments))
		if len(args) == 0 {
			args = []byte("{}") // a tool without arguments
		}
		if args[0] != '{' {
			bad = append(bad, ReasonBadArgs)
			continue
		}
		canon, err := callkey.Canonical(args)
		if err != nil {
			bad = append(bad, ReasonBadArgs)
			continue
		}
		if err := s.checker(t).check(canon); err != nil {
			s.opts.Logger.Debug("speculator guess fails its tool's schema", "tool", t.Name, "err", err)
			bad = append(bad, ReasonSchema)
			continue
		}
		key, err := callkey.Make(t.Name, canon)
		if err != nil || seen[key] {
			continue
		}
		seen[key] = true
		gs = append(gs, guess{rank: len(gs), tool: t.Name, key: key, args: canon})
	}
	return gs, bad
}

// checker returns t's schema checker, compiled once per schema.
func (s *Speculator) checker(t Tool) *checker {
	id := t.Name + "\x00" + string(t.Schema)
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.checkers[id]
	if !ok {
		if len(s.checkers) > 1024 {
			clear(s.checkers) // tools changed many times: start over
		}
		c = newChecker(t.Schema)
		s.checkers[id] = c
	}
	return c
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
