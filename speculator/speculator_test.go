package speculator

import (
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ahead-dev/ahead/predict"
	"github.com/ahead-dev/ahead/trace"
)

// TestNoAuthorizationWithoutKey: without an API key no Authorization
// header is sent, even with OPENAI_API_KEY set; with one, it is the bearer.
// A real HTTP server, so the header is what goes on the wire.
func TestNoAuthorizationWithoutKey(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-from-the-environment")
	t.Setenv("OPENAI_BASE_URL", "http://elsewhere.invalid/v1")
	for _, tt := range []struct{ key, want string }{{"", ""}, {"k1", "Bearer k1"}} {
		t.Run("key="+tt.key, func(t *testing.T) {
			srv := &scripted{reply: always(200, completion(10, tc{"read_item", `{"name":"a"}`}), 0)}
			hs := httptest.NewServer(srv)
			defer hs.Close()
			got := make(chan []predict.Prediction, 1)
			s, err := New(&Options{
				BaseURL: hs.URL + "/v1", Model: "small", APIKey: tt.key,
				Tools: func() []Tool { return testTools },
				Offer: func(_ string, _ int, p []predict.Prediction) bool { got <- p; return true },
			})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			s.Observe(result("a", 0, 1, "list_items", `{}`, `["a"]`, 0))
			select {
			case <-got:
			case <-time.After(30 * time.Second): // a guard, not a wait: the answer is immediate
				t.Fatal("no guesses offered")
			}
			reqs := srv.received()
			if len(reqs) != 1 {
				t.Fatalf("%d requests, want 1", len(reqs))
			}
			if h := reqs[0].header.Get("Authorization"); h != tt.want {
				t.Errorf("Authorization = %q, want %q", h, tt.want)
			}
		})
	}
}

// TestGuessesOffered: one request per think window, with the tools,
// tool_choice required, the conversation and outputs (not a private
// tool's); its guesses are offered with the prior P and canonical args.
func TestGuessesOffered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := &scripted{reply: always(200, completion(50,
			tc{"read_item", `{ "name": "x1" }`}, tc{"read_item", `{"name":"x2"}`}, tc{"list_items", ``}), 300*time.Millisecond)}
		conv := []trace.Event{
			message("s", 0, trace.RoleSystem, "You are a filing assistant."),
			message("s", 0, trace.RoleUser, "Please read everything in the new folder."),
		}
		s, o, _ := newTest(t, inMemory{srv}, func(o *Options) {
			o.Conversation = func(string) []trace.Event { return conv }
		})
		s.Observe(result("s", 0, 1, "secret", `{}`, "SECRET-OUTPUT", 0))
		s.Observe(result("s", 1, 2, "list_items", `{"folder":"new"}`, `["x1","x2"]`, 0))
		synctest.Wait()
		if len(o.all()) != 0 {
			t.Fatal("offered before the answer came")
		}
		time.Sleep(300 * time.Millisecond)
		synctest.Wait()
		want := []offer{{"s", 2, []predict.Prediction{
			{Tool: "read_item", Args: json.RawMessage(`{"name":"x1"}`), P: 0.3, Origin: predict.OriginSpeculator},
			{Tool: "read_item", Args: json.RawMessage(`{"name":"x2"}`), P: 0.15, Origin: predict.OriginSpeculator},
			{Tool: "list_items", Args: json.RawMessage(`{}`), P: 0.075, Origin: predict.OriginSpeculator},
		}}}
		if d := cmp.Diff(want, o.all(), cmp.AllowUnexported(offer{})); d != "" {
			t.Errorf("offers (-want +got):\n%s", d)
		}
		reqs := srv.received()
		// The first result's window took a slot at once; the second
		// result (a later step) closed it, so its answer is late.
		if len(reqs) != 2 {
			t.Fatalf("%d requests, want 2 (one per window)", len(reqs))
		}
		if got := s.Stats().Late; got != 1 {
			t.Errorf("late = %d, want 1 (the first window's answer)", got)
		}
		// The two requests race to the server: take the second window's.
		req := reqs[0]
		if !strings.Contains(req.raw, "x1") {
			req = reqs[1]
		}
		if req.body["tool_choice"] != "required" || req.body["model"] != "small" {
			t.Errorf("tool_choice %v, model %v; want required, small", req.body["tool_choice"], req.body["model"])
		}
		if n := len(req.body["tools"].([]any)); n != len(testTools) {
			t.Errorf("%d tools sent, want %d", n, len(testTools))
		}
		for _, text := range []string{"You are a filing assistant.", "Please read everything", `[\"x1\",\"x2\"]`, "3 most likely"} {
			if !strings.Contains(req.raw, text) {
				t.Errorf("request lacks %q", text)
			}
		}
		if strings.Contains(req.raw, "SECRET-OUTPUT") {
			t.Error("a private tool's output was sent")
		}
		if !strings.Contains(req.raw, withheld) {
			t.Error("the private output's placeholder is missing")
		}
	})
}

