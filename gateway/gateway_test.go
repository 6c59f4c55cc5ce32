package gateway

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/google/go-cmp/cmp"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/ahead-dev/ahead/callkey"
	"github.com/ahead-dev/ahead/predict"
)

// fakeEngine records what the gateway tells the engine.
type fakeEngine struct {
	mu       sync.Mutex
	messages []string // "session role: content"
	offers   []string // "session tool(args) p origin"
	thinks   []string // sessions
	seqs     []int    // the seq of each offer
	next     map[string]int
	joins    []string // "from→into"
	offered  chan string
	// hold, if set, is called before a message is recorded, outside mu.
	hold func(content string)
}

func newFakeEngine() *fakeEngine { return &fakeEngine{offered: make(chan string, 64)} }

func (e *fakeEngine) Message(_ context.Context, session, role, content string) error {
	if e.hold != nil {
		e.hold(content)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.messages = append(e.messages, session+" "+role+": "+content)
	return nil
}

func (e *fakeEngine) Offer(session string, seq int, preds []predict.Prediction) bool {
	e.mu.Lock()
	for _, p := range preds {
		e.seqs = append(e.seqs, seq)
		e.offers = append(e.offers, session+" "+p.Tool+string(p.Args)+" "+js(p.P)+" "+string(p.Origin))
	}
	e.mu.Unlock()
	for _, p := range preds {
		e.offered <- p.Tool
	}
	return true
}

func (e *fakeEngine) ThinkTime(session string, d time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if d >= 0 {
		e.thinks = append(e.thinks, session)
	}
}

func (e *fakeEngine) Join(from, into string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.joins = append(e.joins, from+"→"+into)
}

// Resolve follows the joins, as the engine does: a name folded away stands
// for the session it was folded into; a second fold of a name is ignored.
func (e *fakeEngine) Resolve(session string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, j := range e.joins {
		if from, into, _ := strings.Cut(j, "→"); from == session {
			return into
		}
	}
	return session
}

func (e *fakeEngine) joined() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.joins)
}

func (e *fakeEngine) NextSeq(session string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.next[session]
}

func (e *fakeEngine) offerSeqs() []int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.seqs)
}

func (e *fakeEngine) heard() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.messages)
}

func (e *fakeEngine) offersMade() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.offers)
}

// upstream is a scripted model API.
type upstream struct {
	t   *testing.T
	eng *fakeEngine
	srv *httptest.Server

	mu     sync.Mutex
	reqs   []*seenRequest
	sent   bytes.Buffer  // every body byte written
	gone   chan struct{} // closed when a request's context ends early
	handle func(w http.ResponseWriter, r *http.Request)
}

type seenRequest struct {
	method, path, query string
	header              http.Header
	body                []byte
}

func newUpstream(t *testing.T, eng *fakeEngine) *upstream {
	u := &upstream{t: t, eng: eng, gone: make(chan struct{})}
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.reqs = append(u.reqs, &seenRequest{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Clone(), body})
		u.sent.Reset()
		h := u.handle
		u.mu.Unlock()
		h(w, r)
	}))
	t.Cleanup(u.srv.Close)
	return u
}

func (u *upstream) last() *seenRequest {
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.reqs) == 0 {
		u.t.Fatal("the upstream saw no request")
	}
	return u.reqs[len(u.reqs)-1]
}

func (u *upstream) write(w http.ResponseWriter, s string) {
	u.mu.Lock()
	u.sent.WriteString(s)
	u.mu.Unlock()
	io.WriteString(w, s)
	w.(http.Flusher).Flush()
}

func (u *upstream) bytesSent() string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.sent.String()
}

// stream plays a script; at each wait it holds the stream until the
// gateway has offered the call, so the offer provably precedes the end.
func (u *upstream) stream(script []step) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("X-Request-Id", "req_123")
		w.WriteHeader(http.StatusOK)
		for _, s := range script {
			if s.waitTool == "" {
				u.write(w, s.write)
				continue
			}
			select {
			case got := <-u.eng.offered:
				if got != s.waitTool {
					u.t.Errorf("offered %s, want %s before the stream goes on", got, s.waitTool)
				}
			case <-r.Context().Done():
				return
			case <-time.After(10 * time.Second): // a failure guard, not a synchronisation
				u.t.Errorf("%s was not offered while the stream was open", s.waitTool)
			}
		}
	}
}

func (u *upstream) json(status int, body string, header ...string) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.WriteHeader(status)
		u.write(w, body)
	}
}

// recorder keeps the bytes the agent's SDK received.
type recorder struct {
	mu     sync.Mutex
	body   bytes.Buffer
	header http.Header
}

func (rec *recorder) RoundTrip(r *http.Request) (*http.Response, error) {
	res, err := http.DefaultTransport.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	rec.mu.Lock()
	rec.body.Reset()
	rec.header = res.Header.Clone()
	rec.mu.Unlock()
	res.Body = struct {
		io.Reader
		io.Closer
	}{io.TeeReader(res.Body, lockedWriter{rec}), res.Body}
	return res, nil
}

