package mcpproxy

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestRunDirect: a 2026-07-28 request ahead answers itself (serveRun) gets
// the answer the SDK's stateless handler gives, status, content type and
// message alike; every request the direct path does not take (malformed,
// or needing the SDK) is left to the SDK's handler untouched.
func TestRunDirect(t *testing.T) {
	r := newRig(t, rigOptions{})
	front := httptest.NewServer(r.proxy.Handler())
	t.Cleanup(front.Close)
	sdk := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return r.proxy.runs },
		&mcp.StreamableHTTPOptions{Logger: slog.New(slog.DiscardHandler), Stateless: true}))
	t.Cleanup(sdk.Close)

	const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"sampling":{}},"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"}}`
	const noInfo = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	hdr := func(method, name string) http.Header {
		h := http.Header{}
		h.Set("Content-Type", "application/json")
		h.Set("Accept", "application/json, text/event-stream")
		h.Set("Mcp-Protocol-Version", newEraVersion)
		h.Set("Mcp-Method", method)
		if name != "" {
			h.Set("Mcp-Name", name)
		}
		return h
	}
	with := func(h http.Header, k, v string) http.Header {
		h = h.Clone()
		if v == "" {
			h.Del(k)
		} else {
			h.Set(k, v)
		}
		return h
	}
	readA := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read","arguments":{"name":"a.txt"},` + meta + `}}`
	for _, c := range []struct {
		name   string
		body   string
		header http.Header
		direct bool
	}{
		{"call", readA, hdr("tools/call", "read"), true},
		{"call in a named run", readA, with(hdr("tools/call", "read"), SessionHeader, "direct-run"), true},
		{"call, string id, no client info", `{"jsonrpc":"2.0","id":"x-1","method":"tools/call","params":{"name":"read","arguments":{"name":"a.txt"},` + noInfo + `}}`, hdr("tools/call", "read"), true},
		{"call without arguments", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"list",` + meta + `}}`, hdr("tools/call", "list"), true},
		{"call with bad arguments", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"read","arguments":{"name":5},` + meta + `}}`, hdr("tools/call", "read"), true},
		{"call of a missing file", `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"read","arguments":{"name":"nope"},` + meta + `}}`, hdr("tools/call", "read"), true},
		{"call with arguments not an object", `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"read","arguments":[1],` + meta + `}}`, hdr("tools/call", "read"), true},
		{"call of a tool no upstream has", `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"zzz",` + meta + `}}`, hdr("tools/call", "zzz"), true},
		{"list", `{"jsonrpc":"2.0","id":5,"method":"tools/list","params":{` + meta + `}}`, hdr("tools/list", ""), true},
		{"prompts", `{"jsonrpc":"2.0","id":10,"method":"prompts/list","params":{` + meta + `}}`, hdr("prompts/list", ""), true},
		{"prompt", `{"jsonrpc":"2.0","id":11,"method":"prompts/get","params":{"name":"greet","arguments":{"who":"ada"},` + meta + `}}`, hdr("prompts/get", "greet"), true},
		{"prompt no upstream has", `{"jsonrpc":"2.0","id":12,"method":"prompts/get","params":{"name":"nope",` + meta + `}}`, hdr("prompts/get", "nope"), true},
		{"resources", `{"jsonrpc":"2.0","id":13,"method":"resources/list","params":{` + meta + `}}`, hdr("resources/list", ""), true},
		{"resource templates", `{"jsonrpc":"2.0","id":14,"method":"resources/templates/list","params":{` + meta + `}}`, hdr("resources/templates/list", ""), true},
		{"resource", `{"jsonrpc":"2.0","id":15,"method":"resources/read","params":{"uri":"test://motd",` + meta + `}}`, hdr("resources/read", "test://motd"), true},
		{"resource of a template", `{"jsonrpc":"2.0","id":16,"method":"resources/read","params":{"uri":"test://files/a.txt",` + meta + `}}`, hdr("resources/read", "test://files/a.txt"), true},
		{"resource no upstream has", `{"jsonrpc":"2.0","id":17,"method":"resources/read","params":{"uri":"nope://x",` + meta + `}}`, hdr("resources/read", "nope://x"), true},
		{"list with a cursor", `{"jsonrpc":"2.0","id":6,"method":"tools/list","params":{"cursor":"c",` + meta + `}}`, hdr("tools/list", ""), true},

		{"Mcp-Name mismatch", readA, hdr("tools/call", "write"), false},
		{"no Mcp-Name", readA, hdr("tools/call", ""), false},
		{"Mcp-Method mismatch", readA, hdr("tools/list", "read"), false},
		{"no client capabilities", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read","arguments":{"name":"a.txt"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`, hdr("tools/call", "read"), false},
		{"null client info", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read","arguments":{"name":"a.txt"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":null}}}`, hdr("tools/call", "read"), false},
		{"_meta version differs", strings.Replace(readA, `"2026-07-28"`, `"2025-11-25"`, 1), hdr("tools/call", "read"), false},
		{"no _meta", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read","arguments":{"name":"a.txt"}}}`, hdr("tools/call", "read"), false},
		{"progress token", strings.Replace(readA, `"_meta":{`, `"_meta":{"progressToken":7,`, 1), hdr("tools/call", "read"), false},
		{"log level", strings.Replace(readA, `"_meta":{`, `"_meta":{"io.modelcontextprotocol/logLevel":"debug",`, 1), hdr("tools/call", "read"), false},
		{"input responses", strings.Replace(readA, `"name":"read"`, `"name":"read","requestState":"s"`, 1), hdr("tools/call", "read"), false},
		{"key in another case", strings.Replace(readA, `"name":"read"`, `"Name":"read"`, 1), hdr("tools/call", "read"), false},
		{"fractional id", strings.Replace(readA, `"id":1`, `"id":1.5`, 1), hdr("tools/call", "read"), false},
		{"notification", strings.Replace(readA, `"id":1,`, ``, 1), hdr("tools/call", "read"), false},
		{"batch", `[` + readA + `]`, hdr("tools/call", "read"), false},
		{"old JSON-RPC", strings.Replace(readA, `"2.0"`, `"1.0"`, 1), hdr("tools/call", "read"), false},
		{"another method", `{"jsonrpc":"2.0","id":7,"method":"server/discover","params":{` + meta + `}}`, hdr("server/discover", ""), false},
		{"prompt with an argument not a string", `{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"greet","arguments":{"who":1},` + meta + `}}`, hdr("prompts/get", "greet"), false},
		{"resource without Mcp-Name", `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"test://motd",` + meta + `}}`, hdr("resources/read", ""), false},
		{"not JSON", readA, with(hdr("tools/call", "read"), "Content-Type", "text/plain"), false},
		{"no stream accepted", readA, with(hdr("tools/call", "read"), "Accept", "application/json"), false},
		{"resumption", readA, with(hdr("tools/call", "read"), "Last-Event-ID", "x_1"), false},
		{"body too large", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read","arguments":{"name":"` + strings.Repeat("a", 5<<20) + `"},` + meta + `}}`, hdr("tools/call", "read"), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			req := httptest.NewRequestWithContext(t.Context(), "POST", "/", strings.NewReader(c.body))
			req.Header = c.header.Clone()
			if got := r.proxy.serveRun(rec, req); got != c.direct {
				t.Fatalf("served directly: %v, want %v", got, c.direct)
			}
			if !c.direct {
				// What was read is given back: the SDK reads it all.
				b, _ := io.ReadAll(req.Body)
				if string(b) != c.body {
					t.Fatalf("the body left for the SDK is %d bytes, want %d", len(b), len(c.body))
				}
			}
			got, want := post(t, front.URL, c.body, c.header), post(t, sdk.URL, c.body, c.header)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("through ahead:\n%+v\nthe SDK's handler:\n%+v", got, want)
			}
		})
	}
}

// answer is an HTTP response as a client reads it.
type answer struct {
	Status      int
	ContentType string
	Message     any // the JSON-RPC message, decoded; or the text of an HTTP error
}

func post(t *testing.T, url, body string, h http.Header) answer {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "POST", url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = h.Clone()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	a := answer{Status: resp.StatusCode, ContentType: resp.Header.Get("Content-Type")}
	if resp.StatusCode == http.StatusOK || strings.HasPrefix(a.ContentType, "application/json") {
		raw := responseOf(t, resp)
		var m any
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatalf("%v: %s", err, raw)
		}
		a.Message = m
	} else {
		b, _ := io.ReadAll(resp.Body)
		a.Message = string(b)
	}
	return a
}