// TestFailuresNeverReachAgent: whatever the server does wrong, nothing is
// offered but the valid guesses, and each wrong thing costs a metric.
func TestFailuresNeverReachAgent(t *testing.T) {
	for _, tt := range []struct {
		name   string
		rt     func(*scripted) http.RoundTripper
		status int
		body   string
		delay  time.Duration
		reason string
		offers int // valid guesses offered
	}{
		{name: "down", rt: func(*scripted) http.RoundTripper { return down{} }, reason: ReasonDown},
		{name: "5xx", status: 503, body: `{"error":{"message":"overloaded"}}`, reason: ReasonDown},
		{name: "429", status: 429, body: `{"error":{"message":"slow down"}}`, reason: ReasonRateLimited},
		{name: "400", status: 400, body: `{"error":{"message":"no such model"}}`, reason: ReasonStatus},
		{name: "slow", status: 200, body: completion(5, tc{"read_item", `{"name":"a"}`}), delay: time.Hour, reason: ReasonTimeout},
		{name: "garbage", status: 200, body: `<html>not json{`, reason: ReasonBadJSON},
		{name: "no calls", status: 200, body: `{"choices":[{"message":{"role":"assistant","content":"I think read_item"}}]}`, reason: ReasonNoGuesses},
		{name: "no choices", status: 200, body: `{"choices":[]}`, reason: ReasonNoGuesses},
		{name: "unknown tool", status: 200, body: completion(5, tc{"rm_rf", `{}`}, tc{"read_item", `{"name":"a"}`}), reason: ReasonUnknownTool, offers: 1},
		{name: "args not object", status: 200, body: completion(5, tc{"read_item", `["a"]`}), reason: ReasonBadArgs},
		{name: "args not json", status: 200, body: completion(5, tc{"read_item", `{"name":`}), reason: ReasonBadArgs},
		{name: "missing required", status: 200, body: completion(5, tc{"read_item", `{"title":"a"}`}), reason: ReasonSchema},
		{name: "wrong type", status: 200, body: completion(5, tc{"read_item", `{"name":7}`}), reason: ReasonSchema},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := &scripted{reply: always(tt.status, tt.body, tt.delay)}
				var rt http.RoundTripper = inMemory{srv}
				if tt.rt != nil {
					rt = tt.rt(srv)
				}
				s, o, _ := newTest(t, rt, nil)
				s.Observe(result("s", 0, 1, "list_items", `{}`, `["a"]`, 0))
				time.Sleep(DefaultTimeout)
				synctest.Wait()
				n := 0
				for _, of := range o.all() {
					n += len(of.preds)
				}
				if n != tt.offers {
					t.Errorf("%d guesses offered, want %d", n, tt.offers)
				}
				if got := testutil.ToFloat64(s.m.failures.WithLabelValues(tt.reason)); got != 1 {
					t.Errorf("failures{reason=%s} = %v, want 1", tt.reason, got)
				}
				// Stats counts as the metrics do: a completion came back
				// unless the server failed, timed out or sent no JSON.
				want := Stats{Requests: 1, Failures: 1, FailedBy: map[string]int64{tt.reason: 1}, Guesses: int64(tt.offers), Tokens: 0}
				if tt.status == 200 && tt.reason != ReasonTimeout && tt.reason != ReasonBadJSON {
					want.Answers = 1
				}
				got := s.Stats()
				got.Tokens = 0 // estimated or reported: not what this test is about
				if d := cmp.Diff(want, got); d != "" {
					t.Errorf("Stats (-want +got):\n%s", d)
				}
			})
		})
	}
}

