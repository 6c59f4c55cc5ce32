package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/ahead-dev/ahead/trace"
)

// linkModel is a scripted chat-completions upstream: a request is answered
// by the turn of its conversation told by how many tool results it returns,
// streamed, and held after the call until hold returns.
type linkModel struct {
	*httptest.Server
	turns []func() (head, tail string)
	hold  func()
}

func chatChunkLine(delta, finish string) string {
	f := "null"
	if finish != "" {
		f = `"` + finish + `"`
	}
	return `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":` + delta + `,"finish_reason":` + f + `}]}` + "\n\n"
}

// callTurn is a streamed turn whose model says text and calls tool with
// args under id; the head holds the complete call, the tail ends the turn.
func callTurn(text, id, tool, args string) (head, tail string) {
	head = chatChunkLine(`{"role":"assistant","content":`+fmt.Sprintf("%q", text)+`}`, "") +
		chatChunkLine(`{"tool_calls":[{"index":0,"id":"`+id+`","type":"function","function":{"name":"`+tool+`","arguments":""}}]}`, "") +
		chatChunkLine(`{"tool_calls":[{"index":0,"function":{"arguments":`+fmt.Sprintf("%q", args)+`}}]}`, "") +
		// A second call's start closes the first: it is complete.
		chatChunkLine(`{"tool_calls":[{"index":1,"id":"`+id+`x","type":"function","function":{"name":"note","arguments":""}}]}`, "")
	tail = chatChunkLine(`{"tool_calls":[{"index":1,"function":{"arguments":"{}"}}]}`, "") +
		chatChunkLine(`{}`, "tool_calls") + "data: [DONE]\n\n"
	return head, tail
}

func newLinkModel(t *testing.T, turns []func() (string, string), hold func()) *linkModel {
	m := &linkModel{turns: turns, hold: hold}
	m.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Header.Get("Ahead-Session") != "" {
			http.Error(w, "Ahead-Session reached the upstream", http.StatusBadRequest)
			return
		}
		i := strings.Count(string(body), `"tool_call_id"`)
		if i >= len(m.turns) {
			http.Error(w, "no turn for "+string(body), http.StatusBadRequest)
			return
		}
		head, tail := m.turns[i]()
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, head)
		w.(http.Flusher).Flush()
		m.hold()
		io.WriteString(w, tail)
	}))
	t.Cleanup(m.Close)
	return m
}

// startedTools returns a tool server that signals each run of tool, with
// its arguments, on the channel it returns.
func startedTools(t *testing.T, tool string) (*countingTools, chan string) {
	runs := make(chan string, 16)
	tools := newCountingTools(t, func(path string, body []byte) string {
		if path == "/tools/"+tool {
			runs <- string(body)
		}
		return fmt.Sprintf(`{"done": %q}`, path+string(body))
	})
	return tools, runs
}

// waitRun waits for the tool to run with want.
func waitRun(runs chan string, want string) error {
	select {
	case got := <-runs:
		if got != want {
			return fmt.Errorf("the tool ran with %s, want %s", got, want)
		}
		return nil
	case <-time.After(10 * time.Second): // a guard for a broken test, not a timing
		return fmt.Errorf("the tool never ran with %s", want)
	}
}