type lockedWriter struct{ rec *recorder }

func (w lockedWriter) Write(p []byte) (int, error) {
	w.rec.mu.Lock()
	defer w.rec.mu.Unlock()
	return w.rec.body.Write(p)
}

func (rec *recorder) received() string {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return rec.body.String()
}

type env struct {
	eng       *fakeEngine
	openai    *upstream
	anthropic *upstream
	gw        *Gateway
	srv       *httptest.Server
	linker    *Linker
	rec       *recorder
}

func newEnv(t *testing.T) *env {
	e := &env{eng: newFakeEngine(), linker: NewLinker(0), rec: &recorder{}}
	e.openai, e.anthropic = newUpstream(t, e.eng), newUpstream(t, e.eng)
	gw, err := New(&Options{
		OpenAI:    &Upstream{BaseURL: e.openai.srv.URL + "/v1"},
		Anthropic: &Upstream{BaseURL: e.anthropic.srv.URL},
		Engine:    e.eng,
		Linker:    e.linker,
	})
	if err != nil {
		t.Fatal(err)
	}
	e.gw = gw
	e.srv = httptest.NewServer(gw.Handler())
	t.Cleanup(func() { e.srv.Close(); gw.Close() })
	return e
}

// streamChat streams a chat completion to its end and returns its message.
func streamChat(t *testing.T, client *openai.Client, params openai.ChatCompletionNewParams) openai.ChatCompletionMessage {
	t.Helper()
	stream := client.Chat.Completions.NewStreaming(t.Context(), params)
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if len(acc.Choices) == 0 {
		t.Fatal("the stream had no choice")
	}
	return acc.Choices[0].Message
}

func (e *env) openaiClient(session string) *openai.Client {
	opts := []option.RequestOption{
		option.WithBaseURL(e.srv.URL + "/v1"), option.WithAPIKey("sk-secret"), option.WithMaxRetries(0),
		option.WithHTTPClient(&http.Client{Transport: e.rec}),
	}
	if session != "" {
		opts = append(opts, option.WithHeader(SessionHeader, session))
	}
	c := openai.NewClient(opts...)
	return &c
}

func (e *env) anthropicClient(session string) *anthropic.Client {
	opts := []aoption.RequestOption{
		aoption.WithoutEnvironmentDefaults(), aoption.WithBaseURL(e.srv.URL), aoption.WithAPIKey("sk-ant-secret"),
		aoption.WithMaxRetries(0), aoption.WithHTTPClient(&http.Client{Transport: e.rec}),
	}
	if session != "" {
		opts = append(opts, aoption.WithHeader(SessionHeader, session))
	}
	c := anthropic.NewClient(opts...)
	return &c
}

// checkRelayed asserts what every relayed request and response must be.
func (e *env) checkRelayed(t *testing.T, up *upstream, path string) {
	t.Helper()
	req := up.last()
	if req.path != path {
		t.Errorf("upstream path = %q, want %q", req.path, path)
	}
	if got := req.header.Get(SessionHeader); got != "" {
		t.Errorf("upstream saw %s: %q, want it stripped", SessionHeader, got)
	}
	if got, want := e.rec.received(), up.bytesSent(); got != want {
		t.Errorf("the agent received\n%q\nthe upstream sent\n%q", got, want)
	}
}

var wantOffers = []string{
	`s1 read_file{"path":"a.txt"} 1 stream`,
	`s1 write_file{"path":"b.txt","text":"hi"} 1 stream`,
}