// TestDownServerOverNetwork: a closed port is a failure named down, and
// the speculator backs off instead of asking again at once. (A refused
// connection leaves no goroutine behind, so the bubble's Wait sees the
// request through.)
func TestDownServerOverNetwork(t *testing.T) {
	hs := httptest.NewServer(http.NotFoundHandler())
	url := hs.URL
	hs.Close()
	synctest.Test(t, func(t *testing.T) {
		s, err := New(&Options{BaseURL: url + "/v1", Model: "m", Tools: func() []Tool { return testTools },
			HTTPClient: &http.Client{Transport: &http.Transport{}}})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		s.Observe(result("s", 0, 1, "list_items", `{}`, `[]`, 0))
		synctest.Wait()
		s.Observe(result("s", 1, 2, "read_item", `{"name":"a"}`, `a`, 0))
		synctest.Wait()
		if got := testutil.ToFloat64(s.m.failures.WithLabelValues(ReasonDown)); got != 1 {
			t.Errorf("failures{down} = %v, want 1", got)
		}
		if got := testutil.ToFloat64(s.m.skipped.WithLabelValues(ReasonBackoff)); got != 1 {
			t.Errorf("skipped{backoff} = %v, want 1", got)
		}
	})
}

// TestToolChoiceFallback: a server that refuses tool_choice "required" is
// asked again with "auto", and from then on with "auto" only.
func TestToolChoiceFallback(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := &scripted{reply: func(_ int, req map[string]any) (int, string, time.Duration) {
			if req["tool_choice"] == "required" {
				return 400, `{"error":{"message":"tool_choice \"required\" is not supported","type":"invalid_request_error"}}`, 0
			}
			return 200, completion(5, tc{"read_item", `{"name":"a"}`}), 0
		}}
		s, o, _ := newTest(t, inMemory{srv}, nil)
		s.Observe(result("s", 0, 1, "list_items", `{}`, `["a"]`, 0))
		synctest.Wait()
		s.Observe(result("s", 1, 2, "read_item", `{"name":"a"}`, `a`, 0))
		synctest.Wait()
		var choices []any
		for _, r := range srv.received() {
			choices = append(choices, r.body["tool_choice"])
		}
		if d := cmp.Diff([]any{"required", "auto", "auto"}, choices); d != "" {
			t.Errorf("tool_choice per request (-want +got):\n%s", d)
		}
		if len(o.all()) != 2 {
			t.Errorf("%d offers, want 2", len(o.all()))
		}
		if f := s.Stats().Failures; f != 0 {
			t.Errorf("%d failures, want 0", f)
		}
	})
}

// TestAnswerLateOnceCallBegun: an answer that comes after the agent began
// the call it was meant for, but before that call's result (which is when
// the speculator itself sees the call), is refused by the engine: it counts
// late, not as guesses, and its guesses are not scored, so they teach P
// nothing. An answer for a step still running in parallel is in time.
func TestAnswerLateOnceCallBegun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := &scripted{reply: always(200, completion(5, tc{"read_item", `{"name":"a"}`}), 1500*time.Millisecond)}
		s, o, _ := newTest(t, inMemory{srv}, func(o *Options) { o.Timeout = 5 * time.Second })
		s.Observe(result("s", 0, 1, "list_items", `{}`, `["a"]`, 0))
		time.Sleep(time.Second)
		o.begin("s", 1) // the agent calls read_item a; it runs 2 s
		time.Sleep(time.Second)
		synctest.Wait()
		if got := o.all(); len(got) != 0 {
			t.Errorf("late answer offered: %+v", got)
		}
		s.Observe(result("s", 1, 2, "read_item", `{"name":"a"}`, "a", 0))
		st := s.Stats()
		if st.Late != 1 || st.Guesses != 0 || st.Hits != 0 {
			t.Errorf("late %d, guesses %d, hits %d; want 1, 0, 0", st.Late, st.Guesses, st.Hits)
		}

		// The next window's answer comes while the agent thinks: in time,
		// for seq 2, and scored.
		time.Sleep(1600 * time.Millisecond)
		synctest.Wait()
		if got := o.all(); len(got) != 1 || got[0].seq != 2 {
			t.Fatalf("offers %+v, want one for seq 2", got)
		}
		if st := s.Stats(); st.Late != 1 || st.Guesses != 1 {
			t.Errorf("late %d, guesses %d; want 1, 1", st.Late, st.Guesses)
		}
	})
}