func writeLinkConfig(t *testing.T, modelURL, toolsURL string) (cfg, traces string) {
	dir := t.TempDir()
	cfg = filepath.Join(dir, "ahead.yaml")
	if err := os.WriteFile(cfg, []byte(`
llm: {openai: {base_url: "`+modelURL+`/v1"}}
traces: ./traces
backends: {svc: {http: {url: "`+toolsURL+`/tools/{tool}"}, tools: [lookup, note]}}
speculation_policy:
  tools:
    lookup: {allow: true, reads: id}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	return cfg, filepath.Join(dir, "traces")
}

// TestServeGatewayLinksWithoutSession: an agent on the openai-go SDK sends
// no Ahead-Session, and calls its tools through the HTTP API in a session
// of its own. The read its model emits starts while the model streams (in
// the gateway's own session), and the agent's call, arriving in its tool
// session, links the two: it is served by that read. The next turn is
// known by the result it returns and speaks in the tool session at once.
// The trace holds each call line once (the tool side's), and the calls the
// model emitted as lines of their own kind.
func TestServeGatewayLinksWithoutSession(t *testing.T) {
	tools, runs := startedTools(t, "lookup")
	release := make(chan struct{}, 2)
	model := newLinkModel(t, []func() (string, string){
		func() (string, string) { return callTurn("Looking.", "call_1", "lookup", `{"id": "42"}`) },
		func() (string, string) { return callTurn("And the next.", "call_2", "lookup", `{"id":"43"}`) },
	}, func() {
		select {
		case <-release: // the read ran while the model still streams
		case <-time.After(10 * time.Second): // a guard for a broken test, not a timing
		}
	})
	cfg, traces := writeLinkConfig(t, model.URL, tools.URL)
	s := startAheadServe(t, "--config", cfg, "--listen", "127.0.0.1:0")

	client := openai.NewClient(option.WithBaseURL(s.url+"/v1"), option.WithAPIKey("sk-agent"), option.WithMaxRetries(0))
	params := openai.ChatCompletionNewParams{
		Model:    "m",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("find record 42")},
	}
	turn := func(want string) openai.ChatCompletionMessage {
		t.Helper()
		done := make(chan struct{})
		go func() { // owned: waited for below
			defer close(done)
			if err := waitRun(runs, want); err != nil {
				t.Error(err)
			}
			release <- struct{}{}
		}()
		stream := client.Chat.Completions.NewStreaming(t.Context(), params)
		var acc openai.ChatCompletionAccumulator
		for stream.Next() {
			acc.AddChunk(stream.Current())
		}
		<-done
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		return acc.Choices[0].Message
	}

	msg := turn(`{"id":"42"}`)
	a := call(t, s.url, "agent-tools", `{"tool": "lookup", "args": {"id": "42"}}`)
	if a.Code != 200 || (a.Source != "reused" && a.Source != "promoted") {
		t.Fatalf("the agent's first read: %d %s, want served by the read its model's stream started", a.Code, a.Source)
	}
	params.Messages = append(params.Messages, msg.ToParam(), openai.ToolMessage(string(a.Output), "call_1"))
	turn(`{"id":"43"}`)
	b := call(t, s.url, "agent-tools", `{"tool": "lookup", "args": {"id": "43"}}`)
	if b.Code != 200 || (b.Source != "reused" && b.Source != "promoted") {
		t.Errorf("the agent's second read: %d %s, want served by the stream's", b.Code, b.Source)
	}
	if n, m := tools.count(`/tools/lookup{"id":"42"}`), tools.count(`/tools/lookup{"id":"43"}`); n != 1 || m != 1 {
		t.Errorf("lookup ran %d and %d times, want once each", n, m)
	}
	s.cancel()
	if code := <-s.code; code != 0 {
		t.Fatalf("exit code %d; log:\n%s", code, s.logText())
	}
	s.code <- 0

	var got []string
	for ev, err := range trace.NewReader(nil).Events(traces) {
		if err != nil {
			t.Fatal(err)
		}
		session := ev.Session
		if strings.HasPrefix(session, "llm-") {
			session = "llm-*"
		}
		switch {
		case ev.IsMessage():
			got = append(got, session+" message "+ev.Role+": "+ev.Content)
		case ev.Kind == trace.KindSpeculative:
		default:
			got = append(got, session+" "+ev.Kind+" "+ev.Tool+string(ev.Args)+" "+ev.CallID)
		}
	}
	slices.Sort(got)
	want := []string{
		// The first turn was heard before the link, in the gateway's own
		// session, and recorded again in the tool session when the call
		// linked them; from the call on, all is the tool session's.
		`agent-tools  lookup{"id":"42"} `,
		`agent-tools  lookup{"id":"43"} `,
		"agent-tools emitted lookup{\"id\":\"43\"} call_2",
		"agent-tools emitted note{} call_2x",
		"agent-tools message assistant: Looking.",
		"agent-tools message user: find record 42", // again, as the link folded it in
		"llm-* emitted lookup{\"id\":\"42\"} call_1",
		"llm-* emitted note{} call_1x",
		"llm-* message user: find record 42",
	}
	if d := cmpLines(want, got); d != "" {
		t.Errorf("trace lines:\n%s", d)
	}
}

// TestServeGatewayAmbiguousNoLink: two conversations without Ahead-Session
// whose models emit the same call; the agent's call could belong to either,
// so it links neither and is executed, never served by another session's
// work.
func TestServeGatewayAmbiguousNoLink(t *testing.T) {
	tools, runs := startedTools(t, "lookup")
	bothRan := make(chan struct{})
	model := newLinkModel(t, []func() (string, string){
		func() (string, string) { return callTurn("Looking.", "call_1", "lookup", `{"id":"7"}`) },
	}, func() {
		select {
		case <-bothRan:
		case <-time.After(10 * time.Second): // a guard for a broken test, not a timing
		}
	})
	cfg, _ := writeLinkConfig(t, model.URL, tools.URL)
	s := startAheadServe(t, "--config", cfg, "--listen", "127.0.0.1:0")

	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			client := openai.NewClient(option.WithBaseURL(s.url+"/v1"), option.WithAPIKey("sk-agent"), option.WithMaxRetries(0))
			stream := client.Chat.Completions.NewStreaming(t.Context(), openai.ChatCompletionNewParams{
				Model: "m", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("find record 7")}})
			for stream.Next() {
			}
			if err := stream.Err(); err != nil {
				t.Error(err)
			}
		})
	}
	// Both sessions speculated the read (each in its own session), so both
	// remembered the call.
	for range 2 {
		if err := waitRun(runs, `{"id":"7"}`); err != nil {
			t.Fatal(err)
		}
	}
	close(bothRan)
	wg.Wait()
	a := call(t, s.url, "agent-tools", `{"tool": "lookup", "args": {"id": "7"}}`)
	if a.Code != 200 || a.Source != "executed" {
		t.Errorf("the agent's read: %d %s, want executed (no link on ambiguous evidence)", a.Code, a.Source)
	}
	if n := tools.count(`/tools/lookup{"id":"7"}`); n != 3 {
		t.Errorf("lookup ran %d times, want 3 (two speculative, one the agent's)", n)
	}
}

// cmpLines lists the lines missing from got and those not wanted.
func cmpLines(want, got []string) string {
	var b strings.Builder
	for _, w := range want {
		if !slices.Contains(got, w) {
			fmt.Fprintf(&b, "missing: %s\n", w)
		}
	}
	for _, g := range got {
		if !slices.Contains(want, g) {
			fmt.Fprintf(&b, "unexpected: %s\n", g)
		}
	}
	return b.String()
}

// TestServeGatewayLinksMCPSession: the same without a header, with the
// tools behind ahead serve's /mcp (as Claude Code uses it). An MCP upstream
// connection belongs to its MCP session, so the read the first turn's
// stream offers in the gateway's own session cannot run; the agent's call
// links the conversation to the MCP session all the same, and the next
// turn's read starts there, mid-stream, and serves the agent's call.
func TestServeGatewayLinksMCPSession(t *testing.T) {
	upstream, _ := fakeMCP(t)
	model := newLinkModel(t, []func() (string, string){
		func() (string, string) {
			return callTurn("Reading.", "toolu_1", "read_text_file", `{"path":"/home/me/app/README.md"}`)
		},
		func() (string, string) {
			return callTurn("And the other.", "toolu_2", "read_text_file", `{"path":"/home/me/lib/README.md"}`)
		},
	}, func() {})
	dir := t.TempDir()
	cfg := filepath.Join(dir, "ahead.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("llm: {openai: {base_url: %q}}\nmcpServers: {fs: {command: %q}}\ntrust_annotations: true\n",
		model.URL+"/v1", upstream[0])), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startAheadServe(t, "--config", cfg, "--listen", "127.0.0.1:0")
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil).
		Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: s.url + "/mcp"}, nil)
	if err != nil {
		t.Fatalf("connecting to /mcp: %v\n%s", err, s.logText())
	}
	defer cs.Close()

	client := openai.NewClient(option.WithBaseURL(s.url+"/v1"), option.WithAPIKey("sk-agent"), option.WithMaxRetries(0))
	params := openai.ChatCompletionNewParams{
		Model: "m", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("what do the READMEs say?")}}
	turn := func() openai.ChatCompletionMessage {
		t.Helper()
		stream := client.Chat.Completions.NewStreaming(t.Context(), params)
		var acc openai.ChatCompletionAccumulator
		for stream.Next() {
			acc.AddChunk(stream.Current())
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		return acc.Choices[0].Message
	}
	msg := turn()
	text, _ := callSource(t, cs, "read_text_file", map[string]any{"path": "/home/me/app/README.md"})
	params.Messages = append(params.Messages, msg.ToParam(), openai.ToolMessage(text, "toolu_1"))
	turn()
	defer func() {
		if t.Failed() {
			t.Logf("stats: %s\nlog:\n%s", getText(t, s.url+"/v1/stats"), s.logText())
		}
	}()
	waitFor(t, "the second stream's read to complete", func() bool {
		var st struct{ Entries, Ready int }
		json.Unmarshal([]byte(getText(t, s.url+"/v1/stats")), &st)
		return st.Entries > 0 && st.Ready == st.Entries
	})
	text, src := callSource(t, cs, "read_text_file", map[string]any{"path": "/home/me/lib/README.md"})
	if text != "# lib" || src != "reused" {
		t.Errorf("the second read over MCP = %q (%s), want # lib reused from the stream's read", text, src)
	}
}
