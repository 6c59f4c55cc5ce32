package httpapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ahead-dev/ahead/backend/remote"
	"github.com/ahead-dev/ahead/engine"
	"github.com/ahead-dev/ahead/httpapi"
	"github.com/ahead-dev/ahead/policy"
	"github.com/ahead-dev/ahead/predict"
	"github.com/ahead-dev/ahead/trace"
)

// toolServer is a real HTTP tool server on loopback: POST /tools/{tool}
// with the arguments as the body. search returns JSON results, fetch a text
// page. It counts executions per call.
type toolServer struct {
	*httptest.Server
	mu   sync.Mutex // protects runs
	runs map[string]int
}

func newToolServer(t testing.TB) *toolServer {
	ts := &toolServer{runs: make(map[string]int)}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /tools/{tool}", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		tool := r.PathValue("tool")
		ts.mu.Lock()
		ts.runs[tool+string(body)]++
		ts.mu.Unlock()
		var args map[string]string
		json.Unmarshal(body, &args)
		switch tool {
		case "search":
			fmt.Fprintf(w, `{"results": [{"url": "https://%s.example/1"}, {"url": "https://%s.example/2"}]}`, args["q"], args["q"])
		case "fetch":
			fmt.Fprintf(w, "<html>page at %s</html>", args["url"])
		case "echo":
			w.Write(body)
		default:
			http.Error(w, "no such tool", http.StatusNotFound)
		}
	})
	ts.Server = httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	return ts
}

func (ts *toolServer) count(call string) int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.runs[call]
}

// searchThenFetch predicts, after a search, a fetch of its first result.
var searchThenFetch = predict.Func(func(ev trace.Event) []predict.Prediction {
	if ev.Tool != "search" || ev.Status != trace.StatusOK {
		return nil
	}
	var out struct {
		Results []struct {
			URL string `json:"url"`
		} `json:"results"`
	}
	if json.Unmarshal([]byte(ev.Output), &out) != nil || len(out.Results) == 0 {
		return nil
	}
	args, _ := json.Marshal(map[string]string{"url": out.Results[0].URL})
	return []predict.Prediction{{Tool: "fetch", Args: args, P: 0.9}}
})

type callAnswer struct {
	Tool    string          `json:"tool"`
	Status  string          `json:"status"`
	Output  json.RawMessage `json:"output"`
	Source  string          `json:"source"`
	SavedMS float64         `json:"saved_ms"`
	Error   string          `json:"error"`
}

func post(t *testing.T, c *http.Client, url, body string) (int, callAnswer) {
	t.Helper()
	resp, err := c.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var a callAnswer
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	return resp.StatusCode, a
}

func get(t *testing.T, c *http.Client, url string) string {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	return string(b)
}

