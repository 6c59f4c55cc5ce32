package server

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"

	"github.com/ahead-dev/ahead/config"
	"github.com/ahead-dev/ahead/mine"
	"github.com/ahead-dev/ahead/trace"
)

// tools is an HTTP tool backend on loopback (POST /tools/{tool}): search
// returns two result URLs, every other tool its name and arguments. It
// counts the calls it runs.
type tools struct {
	*httptest.Server
	mu    sync.Mutex // protects calls
	calls []string   // tool+args, in order
}

func newTools(t *testing.T) *tools {
	ts := &tools{}
	ts.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		tool := filepath.Base(r.URL.Path)
		ts.mu.Lock()
		ts.calls = append(ts.calls, tool+string(body))
		ts.mu.Unlock()
		var args map[string]string
		json.Unmarshal(body, &args)
		if tool == "search" {
			fmt.Fprintf(w, `{"results": [{"url": "https://%s.example/1"}, {"url": "https://%s.example/2"}]}`, args["q"], args["q"])
			return
		}
		fmt.Fprintf(w, "%s %s", tool, body)
	}))
	t.Cleanup(ts.Close)
	return ts
}

func (ts *tools) ran() []string {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return append([]string(nil), ts.calls...)
}

// TestOpenRoutes checks the one router of a stack: a tool a backend lists
// goes there, any other to the backend without a list.
func TestOpenRoutes(t *testing.T) {
	listed, rest := newTools(t), newTools(t)
	cfg, err := (&config.Loader{Dir: t.TempDir()}).Parse("a.yaml", []byte(`
backends:
  rest: {http: {url: "`+rest.URL+`/tools/{tool}"}}
  listed:
    http: {url: "`+listed.URL+`/tools/{tool}"}
    tools: [read]
`))
	if err != nil {
		t.Fatal(err)
	}
	st, err := Open(t.Context(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, tool := range []string{"read", "write"} {
		res, err := st.Engine().Call(t.Context(), "s", tool, json.RawMessage(`{"x":"1"}`))
		if err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
		if want := tool + ` {"x":"1"}`; res.Output != want {
			t.Errorf("%s: output %q, want %q", tool, res.Output, want)
		}
	}
	if got := listed.ran(); len(got) != 1 || got[0] != `read{"x":"1"}` {
		t.Errorf("the listing backend ran %q, want only read", got)
	}
	if got := rest.ran(); len(got) != 1 || got[0] != `write{"x":"1"}` {
		t.Errorf("the catch-all backend ran %q, want only write", got)
	}
	if st.Patterns() != 0 {
		t.Errorf("Patterns() = %d without a pool, want 0", st.Patterns())
	}
}

// minePool writes a pattern pool mined from sessions in which every
// search is followed by a fetch of its first result.
func minePool(t *testing.T, path string) {
	var sessions []trace.Session
	for i := range 8 {
		q := fmt.Sprintf("topic%d", i)
		sessions = append(sessions, trace.Session{ID: q, Events: []trace.Event{
			{Session: q, Seq: 0, Tool: "search", Args: json.RawMessage(`{"q":"` + q + `"}`), Status: trace.StatusOK,
				Output: `{"results": [{"url": "https://` + q + `.example/1"}, {"url": "https://` + q + `.example/2"}]}`},
			{Session: q, Seq: 1, Tool: "fetch", Args: json.RawMessage(`{"url":"https://` + q + `.example/1"}`), Status: trace.StatusOK,
				Output: "page"},
		}})
	}
	pool, err := mine.Mine(sessions, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := pool.Save(path); err != nil {
		t.Fatal(err)
	}
}

// TestQuiesce checks that once a stack is quiesced (ahead serve's SIGTERM)
// the calls still finishing start no speculative work: nothing would claim
// it.
func TestQuiesce(t *testing.T) {
	tools := newTools(t)
	dir := t.TempDir()
	minePool(t, filepath.Join(dir, "pool.json"))
	cfg, err := (&config.Loader{Dir: dir}).Parse("a.yaml", []byte(`
patterns: {pool: ./pool.json, learn: false}
backends: {web: {http: {url: "`+tools.URL+`/tools/{tool}"}}}
speculation_policy: {tools: {fetch: {allow: true}}}
`))
	if err != nil {
		t.Fatal(err)
	}
	st, err := Open(t.Context(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if st.Patterns() == 0 {
		t.Fatal("the stack serves no patterns from the pool")
	}
	if _, err := st.Engine().Call(t.Context(), "a", "search", json.RawMessage(`{"q":"go"}`)); err != nil {
		t.Fatal(err)
	}
	if err := st.Engine().Predicted(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := st.Engine().Stats().Entries; n != 2 {
		t.Fatalf("before quiesce: %d speculative entries, want 2 (the fetches of both results)", n)
	}
	st.Quiesce()
	if _, err := st.Engine().Call(t.Context(), "b", "search", json.RawMessage(`{"q":"rust"}`)); err != nil {
		t.Fatal(err)
	}
	if err := st.Engine().Predicted(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := st.Engine().Stats().Entries; n > 1 {
		t.Errorf("after quiesce: %d speculative entries, want no new one", n)
	}
}
