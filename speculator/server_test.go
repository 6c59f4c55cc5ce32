package speculator

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ahead-dev/ahead/predict"
	"github.com/ahead-dev/ahead/trace"
)

// scripted is an OpenAI-compatible chat completions server whose answers a
// test scripts: reply gets the request's number (from 0) and body and says
// what to answer, and after how long.
type scripted struct {
	reply func(n int, req map[string]any) (status int, body string, delay time.Duration)

	mu   sync.Mutex // protects reqs
	reqs []received
}

type received struct {
	header http.Header
	body   map[string]any
	raw    string
}

func (s *scripted) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	var body map[string]any
	_ = json.Unmarshal(raw, &body)
	s.mu.Lock()
	n := len(s.reqs)
	s.reqs = append(s.reqs, received{header: r.Header.Clone(), body: body, raw: string(raw)})
	s.mu.Unlock()
	status, out, delay := s.reply(n, body)
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	io.WriteString(w, out)
}

func (s *scripted) received() []received {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]received(nil), s.reqs...)
}

// always answers every request alike.
func always(status int, body string, delay time.Duration) func(int, map[string]any) (int, string, time.Duration) {
	return func(int, map[string]any) (int, string, time.Duration) { return status, body, delay }
}

// tc is a tool call in a scripted answer.
type tc struct{ name, args string }

// completion is a chat completion whose single choice holds calls.
func completion(totalTokens int, calls ...tc) string {
	var cs []string
	for i, c := range calls {
		a, _ := json.Marshal(c.args)
		cs = append(cs, fmt.Sprintf(`{"id":"c%d","type":"function","function":{"name":%q,"arguments":%s}}`, i, c.name, a))
	}
	return fmt.Sprintf(`{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"tool_calls",`+
		`"message":{"role":"assistant","content":null,"tool_calls":[%s]}}],"usage":{"prompt_tokens":%d,"completion_tokens":0,"total_tokens":%d}}`,
		strings.Join(cs, ","), totalTokens, totalTokens)
}

// inMemory serves requests with a handler in the caller's goroutine, so
// that a synctest bubble's fake clock governs the server too.
type inMemory struct{ h http.Handler }

func (t inMemory) RoundTrip(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, r)
	if err := r.Context().Err(); err != nil {
		return nil, err
	}
	res := rec.Result()
	res.Request = r
	return res, nil
}

// down fails every request as a refused connection does.
type down struct{}

func (down) RoundTrip(r *http.Request) (*http.Response, error) {
	return nil, &net.OpError{Op: "dial", Net: "tcp", Err: fmt.Errorf("connection refused")}
}

// offers collects what a speculator offers, as the engine would take it:
// guesses for a seq the session has begun (begin) are refused as late.
type offers struct {
	mu    sync.Mutex // protects got and begun
	got   []offer
	begun map[string]int // session → the seq of its last call begun
}

type offer struct {
	session string
	seq     int
	preds   []predict.Prediction
}

func (o *offers) offer(session string, seq int, preds []predict.Prediction) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if b, ok := o.begun[session]; ok && b >= seq {
		return false
	}
	o.got = append(o.got, offer{session, seq, preds})
	return true
}

// begin says the agent of session began its call seq.
func (o *offers) begin(session string, seq int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.begun == nil {
		o.begun = make(map[string]int)
	}
	o.begun[session] = seq
}

func (o *offers) all() []offer {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]offer(nil), o.got...)
}

var testTools = []Tool{
	{Name: "list_items", Description: "Lists the items of a folder.", Schema: []byte(`{"type":"object","properties":{"folder":{"type":"string"}}}`)},
	{Name: "read_item", Description: "Reads an item.", Schema: []byte(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`)},
	{Name: "secret", Description: "Reads a secret."},
}

// newTest returns a speculator talking to rt, with the test tools, its
// offers and its registry.
func newTest(t *testing.T, rt http.RoundTripper, edit func(*Options)) (*Speculator, *offers, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	o := &offers{}
	opts := &Options{
		BaseURL:    "http://speculator.test/v1",
		Model:      "small",
		Tools:      func() []Tool { return testTools },
		Private:    func(tool string) bool { return tool == "secret" },
		Offer:      o.offer,
		Registerer: reg,
		HTTPClient: &http.Client{Transport: rt},
	}
	if edit != nil {
		edit(opts)
	}
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s, o, reg
}

// result is a finished call of session s.
func result(s string, seq, step int, tool, args, output string, thinkMS float64) trace.Event {
	d := 100.0
	ev := trace.Event{Session: s, Seq: seq, Step: step, Tool: tool, Args: json.RawMessage(args), Status: trace.StatusOK, Output: output, DurationMS: &d}
	if thinkMS > 0 {
		ev.LLMMS = &thinkMS
	}
	return ev
}

func message(s string, seq int, role, content string) trace.Event {
	return trace.Event{Kind: trace.KindMessage, Session: s, Seq: seq, Role: role, Content: content}
}
