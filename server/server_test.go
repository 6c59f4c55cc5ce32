package server

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/ahead-dev/ahead/config"
)

// addrHandler hands the address Run announces to a test.
type addrHandler struct{ addr chan string }

func (h addrHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h addrHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h addrHandler) WithGroup(string) slog.Handler            { return h }
func (h addrHandler) Handle(_ context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "addr" {
			h.addr <- a.Value.String()
		}
		return true
	})
	return nil
}

// TestRun serves a configuration with a token, answers a call through the
// tool API, refuses a request without the token, and shuts down cleanly
// with the summary when its context ends.
func TestRun(t *testing.T) {
	tools := newTools(t)
	cfg, err := (&config.Loader{Dir: t.TempDir()}).Parse("a.yaml", []byte(`
listen: 127.0.0.1:0
backends: {web: {http: {url: "`+tools.URL+`/tools/{tool}"}}}
`))
	if err != nil {
		t.Fatal(err)
	}
	cfg.AuthToken = "s3cret"
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	addr := make(chan string, 1)
	var summary bytes.Buffer
	done := make(chan error, 1)
	go func() { // owned: joined below
		done <- Run(ctx, cfg, &Options{Logger: slog.New(addrHandler{addr}), Summary: &summary})
	}()
	var url string
	select {
	case url = <-addr:
	case err := <-done:
		t.Fatalf("Run returned before listening: %v", err)
	}

	post := func(token string) (int, string) {
		req, _ := http.NewRequest("POST", url+"/v1/sessions/s/calls", strings.NewReader(`{"tool": "read", "args": {"x": "1"}}`))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := post(""); code != http.StatusUnauthorized {
		t.Errorf("without the token: %d %s, want 401", code, body)
	}
	if code, body := post("s3cret"); code != http.StatusOK || !strings.Contains(body, `"source":"executed"`) {
		t.Errorf("with the token: %d %s, want 200 and an executed call", code, body)
	}
	if got := tools.ran(); len(got) != 1 || got[0] != `read{"x":"1"}` {
		t.Errorf("the backend ran %q, want the one call", got)
	}

	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run after its context ended: %v, want nil (a clean shutdown)", err)
	}
	if !strings.Contains(summary.String(), "1 tool call") {
		t.Errorf("summary %q does not count the call", summary.String())
	}
}

// TestServedURLs checks the URLs ahead serve announces at start (issue
// 27): the tool API always, /mcp only with MCP servers, and the gateway's
// base URL of each configured model API only.
func TestServedURLs(t *testing.T) {
	base := "http://127.0.0.1:7777"
	for _, tc := range []struct {
		name string
		cfg  config.Config
		mcp  bool
		want []string
	}{
		{"api only", config.Config{}, false, []string{base + "/v1"}},
		{"mcp", config.Config{}, true, []string{base + "/v1", base + "/mcp"}},
		{"anthropic only", config.Config{LLM: &config.LLM{Anthropic: "https://api.anthropic.com"}}, false, []string{base + "/v1", base}},
		{"both", config.Config{LLM: &config.LLM{OpenAI: "https://api.openai.com/v1", Anthropic: "https://api.anthropic.com"}}, true,
			[]string{base + "/v1", base + "/mcp", base + "/v1", base}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			var text strings.Builder
			for _, u := range servedURLs(base, &tc.cfg, tc.mcp) {
				got = append(got, u.url)
				text.WriteString(u.what + " ")
			}
			if strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Errorf("URLs %q, want %q", got, tc.want)
			}
			if tc.cfg.LLM != nil && tc.cfg.LLM.OpenAI == "" && strings.Contains(text.String(), "OpenAI") {
				t.Errorf("OpenAI announced without an openai upstream: %s", text.String())
			}
		})
	}
}