// TestLateAnswerDropped: an answer that comes after the session's next
// call, or after the model's turn ended, is dropped and counted late.
func TestLateAnswerDropped(t *testing.T) {
	for _, tt := range []struct {
		name  string
		close func(s *Speculator)
	}{
		{"next call", func(s *Speculator) { s.Observe(result("s", 1, 2, "read_item", `{"name":"a"}`, "a", 0)) }},
		{"assistant message", func(s *Speculator) { s.Hear(message("s", 1, trace.RoleAssistant, "Reading a.")) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := &scripted{reply: always(200, completion(5, tc{"read_item", `{"name":"a"}`}), 1500*time.Millisecond)}
				s, o, _ := newTest(t, inMemory{srv}, func(o *Options) { o.Timeout = 5 * time.Second })
				s.Observe(result("s", 0, 1, "list_items", `{}`, `["a"]`, 0))
				time.Sleep(time.Second)
				tt.close(s)
				time.Sleep(time.Second)
				synctest.Wait()
				for _, of := range o.all() {
					if of.session == "s" && len(srv.received()) < 2 {
						t.Errorf("late answer offered: %+v", of.preds)
					}
				}
				if got := s.Stats().Late; got != 1 {
					t.Errorf("late = %d, want 1", got)
				}
			})
		})
	}
}

// TestAdmissionStopsWhenSlow: once measured latency exceeds the agent's
// think time, windows are not asked about (the answer would be late),
// except one probe per probeInterval.
func TestAdmissionStopsWhenSlow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := &scripted{reply: always(200, completion(5, tc{"read_item", `{"name":"a"}`}), 900*time.Millisecond)}
		s, _, _ := newTest(t, inMemory{srv}, nil)
		// The agent thinks 500ms before each call; tool results at 0,
		// 0.5s, 1s, ... The first two windows are asked (no latency
		// known yet); the first answer (at 0.9s) says 900ms > 500ms.
		for i := range 6 {
			s.Observe(result("s", i, i+1, "read_item", `{"name":"a"}`, "a", 500))
			time.Sleep(500 * time.Millisecond)
		}
		synctest.Wait()
		if n := len(srv.received()); n != 2 {
			t.Errorf("%d requests, want 2", n)
		}
		if got := testutil.ToFloat64(s.m.skipped.WithLabelValues(ReasonSlow)); got != 4 {
			t.Errorf("skipped{slow} = %v, want 4", got)
		}
		if st := s.Stats(); st.Skipped != 4 || !maps.Equal(st.SkippedBy, map[string]int64{ReasonSlow: 4}) {
			t.Errorf("Stats skipped %d by %v, want 4 slow", st.Skipped, st.SkippedBy)
		}
		time.Sleep(probeInterval)
		s.Observe(result("s", 6, 7, "read_item", `{"name":"a"}`, "a", 500))
		synctest.Wait()
		if n := len(srv.received()); n != 3 {
			t.Errorf("after %v: %d requests, want 3 (a probe)", probeInterval, n)
		}
	})
}

// TestTokenBudget: requests spend the per-minute token budget (by the
// tokens the server reports); when it is spent, windows are skipped until
// it refills.
func TestTokenBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := &scripted{reply: always(200, completion(2000, tc{"read_item", `{"name":"a"}`}), 0)}
		s, _, _ := newTest(t, inMemory{srv}, func(o *Options) { o.MaxTokensPerMinute = 2000 })
		s.Observe(result("s", 0, 1, "list_items", `{}`, `["a"]`, 0))
		synctest.Wait()
		s.Observe(result("s", 1, 2, "read_item", `{"name":"a"}`, "a", 0))
		synctest.Wait()
		if n := len(srv.received()); n != 1 {
			t.Errorf("%d requests, want 1", n)
		}
		if got := testutil.ToFloat64(s.m.skipped.WithLabelValues(ReasonBudget)) + testutil.ToFloat64(s.m.skipped.WithLabelValues(ReasonNoGain)); got != 1 {
			t.Errorf("skipped for the budget = %v, want 1", got)
		}
		if got := s.Stats().Tokens; got != 2000 {
			t.Errorf("tokens = %d, want 2000", got)
		}
		time.Sleep(time.Minute)
		s.Observe(result("s", 2, 3, "read_item", `{"name":"b"}`, "b", 0))
		synctest.Wait()
		if n := len(srv.received()); n != 2 {
			t.Errorf("a minute later: %d requests, want 2", n)
		}
	})
}