func TestOpenAIChatStreaming(t *testing.T) {
	e := newEnv(t)
	e.eng.next = map[string]int{"s1": 7} // the agent has made 7 calls
	e.openai.handle = e.openai.stream(chatScript())
	client := e.openaiClient("s1")
	params := openai.ChatCompletionNewParams{
		Model:    "gpt-test",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("Be brief."), openai.UserMessage("Copy a.txt to b.txt.")},
	}
	msg := streamChat(t, client, params)
	e.checkRelayed(t, e.openai, "/v1/chat/completions")
	if got := e.openai.last().header.Get("Authorization"); got != "Bearer sk-secret" {
		t.Errorf("upstream Authorization = %q, want the agent's key passed through", got)
	}
	if got := e.rec.header.Get("X-Request-Id"); got != "req_123" {
		t.Errorf("X-Request-Id = %q, want the upstream's header relayed", got)
	}
	calls := msg.ToolCalls
	if len(calls) != 2 || calls[0].Function.Name != "read_file" || calls[1].Function.Arguments != `{"path":"b.txt","text":"hi"}` {
		t.Errorf("the SDK assembled %+v, want both calls", calls)
	}
	e.gw.Close()
	if diff := cmp.Diff(wantOffers, e.eng.offersMade()); diff != "" {
		t.Errorf("offers (-want +got):\n%s", diff)
	}
	// The response's calls are for the agent's next calls, in order.
	if diff := cmp.Diff([]int{7, 8}, e.eng.offerSeqs()); diff != "" {
		t.Errorf("offer seqs (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"s1 system: Be brief.", "s1 user: Copy a.txt to b.txt."}, e.eng.heard()); diff != "" {
		t.Errorf("heard (-want +got):\n%s", diff)
	}
	if len(e.eng.thinks) != 1 {
		t.Errorf("think times reported for %v, want one for s1", e.eng.thinks)
	}
	// A session named by the agent is never linked to another on
	// evidence: its calls are not remembered.
	if s, ok := e.linker.Session("read_file", []byte(`{ "path" : "a.txt" }`)); ok {
		t.Errorf("Linker.Session = %q for a call of an explicit session, want none", s)
	}

	// The next turn resends the history: only what is new is heard, and
	// tool results never are.
	e.openai.handle = e.openai.json(200, `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"Done."}}]}`)
	params.Messages = append(params.Messages, msg.ToParam(),
		openai.ToolMessage("contents of a", "call_a"), openai.ToolMessage("ok", "call_b"), openai.UserMessage("Thanks."))
	if _, err := client.Chat.Completions.New(t.Context(), params); err != nil {
		t.Fatal(err)
	}
	e.gw.Close()
	want := []string{"s1 system: Be brief.", "s1 user: Copy a.txt to b.txt.", "s1 assistant: Let me look.", "s1 user: Thanks."}
	if diff := cmp.Diff(want, e.eng.heard()); diff != "" {
		t.Errorf("heard after the second turn (-want +got):\n%s", diff)
	}
}