// waitFor polls cond, for conditions only a real network can bring about
// (synctest cannot run real sockets); it fails the test after 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestEndToEnd runs the whole path on loopback: an agent's HTTP calls
// through the API, the engine with a predictor and a policy, the HTTP
// backend, a real tool server. A predicted fetch runs speculatively and is
// reused by the agent's fetch, in its session only.
func TestEndToEnd(t *testing.T) {
	tools := newToolServer(t)
	rb, err := remote.New(tools.URL+"/tools/{tool}", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rb.Close()
	reg := prometheus.NewRegistry()
	eng := engine.New(&engine.Options{
		Backends: map[string]engine.Backend{"web": {Backend: rb}},
		Policy: &policy.Policy{Tools: map[string]policy.Tool{
			"search": {Allow: true},
			"fetch":  {Allow: true, Reads: policy.Refs("url")},
		}},
		Predictor:  searchThenFetch,
		Registerer: reg,
	})
	defer eng.Close()
	api := httptest.NewServer(httpapi.New(eng, &httpapi.Options{Gatherer: reg, Logger: quiet}))
	defer api.Close()
	c := api.Client()

	code, a := post(t, c, api.URL+"/v1/sessions/agent-1/calls", `{"tool": "search", "args": {"q": "go"}}`)
	if code != 200 || a.Source != "executed" || a.Status != "ok" {
		t.Fatalf("search: %d %+v", code, a)
	}
	if got, want := string(a.Output), `{"results":[{"url":"https://go.example/1"},{"url":"https://go.example/2"}]}`; got != want {
		t.Errorf("search output = %s, want %s", got, want)
	}
	// The speculative fetch holds its result once it is done.
	waitFor(t, "the speculative fetch to complete", func() bool {
		var st struct{ Ready int }
		json.Unmarshal([]byte(get(t, c, api.URL+"/v1/stats")), &st)
		return st.Ready > 0
	})
	fetch := `{"tool": "fetch", "args": {"url": "https://go.example/1"}}`
	code, a = post(t, c, api.URL+"/v1/sessions/agent-1/calls", fetch)
	if code != 200 || a.Source != "reused" || a.SavedMS <= 0 {
		t.Fatalf("fetch: %d %+v, want reused with time saved", code, a)
	}
	if got, want := string(a.Output), `"<html>page at https://go.example/1</html>"`; got != want {
		t.Errorf("fetch output = %s, want the page as a JSON string %s", got, want)
	}
	if n := tools.count(`fetch{"url":"https://go.example/1"}`); n != 1 {
		t.Errorf("the tool server ran the fetch %d times, want 1 (speculatively)", n)
	}

	// Another session never sees agent-1's speculative result.
	code, a = post(t, c, api.URL+"/v1/sessions/agent-2/calls", fetch)
	if code != 200 || a.Source != "executed" {
		t.Errorf("fetch in another session: %d %+v, want executed", code, a)
	}
	// A tool the server does not have is the tool's own failure (the
	// backend's 404 is an error result), not the API's 404.
	code, a = post(t, c, api.URL+"/v1/sessions/agent-1/calls", `{"tool": "nope"}`)
	if code != 200 || a.Status != "error" || !strings.Contains(string(a.Output), "404") {
		t.Errorf("tool failing on the server: %d %+v, want 200 with status error", code, a)
	}

	metrics := get(t, c, api.URL+"/metrics")
	for _, want := range []string{
		`ahead_calls_total{source="reused",tool="fetch"} 1`,
		`ahead_calls_total{source="executed",tool="fetch"} 1`,
		`ahead_calls_total{source="executed",tool="search"} 1`,
		`ahead_speculative_outcomes_total{outcome="reused",tool="fetch"} 1`,
		`ahead_speculative_started_total{tool="fetch"} 1`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if testing.Verbose() {
		var b bytes.Buffer
		json.Indent(&b, []byte(get(t, c, api.URL+"/v1/stats")), "", "  ")
		t.Logf("stats: %s", b.String())
	}
}

// searchFirst predicts every session's first call: a search for "go".
type searchFirst struct{ predict.Predictor }

func (searchFirst) Start(string) []predict.Prediction {
	return []predict.Prediction{{Tool: "search", Args: json.RawMessage(`{"q":"go"}`), P: 0.9}}
}

// TestBeginSession checks POST /v1/sessions/{session}: the session's first
// call is speculated before it arrives.
func TestBeginSession(t *testing.T) {
	tools := newToolServer(t)
	rb, err := remote.New(tools.URL+"/tools/{tool}", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rb.Close()
	eng := engine.New(&engine.Options{
		Backends:  map[string]engine.Backend{"web": {Backend: rb}},
		Policy:    &policy.Policy{Tools: map[string]policy.Tool{"search": {Allow: true}}},
		Predictor: searchFirst{searchThenFetch},
	})
	defer eng.Close()
	api := httptest.NewServer(httpapi.New(eng, &httpapi.Options{Logger: quiet}))
	defer api.Close()
	c := api.Client()
	resp, err := c.Post(api.URL+"/v1/sessions/agent-1", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("POST /v1/sessions/agent-1: %d, want 204", resp.StatusCode)
	}
	waitFor(t, "the speculative search to run", func() bool { return tools.count(`search{"q":"go"}`) == 1 })
	code, a := post(t, c, api.URL+"/v1/sessions/agent-1/calls", `{"tool": "search", "args": {"q": "go"}}`)
	if code != 200 || (a.Source != "reused" && a.Source != "promoted") {
		t.Errorf("first call after begin: %d %+v, want reused or promoted", code, a)
	}
	if n := tools.count(`search{"q":"go"}`); n != 1 {
		t.Errorf("search ran %d times, want once", n)
	}
}

// searchWhatIsSaid hears "search X" and predicts search{"q": X}.
type searchWhatIsSaid struct{ predict.Func }

func (searchWhatIsSaid) Hear(msg trace.Event) []predict.Prediction {
	q, ok := strings.CutPrefix(msg.Content, "search ")
	if !ok {
		return nil
	}
	args, _ := json.Marshal(map[string]string{"q": q})
	return []predict.Prediction{{Tool: "search", Args: args, P: 0.9, Origin: predict.OriginMessage}}
}

// TestMessages checks POST /v1/sessions/{session}/messages: a user message
// speculates the session's first call, which the agent's call then claims;
// bad messages get 400 or 413 with a JSON error.
func TestMessages(t *testing.T) {
	tools := newToolServer(t)
	rb, err := remote.New(tools.URL+"/tools/{tool}", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rb.Close()
	eng := engine.New(&engine.Options{
		Backends:  map[string]engine.Backend{"web": {Backend: rb}},
		Policy:    &policy.Policy{Tools: map[string]policy.Tool{"search": {Allow: true}}},
		Predictor: searchWhatIsSaid{searchThenFetch},
	})
	defer eng.Close()
	api := httptest.NewServer(httpapi.New(eng, &httpapi.Options{Logger: quiet, MaxBodyBytes: 1024}))
	defer api.Close()
	c := api.Client()
	for _, tc := range []struct {
		body string
		code int
		err  string
	}{
		{`{"role": "user", "content": "search gophers"}`, 204, ""},
		{`{"role": "tool", "content": "x"}`, 400, `role "tool"`},
		{`{"role": "user"}`, 400, `"content" is missing`},
		{`{"content": "x"}`, 400, `"role" is missing`},
		{`{"role": "user", "content": "x", "name": "bob"}`, 400, `unknown field "name"`},
		{`{"role": "user", "content": "x"} {}`, 400, "more than one"},
		{`not json`, 400, "decoding message"},
		{`{"role": "user", "content": "` + strings.Repeat("x", 2000) + `"}`, 413, "larger than the limit"},
	} {
		resp, err := c.Post(api.URL+"/v1/sessions/agent-1/messages", "application/json", strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var e struct{ Error string }
		if tc.code != 204 && json.Unmarshal(body, &e) != nil {
			t.Errorf("%.60s: error body %q is not JSON", tc.body, body)
		}
		if resp.StatusCode != tc.code || !strings.Contains(e.Error, tc.err) {
			t.Errorf("%.60s: %d %s, want %d with %q", tc.body, resp.StatusCode, body, tc.code, tc.err)
		}
	}
	waitFor(t, "the speculative search to run", func() bool { return tools.count(`search{"q":"gophers"}`) == 1 })
	code, a := post(t, c, api.URL+"/v1/sessions/agent-1/calls", `{"tool": "search", "args": {"q": "gophers"}}`)
	if code != 200 || (a.Source != "reused" && a.Source != "promoted") {
		t.Errorf("first call after the message: %d %+v, want reused or promoted", code, a)
	}
	if n := tools.count(`search{"q":"gophers"}`); n != 1 {
		t.Errorf("search ran %d times, want once", n)
	}
}
