package gateway

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// parse feeds a body to the API's parser in the given pieces and returns
// the calls it emitted, in order.
func parse(a api, stream bool, pieces ...[]byte) []string {
	var got []string
	emit := func(c toolCall) { got = append(got, c.String()) }
	var p callParser
	if stream {
		p = newStreamParser(a, emit)
	} else {
		p = &bodyParser{api: a, emit: emit}
	}
	for _, b := range pieces {
		if p.write(b) != nil {
			return append(got, "gave up")
		}
	}
	p.end()
	return got
}

// split cuts data at random byte boundaries chosen by seed.
func split(data []byte, seed uint64) [][]byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	var out [][]byte
	for len(data) > 0 {
		n := 1 + r.IntN(min(len(data), 1+r.IntN(64)))
		out = append(out, slices.Clone(data[:n]))
		data = data[n:]
	}
	return out
}

var fixtures = []struct {
	name   string
	api    api
	stream bool
	body   string
}{
	{"chat stream", apiChat, true, streamBytes(chatScript())},
	{"chat body", apiChat, false, chatBody},
	{"responses stream", apiResponses, true, streamBytes(responsesScript())},
	{"responses body", apiResponses, false, responsesBody},
	{"anthropic stream", apiMessages, true, streamBytes(anthropicScript())},
	{"anthropic body", apiMessages, false, anthropicBody},
}

func TestParsersFindCalls(t *testing.T) {
	for _, f := range fixtures {
		t.Run(f.name, func(t *testing.T) {
			if diff := cmp.Diff(wantCalls, parse(f.api, f.stream, []byte(f.body))); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
			for seed := range uint64(50) {
				if diff := cmp.Diff(wantCalls, parse(f.api, f.stream, split([]byte(f.body), seed)...)); diff != "" {
					t.Fatalf("split with seed %d: calls (-want +got):\n%s", seed, diff)
				}
			}
		})
	}
}

// TestCallCompleteMidStream checks that each call is emitted as soon as
// the event that completes it has been parsed, not at the stream's end.
func TestCallCompleteMidStream(t *testing.T) {
	for _, tc := range []struct {
		name   string
		api    api
		script []step
	}{
		{"chat", apiChat, chatScript()},
		{"responses", apiResponses, responsesScript()},
		{"anthropic", apiMessages, anthropicScript()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			p := newStreamParser(tc.api, func(c toolCall) { got = append(got, c.Name) })
			for i, s := range tc.script {
				if s.waitTool != "" {
					if len(got) == 0 || got[len(got)-1] != s.waitTool {
						t.Fatalf("at step %d: emitted %v, want %s emitted by now", i, got, s.waitTool)
					}
					continue
				}
				if err := p.write([]byte(s.write)); err != nil {
					t.Fatal(err)
				}
			}
			p.end()
			if len(got) != 2 {
				t.Errorf("emitted %v, want each call once", got)
			}
		})
	}
}

func TestSSEDecoder(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []string
	}{
		{"lf", "event: a\ndata: 1\n\ndata: 2\n\n", []string{"a:1", ":2"}},
		{"crlf", "data: 1\r\n\r\ndata:2\r\n\r\n", []string{":1", ":2"}},
		{"cr", "data: 1\r\rdata: 2\r\r", []string{":1", ":2"}},
		{"multi-line data", "data: a\ndata: b\n\n", []string{":a\nb"}},
		{"comment and no data", ": keep-alive\n\nevent: x\n\n", nil},
		{"unterminated dropped", "data: 1\n\ndata: 2\n", []string{":1"}},
		{"no space after colon", "data:x\n\n", []string{":x"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for seed := range uint64(20) {
				var got []string
				d := &sseDecoder{on: func(ev, data []byte) { got = append(got, string(ev)+":"+string(data)) }}
				for _, p := range split([]byte(tc.in), seed) {
					if err := d.write(p); err != nil {
						t.Fatal(err)
					}
				}
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Fatalf("seed %d: events (-want +got):\n%s", seed, diff)
				}
			}
		})
	}
}

func TestParserLimits(t *testing.T) {
	huge := "data: " + strings.Repeat("x", maxEvent+1) + "\n\n"
	if got := parse(apiChat, true, []byte(huge)); !slices.Equal(got, []string{"gave up"}) {
		t.Errorf("an event over maxEvent: got %v, want the parser to give up", got)
	}
	// A call whose arguments never parse is not offered; the others are.
	s := streamBytes([]step{
		chatCallDelta(0, "call_a", "read_file", `{"path":`),
		chatCallDelta(1, "call_b", "list_dir", `{}`),
		sse("", "[DONE]"),
	})
	if got := parse(apiChat, true, []byte(s)); !slices.Equal(got, []string{"list_dir{}"}) {
		t.Errorf("got %v, want only the call with whole arguments", got)
	}
}

// FuzzStreamChunking checks that the parsers never panic and that a stream
// split at arbitrary byte boundaries yields the same calls as the whole.
func FuzzStreamChunking(f *testing.F) {
	for i, fx := range fixtures {
		f.Add([]byte(fx.body), uint8(i), uint64(i))
	}
	f.Add([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":3,\"id\":\"x\",\"function\":{\"name\":\"t\",\"arguments\":\"{}\"}}]}}]}\r\n\r\n"), uint8(0), uint64(7))
	f.Fuzz(func(t *testing.T, body []byte, which uint8, seed uint64) {
		fx := fixtures[int(which)%len(fixtures)]
		whole := parse(fx.api, fx.stream, body)
		pieces := parse(fx.api, fx.stream, split(body, seed)...)
		if !slices.Equal(whole, pieces) {
			t.Errorf("whole: %v\nsplit: %v", whole, pieces)
		}
	})
}