// TestSlotsEarlierStepsAndShortFirst: with one slot, queued windows go
// earlier steps first, then the shortest requests.
func TestSlotsEarlierStepsAndShortFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := &scripted{reply: always(200, completion(5, tc{"read_item", `{"name":"a"}`}), time.Second)}
		s, _, _ := newTest(t, inMemory{srv}, func(o *Options) { o.MaxConcurrency = 1; o.Timeout = 10 * time.Second })
		s.Observe(result("first", 0, 1, "list_items", `{}`, "out-first", 0))
		s.Observe(result("late-step", 4, 5, "list_items", `{}`, "out-late-step", 0))
		s.Observe(result("long", 1, 2, "list_items", `{}`, "out-long"+strings.Repeat(" x", 2000), 0))
		s.Observe(result("short", 1, 2, "list_items", `{}`, "out-short", 0))
		time.Sleep(10 * time.Second)
		synctest.Wait()
		var order []string
		for _, r := range srv.received() {
			for _, name := range []string{"out-first", "out-late-step", "out-long", "out-short"} {
				if strings.Contains(r.raw, name) {
					order = append(order, name)
				}
			}
		}
		if d := cmp.Diff([]string{"out-first", "out-short", "out-long", "out-late-step"}, order); d != "" {
			t.Errorf("order (-want +got):\n%s", d)
		}
	})
}

// TestCloseCancelsAndWaits: Close ends the requests in flight at once and
// waits for them; nothing is offered or counted after.
func TestCloseCancelsAndWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := &scripted{reply: always(200, completion(5, tc{"read_item", `{"name":"a"}`}), time.Hour)}
		s, o, _ := newTest(t, inMemory{srv}, func(o *Options) { o.Timeout = 2 * time.Hour })
		s.Observe(result("s", 0, 1, "list_items", `{}`, `["a"]`, 0))
		synctest.Wait()
		start := time.Now()
		s.Close()
		if d := time.Since(start); d != 0 {
			t.Errorf("Close took %v, want no time", d)
		}
		s.Observe(result("s", 1, 2, "read_item", `{"name":"a"}`, "a", 0))
		synctest.Wait()
		if len(o.all()) != 0 || s.Stats().Failures != 0 || len(srv.received()) != 1 {
			t.Errorf("after Close: offers %v, stats %+v, %d requests", o.all(), s.Stats(), len(srv.received()))
		}
	})
}

// TestUserMessageOpensWindow: a user message opens a window; another one
// before the agent's call does not ask again.
func TestUserMessageOpensWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := &scripted{reply: always(200, completion(5, tc{"list_items", `{"folder":"inbox"}`}), 0)}
		s, o, _ := newTest(t, inMemory{srv}, nil)
		s.Hear(message("u", 0, trace.RoleSystem, "You file things."))
		s.Hear(message("u", 0, trace.RoleUser, "What is in my inbox?"))
		s.Hear(message("u", 0, trace.RoleUser, "Quickly please."))
		synctest.Wait()
		if n := len(srv.received()); n != 1 {
			t.Errorf("%d requests, want 1", n)
		}
		if got := o.all(); len(got) != 1 || string(got[0].preds[0].Args) != `{"folder":"inbox"}` {
			t.Errorf("offers %+v, want list_items inbox", got)
		}
		if !strings.Contains(srv.received()[0].raw, "What is in my inbox?") {
			t.Error("the heard user message was not sent")
		}
	})
}

// attached is an engine a speculator is attached to: it keeps the offers
// and answers the conversation.
type attached struct {
	offers chan []predict.Prediction
	conv   []trace.Event
}

func (a *attached) Offer(_ string, _ int, p []predict.Prediction) bool { a.offers <- p; return true }
func (a *attached) Conversation(string) []trace.Event                  { return a.conv }

// TestAttach: an engine attached after the speculator is built (as one
// whose predictor includes it) receives its guesses, and its conversation
// is what the model is asked with.
func TestAttach(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := &scripted{reply: always(200, completion(10, tc{"read_item", `{"name":"a"}`}), 0)}
		s, o, _ := newTest(t, inMemory{srv}, nil)
		eng := &attached{offers: make(chan []predict.Prediction, 1),
			conv: []trace.Event{message("a", 0, trace.RoleUser, "Read the attached file.")}}
		s.Attach(eng)
		s.Observe(result("a", 0, 1, "list_items", `{}`, `["a"]`, 0))
		synctest.Wait()
		select {
		case p := <-eng.offers:
			if len(p) != 1 || p[0].Tool != "read_item" {
				t.Errorf("offered %v, want the read_item guess", p)
			}
		default:
			t.Fatal("the attached engine was offered nothing")
		}
		if n := len(o.all()); n != 0 {
			t.Errorf("Options.Offer got %d offers beside the attached engine, want none", n)
		}
		reqs := srv.received()
		if len(reqs) != 1 || !strings.Contains(reqs[0].raw, "Read the attached file.") {
			t.Errorf("the request did not carry the attached engine's conversation")
		}
	})
}