func TestOpenAIResponsesStreaming(t *testing.T) {
	e := newEnv(t)
	e.openai.handle = e.openai.stream(responsesScript())
	client := e.openaiClient("s1")
	stream := client.Responses.NewStreaming(t.Context(), responses.ResponseNewParams{
		Model:        "gpt-test",
		Instructions: openai.String("Be brief."),
		Input:        responses.ResponseNewParamsInputUnion{OfString: openai.String("Copy a.txt to b.txt.")},
	})
	var done []string
	for stream.Next() {
		if ev := stream.Current(); ev.Type == "response.output_item.done" {
			done = append(done, ev.Item.Name)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(done, []string{"read_file", "write_file"}) {
		t.Errorf("the SDK saw items %v done, want both calls", done)
	}
	e.checkRelayed(t, e.openai, "/v1/responses")
	e.gw.Close()
	if diff := cmp.Diff(wantOffers, e.eng.offersMade()); diff != "" {
		t.Errorf("offers (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"s1 system: Be brief.", "s1 user: Copy a.txt to b.txt."}, e.eng.heard()); diff != "" {
		t.Errorf("heard (-want +got):\n%s", diff)
	}
}

func TestAnthropicStreaming(t *testing.T) {
	e := newEnv(t)
	e.anthropic.handle = e.anthropic.stream(anthropicScript())
	client := e.anthropicClient("s1")
	stream := client.Messages.NewStreaming(t.Context(), anthropic.MessageNewParams{
		Model:     "claude-test",
		MaxTokens: 1024,
		System:    []anthropic.TextBlockParam{{Text: "Be brief."}},
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Copy a.txt to b.txt."))},
	})
	var msg anthropic.Message
	for stream.Next() {
		if err := msg.Accumulate(stream.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if len(msg.Content) != 3 || msg.Content[1].Name != "read_file" || string(msg.Content[2].Input) != `{"path":"b.txt","text":"hi"}` {
		t.Errorf("the SDK assembled %+v, want text and both calls", msg.Content)
	}
	e.checkRelayed(t, e.anthropic, "/v1/messages")
	req := e.anthropic.last()
	if req.header.Get("X-Api-Key") != "sk-ant-secret" || req.header.Get("Anthropic-Version") == "" {
		t.Errorf("upstream headers %v, want the agent's key and version passed through", req.header)
	}
	e.gw.Close()
	wantOffers := []string{
		`s1 read_file{"path":"a.txt"} 1 stream`,
		`s1 write_file{"path":"b.txt","text":"hi"} 1 stream`,
	}
	if diff := cmp.Diff(wantOffers, e.eng.offersMade()); diff != "" {
		t.Errorf("offers (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"s1 system: Be brief.", "s1 user: Copy a.txt to b.txt."}, e.eng.heard()); diff != "" {
		t.Errorf("heard (-want +got):\n%s", diff)
	}
}

func TestNotStreamed(t *testing.T) {
	for _, tc := range []struct {
		name string
		up   func(*env) *upstream
		path string
		body string
		call func(*testing.T, *env) error
	}{
		{"chat", func(e *env) *upstream { return e.openai }, "/v1/chat/completions", chatBody,
			func(t *testing.T, e *env) error {
				res, err := e.openaiClient("s1").Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{
					Model: "gpt-test", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Copy a.txt to b.txt.")}})
				if err == nil && len(res.Choices[0].Message.ToolCalls) != 2 {
					t.Errorf("the SDK read %+v, want two calls", res.Choices[0].Message)
				}
				return err
			}},
		{"responses", func(e *env) *upstream { return e.openai }, "/v1/responses", responsesBody,
			func(t *testing.T, e *env) error {
				_, err := e.openaiClient("s1").Responses.New(t.Context(), responses.ResponseNewParams{
					Model: "gpt-test", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Copy a.txt to b.txt.")}})
				return err
			}},
		{"anthropic", func(e *env) *upstream { return e.anthropic }, "/v1/messages", anthropicBody,
			func(t *testing.T, e *env) error {
				_, err := e.anthropicClient("s1").Messages.New(t.Context(), anthropic.MessageNewParams{
					Model: "claude-test", MaxTokens: 1024,
					Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Copy a.txt to b.txt."))}})
				return err
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			up := tc.up(e)
			up.handle = up.json(200, tc.body)
			if err := tc.call(t, e); err != nil {
				t.Fatal(err)
			}
			e.checkRelayed(t, up, tc.path)
			e.gw.Close()
			if diff := cmp.Diff(wantOffers, e.eng.offersMade()); diff != "" {
				t.Errorf("offers (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{"s1 user: Copy a.txt to b.txt."}, e.eng.heard()); diff != "" {
				t.Errorf("heard (-want +got):\n%s", diff)
			}
		})
	}
}

func TestUpstreamErrorsRelayed(t *testing.T) {
	const rateLimited = `{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`
	for _, tc := range []struct {
		status int
		body   string
		header []string
	}{
		{429, rateLimited, []string{"Retry-After", "7", "X-Ratelimit-Remaining-Requests", "0"}},
		{500, `{"error":{"message":"boom","type":"server_error"}}`, nil},
		{400, `{"error":{"message":"bad","type":"invalid_request_error"}}`, nil},
	} {
		t.Run(http.StatusText(tc.status), func(t *testing.T) {
			e := newEnv(t)
			e.openai.handle = e.openai.json(tc.status, tc.body, tc.header...)
			stream := e.openaiClient("s1").Chat.Completions.NewStreaming(t.Context(), openai.ChatCompletionNewParams{
				Model: "gpt-test", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
			for stream.Next() {
			}
			apiErr, ok := errors.AsType[*openai.Error](stream.Err())
			if !ok || apiErr.StatusCode != tc.status {
				t.Fatalf("err = %v, want an API error with status %d", stream.Err(), tc.status)
			}
			for i := 0; i+1 < len(tc.header); i += 2 {
				if got := apiErr.Response.Header.Get(tc.header[i]); got != tc.header[i+1] {
					t.Errorf("%s = %q, want %q", tc.header[i], got, tc.header[i+1])
				}
			}
			e.checkRelayed(t, e.openai, "/v1/chat/completions")
			e.gw.Close()
			if got := e.eng.offersMade(); len(got) != 0 {
				t.Errorf("offers %v from an error response", got)
			}
		})
	}
	t.Run("anthropic overloaded", func(t *testing.T) {
		e := newEnv(t)
		body := `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`
		e.anthropic.handle = e.anthropic.json(529, body, "Retry-After", "3")
		_, err := e.anthropicClient("s1").Messages.New(t.Context(), anthropic.MessageNewParams{
			Model: "claude-test", MaxTokens: 10,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
		apiErr, ok := errors.AsType[*anthropic.Error](err)
		if !ok || apiErr.StatusCode != 529 || apiErr.Response.Header.Get("Retry-After") != "3" {
			t.Fatalf("err = %v, want 529 with Retry-After 3", err)
		}
		e.checkRelayed(t, e.anthropic, "/v1/messages")
	})
}

func TestClientHangsUpMidStream(t *testing.T) {
	e := newEnv(t)
	first := chatCallDelta(0, "call_a", "read_file", `{"path":"a.txt"}`)
	e.openai.handle = func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		e.openai.write(w, first.write)
		select {
		case <-r.Context().Done():
			close(e.openai.gone)
		case <-time.After(10 * time.Second): // a failure guard
			t.Error("the upstream request was not cancelled when the agent hung up")
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	stream := e.openaiClient("s1").Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
		Model: "gpt-test", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
	if !stream.Next() {
		t.Fatalf("no first chunk: %v", stream.Err())
	}
	cancel()
	stream.Close()
	<-e.openai.gone
	e.srv.Close() // the gateway's handler has returned
	e.gw.Close()  // and its parser too
	// The call never completed in the stream: nothing was offered.
	if got := e.eng.offersMade(); len(got) != 0 {
		t.Errorf("offers %v from a cut stream, want none", got)
	}
}

func TestNoSessionNoLinkerHearsNothing(t *testing.T) {
	e := newEnv(t)
	gw, err := New(&Options{OpenAI: &Upstream{BaseURL: e.openai.srv.URL + "/v1"}, Engine: e.eng})
	if err != nil {
		t.Fatal(err)
	}
	e.gw = gw
	e.srv.Config.Handler = gw.Handler()
	e.openai.handle = e.openai.stream(chatScript()[:6]) // no waits: nothing is offered
	stream := e.openaiClient("").Chat.Completions.NewStreaming(t.Context(), openai.ChatCompletionNewParams{
		Model: "gpt-test", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
	for stream.Next() {
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	e.checkRelayed(t, e.openai, "/v1/chat/completions")
	e.gw.Close()
	if got, heard := e.eng.offersMade(), e.eng.heard(); len(got)+len(heard) != 0 {
		t.Errorf("offers %v, heard %v without a session or a Linker; want nothing", got, heard)
	}
}

// TestNoSessionLinks follows a conversation without Ahead-Session: the
// gateway names its session, knows its next request by the results of the
// calls its model emitted, and once the agent's call links it to a tool
// session, speaks to the engine in that one.
func TestNoSessionLinks(t *testing.T) {
	e := newEnv(t)
	e.openai.handle = e.openai.stream(chatScript())
	client := e.openaiClient("")
	params := openai.ChatCompletionNewParams{
		Model:    "gpt-test",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Copy a.txt to b.txt.")},
	}
	msg := streamChat(t, client, params)
	e.checkRelayed(t, e.openai, "/v1/chat/completions")
	e.gw.Close()
	g, ok := e.linker.Session("read_file", []byte(`{"path":"a.txt"}`))
	if !ok || !strings.HasPrefix(g, autoPrefix) {
		t.Fatalf("Linker.Session = %q, %v; want the gateway's own session", g, ok)
	}
	want := []string{g + ` read_file{"path":"a.txt"} 1 stream`, g + ` write_file{"path":"b.txt","text":"hi"} 1 stream`}
	if diff := cmp.Diff(want, e.eng.offersMade()); diff != "" {
		t.Errorf("offers (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{g + " user: Copy a.txt to b.txt."}, e.eng.heard()); diff != "" {
		t.Errorf("heard (-want +got):\n%s", diff)
	}

	// The agent's call reaches the tool side in its session "tools-1".
	key, err := callkey.Make("read_file", []byte(`{"path": "a.txt"}`))
	if err != nil {
		t.Fatal(err)
	}
	if from, ok := e.linker.Link("tools-1", key); !ok || from != g {
		t.Fatalf("Link = %q, %v; want %q", from, ok, g)
	}
	e.eng.Join(g, "tools-1") // as the engine does, and keeps the link
	// A second tool session making the same call names the same session
	// (the engine ignores a name folded already: Resolve keeps tools-1).
	if from, ok := e.linker.Link("tools-2", key); ok {
		e.eng.Join(from, "tools-2")
	}

	// The next request returns the calls' results: the same conversation,
	// heard in the tool side's session, only what is new.
	e.openai.handle = e.openai.json(200, `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"Done."}}]}`)
	params.Messages = append(params.Messages, msg.ToParam(),
		openai.ToolMessage("contents of a", "call_a"), openai.ToolMessage("ok", "call_b"), openai.UserMessage("Thanks."))
	if _, err := client.Chat.Completions.New(t.Context(), params); err != nil {
		t.Fatal(err)
	}
	e.gw.Close()
	want = []string{g + " user: Copy a.txt to b.txt.", "tools-1 assistant: Let me look.", "tools-1 user: Thanks."}
	if diff := cmp.Diff(want, e.eng.heard()); diff != "" {
		t.Errorf("heard after the second turn (-want +got):\n%s", diff)
	}

	// A new conversation with no results to show is a new session.
	e.openai.handle = e.openai.json(200, `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"Hello."}}]}`)
	if _, err := client.Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{
		Model: "gpt-test", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hi.")}}); err != nil {
		t.Fatal(err)
	}
	e.gw.Close()
	heard := e.eng.heard()
	last := heard[len(heard)-1]
	if !strings.HasPrefix(last, autoPrefix) || strings.HasPrefix(last, g) || !strings.HasSuffix(last, " user: Hi.") {
		t.Errorf("a new conversation was heard as %q, want a new session of its own", last)
	}
}

// TestLinkerAmbiguous: a call two sessions' models emitted links neither,
// by key or by id.
func TestLinkerAmbiguous(t *testing.T) {
	l := NewLinker(0)
	l.Remember("llm-a", "call_1", "read", []byte(`{"id":1}`), time.Time{})
	l.Remember("llm-b", "call_1", "read", []byte(`{ "id": 1 }`), time.Time{})
	l.Remember("llm-b", "call_2", "read", []byte(`{"id":2}`), time.Time{})
	key := func(args string) callkey.Key {
		k, err := callkey.Make("read", []byte(args))
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	if from, ok := l.Link("tools", key(`{"id":1}`)); ok {
		t.Errorf("Link of a call both sessions emitted = %q, want none", from)
	}
	if s, ok := l.SessionOfID("call_1"); ok {
		t.Errorf("SessionOfID of an id both sessions used = %q, want none", s)
	}
	if from, ok := l.Link("tools", key(`{"id":2}`)); !ok || from != "llm-b" {
		t.Errorf("Link of llm-b's own call = %q, %v; want llm-b", from, ok)
	}
	l.Forget("llm-b")
	if from, ok := l.Link("tools", key(`{"id":2}`)); ok {
		t.Errorf("Link after Forget = %q, want none", from)
	}
}

// TestLateLink: the agent's call reaches the tool side before the gateway
// has parsed the response that emitted it (its parser runs beside the
// copy, never holding it back). The call links all the same when the
// gateway hears it: the gateway folds its session into the tool side's.
func TestLateLink(t *testing.T) {
	e := newEnv(t)
	key, err := callkey.Make("read_file", []byte(`{"path":"a.txt"}`))
	if err != nil {
		t.Fatal(err)
	}
	stream := e.openai.stream(chatScript())
	e.openai.handle = func(w http.ResponseWriter, r *http.Request) {
		// The request has gone upstream: the agent's call, made now,
		// comes before its emission is heard.
		if from, ok := e.linker.Link("tools-1", key); ok {
			t.Errorf("Link before the emission = %q, want none yet", from)
		}
		stream(w, r)
	}
	s := e.openaiClient("").Chat.Completions.NewStreaming(t.Context(), openai.ChatCompletionNewParams{
		Model: "gpt-test", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Copy a.txt to b.txt.")}})
	for s.Next() {
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	e.gw.Close()
	g, ok := e.linker.Session("read_file", []byte(`{"path":"a.txt"}`))
	if !ok {
		t.Fatal("the emitted call was not remembered")
	}
	if diff := cmp.Diff([]string{g + "→tools-1"}, e.eng.joined()); diff != "" {
		t.Errorf("joins (-want +got):\n%s", diff)
	}
	if got := e.eng.Resolve(g); got != "tools-1" {
		t.Errorf("Resolve(%s) = %q, want tools-1", g, got)
	}
}

// TestSlowParserSameConversation: the next request of a conversation comes
// while the parser of the response before it is still behind (here held
// in hearing the first message). It returns the result of a call that
// response emitted, so it is the same conversation: the gateway waits for
// the parsers of the responses that had ended before it names the session.
func TestSlowParserSameConversation(t *testing.T) {
	e := newEnv(t)
	release := make(chan struct{})
	e.eng.hold = func(content string) {
		if content == "Copy a.txt to b.txt." {
			<-release
		}
	}
	// Played without waiting for offers: the parser is held.
	script := slices.DeleteFunc(chatScript(), func(s step) bool { return s.waitTool != "" })
	e.openai.handle = e.openai.stream(script)
	client := e.openaiClient("")
	params := openai.ChatCompletionNewParams{
		Model: "gpt-test", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Copy a.txt to b.txt.")}}
	msg := streamChat(t, client, params)
	// The relay does not wait for the parser: the response is whole.
	e.openai.handle = e.openai.json(200, `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"Done."}}]}`)
	params.Messages = append(params.Messages, msg.ToParam(),
		openai.ToolMessage("contents of a", "call_a"), openai.ToolMessage("ok", "call_b"), openai.UserMessage("Thanks."))
	if _, err := client.Chat.Completions.New(t.Context(), params); err != nil {
		t.Fatal(err)
	}
	close(release)
	e.gw.Close()
	heard := e.eng.heard()
	if len(heard) != 3 {
		t.Fatalf("heard %q, want the three messages", heard)
	}
	g, _, _ := strings.Cut(heard[0], " ")
	want := []string{g + " user: Copy a.txt to b.txt.", g + " assistant: Let me look.", g + " user: Thanks."}
	if diff := cmp.Diff(want, heard); diff != "" {
		t.Errorf("heard (-want +got):\n%s", diff)
	}
}

// TestLinkerLate: a tool-side call no model had emitted links the session
// that emits it later, only if it was made after that response's request
// was sent and by exactly one tool-side session.
func TestLinkerLate(t *testing.T) {
	key := func(args string) callkey.Key {
		k, err := callkey.Make("read", []byte(args))
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	before := time.Now().Add(-time.Minute)
	l := NewLinker(0)
	l.Link("tools-1", key(`{"id":1}`))
	if into, ok := l.Remember("llm-a", "c1", "read", []byte(`{"id":1}`), before); !ok || into != "tools-1" {
		t.Errorf("Remember after the agent's call = %q, %v; want tools-1", into, ok)
	}
	if into, ok := l.Remember("llm-b", "c1", "read", []byte(`{"id":1}`), before); ok {
		t.Errorf("a second emission of a call already linked = %q, want no link", into)
	}
	if len(l.madeKeys) != 0 {
		t.Errorf("the call that linked is still kept: %v", l.madeKeys)
	}

	l.Link("tools-1", key(`{"id":2}`))
	if into, ok := l.Remember("llm-c", "c2", "read", []byte(`{"id":2}`), time.Now().Add(time.Minute)); ok {
		t.Errorf("a call made before the response's request = %q, want no link", into)
	}

	l.Link("tools-1", key(`{"id":3}`))
	l.Link("tools-2", key(`{"id":3}`))
	if into, ok := l.Remember("llm-d", "c3", "read", []byte(`{"id":3}`), before); ok {
		t.Errorf("a call two tool sessions made = %q, want no link", into)
	}
}

// TestLinkerForgetsOldest: calls past the limit are forgotten, however
// many sessions emitted the same one.
func TestLinkerForgetsOldest(t *testing.T) {
	l := NewLinker(4)
	for _, s := range []string{"a", "b", "c", "d", "e", "f", "g"} {
		l.Remember("llm-"+s, "id-"+s, "read", []byte(`{"id":1}`), time.Time{})
	}
	if s, ok := l.Session("read", []byte(`{"id":1}`)); ok {
		t.Errorf("Session of a call four sessions emitted = %q, want none", s)
	}
	if _, ok := l.SessionOfID("id-c"); ok {
		t.Error("the oldest calls are still remembered")
	}
	if s, ok := l.SessionOfID("id-g"); !ok || s != "llm-g" {
		t.Errorf("SessionOfID(id-g) = %q, %v; want llm-g", s, ok)
	}

	// Three sessions emit one call, then other calls push them out one
	// by one: the key is ambiguous until one session is left.
	l = NewLinker(4)
	for _, s := range []string{"a", "b", "c"} {
		l.Remember("llm-"+s, "", "read", []byte(`{"id":1}`), time.Time{})
	}
	for i, want := range []string{"", "", "llm-c"} {
		l.Remember("llm-x", "", "list", []byte(`{"n":`+strconv.Itoa(i)+`}`), time.Time{})
		if s, _ := l.Session("read", []byte(`{"id":1}`)); s != want {
			t.Errorf("after %d other calls, Session = %q, want %q", i+1, s, want)
		}
	}
}

func TestOtherRoutes(t *testing.T) {
	e := newEnv(t)
	e.openai.handle = e.openai.json(200, `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.5]}],"model":"m","usage":{"prompt_tokens":1,"total_tokens":1}}`)
	_, err := e.openaiClient("s1").Embeddings.New(t.Context(), openai.EmbeddingNewParams{
		Model: "text-embedding-test", Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("hi")}})
	if err != nil {
		t.Fatal(err)
	}
	e.checkRelayed(t, e.openai, "/v1/embeddings")

	e.openai.handle = e.openai.json(200, `{"object":"list","data":[{"id":"gpt-test","object":"model","created":1,"owned_by":"o"}]}`)
	if _, err := e.openaiClient("s1").Models.List(t.Context()); err != nil {
		t.Fatal(err)
	}
	e.checkRelayed(t, e.openai, "/v1/models")

	e.anthropic.handle = e.anthropic.json(200, `{"data":[{"type":"model","id":"claude-test","display_name":"C","created_at":"2025-01-01T00:00:00Z"}],"has_more":false,"first_id":"claude-test","last_id":"claude-test"}`)
	if _, err := e.anthropicClient("s1").Models.List(t.Context(), anthropic.ModelListParams{}); err != nil {
		t.Fatal(err)
	}
	e.checkRelayed(t, e.anthropic, "/v1/models")

	e.anthropic.handle = e.anthropic.json(200, `{"input_tokens":12}`)
	res, err := e.anthropicClient("s1").Messages.CountTokens(t.Context(), anthropic.MessageCountTokensParams{
		Model:    "claude-test",
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("not a turn"))}})
	if err != nil || res.InputTokens != 12 {
		t.Fatalf("CountTokens = %v, %v", res, err)
	}
	e.checkRelayed(t, e.anthropic, "/v1/messages/count_tokens")
	e.gw.Close()
	if heard := e.eng.heard(); len(heard) != 0 {
		t.Errorf("heard %v from routes that are not turns", heard)
	}
}

func TestTargetJoinsPaths(t *testing.T) {
	for _, tc := range []struct {
		openai, anthropic string
		path, anthroPath  string
		wantO, wantA      string
	}{
		{"http://h/v1", "http://a", "/v1/chat/completions?x=1", "/v1/messages", "http://h/v1/chat/completions?x=1", "http://a/v1/messages"},
		{"http://h/v1/", "http://a/", "/v1/chat/completions", "/v1/messages/count_tokens", "http://h/v1/chat/completions", "http://a/v1/messages/count_tokens"},
		{"https://h/openai/v1?api-version=2", "https://a/proxy", "/v1/models?limit=2", "/v1/messages", "https://h/openai/v1/models?api-version=2&limit=2", "https://a/proxy/v1/messages"},
		{"https://h/openai/v1/", "https://a/proxy/", "/v1/responses", "/v1/models", "https://h/openai/v1/responses", "https://a/proxy/v1/models"},
	} {
		g, err := New(&Options{OpenAI: &Upstream{BaseURL: tc.openai}, Anthropic: &Upstream{BaseURL: tc.anthropic}})
		if err != nil {
			t.Fatal(err)
		}
		if got := g.target(false, httptest.NewRequest("POST", tc.path, nil)).String(); got != tc.wantO {
			t.Errorf("openai %s + %s = %s, want %s", tc.openai, tc.path, got, tc.wantO)
		}
		if got := g.target(true, httptest.NewRequest("POST", tc.anthroPath, nil)).String(); got != tc.wantA {
			t.Errorf("anthropic %s + %s = %s, want %s", tc.anthropic, tc.anthroPath, got, tc.wantA)
		}
	}
	if _, err := New(&Options{}); !errors.Is(err, ErrNoUpstream) {
		t.Errorf("New without upstreams: err = %v, want ErrNoUpstream", err)
	}
	if _, err := New(&Options{OpenAI: &Upstream{BaseURL: "api.openai.com/v1"}}); err == nil {
		t.Error("New accepted a base URL without a scheme")
	}
}

// TestCompressedBodyPassesThrough checks that the agent's Accept-Encoding
// reaches the upstream, that a gzip body is relayed still compressed and
// byte for byte, and that its calls are found all the same.
func TestCompressedBodyPassesThrough(t *testing.T) {
	e := newEnv(t)
	var zbody bytes.Buffer
	zw := gzip.NewWriter(&zbody)
	io.WriteString(zw, chatBody)
	zw.Close()
	e.openai.handle = func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Encoding", "gzip")
		w.Header().Set("Connection", "X-Hop")
		w.Header().Set("X-Hop", "must not pass")
		e.openai.write(w, zbody.String())
	}
	req, _ := http.NewRequest("POST", e.srv.URL+"/v1/chat/completions", bytes.NewReader([]byte(`{"messages":[{"role":"user","content":"hi"}]}`)))
	req.Header.Set("Accept-Encoding", "gzip")
	req.Header.Set(SessionHeader, "s1")
	res, err := (&http.Client{Transport: &http.Transport{DisableCompression: true}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if !bytes.Equal(got, zbody.Bytes()) || res.Header.Get("Content-Encoding") != "gzip" {
		t.Errorf("the agent got %d bytes (encoding %q), want the %d compressed bytes as sent", len(got), res.Header.Get("Content-Encoding"), zbody.Len())
	}
	if res.Header.Get("X-Hop") != "" {
		t.Error("a header the upstream named in Connection was relayed")
	}
	if ae := e.openai.last().header.Get("Accept-Encoding"); ae != "gzip" {
		t.Errorf("upstream Accept-Encoding = %q, want the agent's gzip", ae)
	}
	e.gw.Close()
	if diff := cmp.Diff(wantOffers, e.eng.offersMade()); diff != "" {
		t.Errorf("offers (-want +got):\n%s", diff)
	}
}

func TestLargeBodyRelayedUnheard(t *testing.T) {
	eng := newFakeEngine()
	up := newUpstream(t, eng)
	up.handle = up.json(200, `{}`)
	gw, err := New(&Options{OpenAI: &Upstream{BaseURL: up.srv.URL + "/v1"}, Engine: eng, MaxBody: 64})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw.Handler())
	defer srv.Close()
	body, _ := json.Marshal(map[string]any{"messages": []any{map[string]any{"role": "user", "content": string(bytes.Repeat([]byte("x"), 200))}}})
	req, _ := http.NewRequest("POST", srv.URL+"/v1/chat/completions", bytes.NewReader(body))
	req.Header.Set(SessionHeader, "s1")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	gw.Close()
	if !bytes.Equal(up.last().body, body) {
		t.Error("a body over MaxBody did not reach the upstream whole")
	}
	if heard := eng.heard(); len(heard) != 0 {
		t.Errorf("heard %v from a body over MaxBody", heard)
	}
}

// TestHeadFlushedBeforeFirstEvent: a stream's status and headers reach the
// agent when the upstream sends them, not with the first event.
func TestHeadFlushedBeforeFirstEvent(t *testing.T) {
	e := newEnv(t)
	release := make(chan struct{})
	var late atomic.Bool
	e.openai.handle = func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-time.After(10 * time.Second): // a failure guard
			late.Store(true)
		}
		e.openai.write(w, "data: [DONE]\n\n")
	}
	req, _ := http.NewRequest("POST", e.srv.URL+"/v1/chat/completions", bytes.NewReader([]byte(`{}`)))
	res, err := http.DefaultClient.Do(req)
	close(release)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if late.Load() {
		t.Error("the response head waited for the first event")
	}
}
