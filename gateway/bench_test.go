package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ahead-dev/ahead/backend"
	"github.com/ahead-dev/ahead/callkey"
	"github.com/ahead-dev/ahead/engine"
	"github.com/ahead-dev/ahead/policy"
	"github.com/ahead-dev/ahead/predict"
)

// The benchmarks measure what the gateway adds on loopback, each beside a
// direct connection to the same upstream: time to the first body byte of a
// streamed chat completion, and the latency of one streamed event. Both
// report p50 and p99 (ns) besides ns/op. Run:
//
//	go test -run '^$' -bench . -benchtime 2000x ./gateway/

type nopEngine struct{}

func (nopEngine) Message(context.Context, string, string, string) error { return nil }
func (nopEngine) Offer(string, int, []predict.Prediction) bool          { return true }
func (nopEngine) ThinkTime(string, time.Duration)                       {}
func (nopEngine) NextSeq(string) int                                    { return 0 }
func (nopEngine) Join(string, string)                                   {}
func (nopEngine) Resolve(s string) string                               { return s }

const benchRequest = `{"model":"gpt-test","stream":true,"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Copy a.txt to b.txt."}]}`

var benchEvent = chatChunk(map[string]any{"content": "Let me look at that file for you."}, nil).write

// benchTargets returns the base URLs of the upstream, direct and through
// a gateway (with an engine, so requests are heard and responses parsed).
func benchTargets(b *testing.B, h http.HandlerFunc) map[string]string {
	up := httptest.NewServer(h)
	b.Cleanup(up.Close)
	g, err := New(&Options{OpenAI: &Upstream{BaseURL: up.URL + "/v1"}, Engine: nopEngine{}})
	if err != nil {
		b.Fatal(err)
	}
	gw := httptest.NewServer(g.Handler())
	b.Cleanup(func() { gw.Close(); g.Close() })
	return map[string]string{"direct": up.URL, "gateway": gw.URL}
}

func reportPercentiles(b *testing.B, d []time.Duration) {
	if len(d) == 0 {
		return
	}
	slices.Sort(d)
	b.ReportMetric(float64(d[len(d)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(d[len(d)*99/100].Nanoseconds()), "p99-ns")
}

func post(b *testing.B, client *http.Client, url string) *http.Response {
	req, err := http.NewRequest("POST", url+"/v1/chat/completions", bytes.NewReader([]byte(benchRequest)))
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(SessionHeader, "bench")
	res, err := client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	return res
}

func BenchmarkFirstByte(b *testing.B) {
	targets := benchTargets(b, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, benchEvent)
		w.(http.Flusher).Flush()
		io.WriteString(w, "data: [DONE]\n\n")
	})
	for _, name := range []string{"direct", "gateway"} {
		b.Run(name, func(b *testing.B) {
			client := &http.Client{Transport: &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 4}}
			defer client.CloseIdleConnections()
			var lat []time.Duration
			one := make([]byte, 1)
			b.ReportAllocs()
			for b.Loop() {
				start := time.Now()
				res := post(b, client, targets[name])
				if _, err := io.ReadFull(res.Body, one); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
				io.Copy(io.Discard, res.Body)
				res.Body.Close()
			}
			reportPercentiles(b, lat)
		})
	}
}

func BenchmarkStreamEvent(b *testing.B) {
	next := make(chan struct{})
	targets := benchTargets(b, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		for {
			select {
			case _, ok := <-next:
				if !ok {
					return
				}
			case <-r.Context().Done():
				return
			}
			io.WriteString(w, benchEvent)
			w.(http.Flusher).Flush()
		}
	})
	for _, name := range []string{"direct", "gateway"} {
		b.Run(name, func(b *testing.B) {
			client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
			defer client.CloseIdleConnections()
			res := post(b, client, targets[name])
			defer res.Body.Close()
			br := bufio.NewReader(res.Body)
			var lat []time.Duration
			b.ReportAllocs()
			for b.Loop() {
				start := time.Now()
				next <- struct{}{}
				for { // an event ends with a blank line
					line, err := br.ReadSlice('\n')
					if err != nil {
						b.Fatal(err)
					}
					if len(line) == 1 {
						break
					}
				}
				lat = append(lat, time.Since(start))
			}
			reportPercentiles(b, lat)
		})
	}
}

// BenchmarkRelayBytes relays bodies of two sizes through the gateway, on a
// route relayed unparsed and on a heard stream; what it allocates per
// request must not grow with the body (beyond the parser's own buffers on
// a heard stream, which grow to the largest backlog, not per byte):
//
//	go test -run '^$' -bench RelayBytes -benchtime 200x ./gateway/
func BenchmarkRelayBytes(b *testing.B) {
	for _, size := range []int{64 << 10, 4 << 20} {
		event := []byte(benchEvent)
		targets := benchTargets(b, func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "text/event-stream")
			for n := 0; n < size; n += len(event) {
				w.Write(event)
			}
		})
		for _, run := range []struct{ target, route string }{
			{"direct", "/v1/embeddings"}, {"gateway", "/v1/embeddings"}, {"gateway", "/v1/chat/completions"},
		} {
			route := run.route
			name := fmt.Sprintf("%s%s/%dKiB", run.target, strings.TrimPrefix(route, "/v1"), size>>10)
			b.Run(name, func(b *testing.B) {
				client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
				defer client.CloseIdleConnections()
				b.SetBytes(int64(size))
				b.ReportAllocs()
				for b.Loop() {
					req, _ := http.NewRequest("POST", targets[run.target]+route, strings.NewReader(benchRequest))
					req.Header.Set(SessionHeader, "bench")
					res, err := client.Do(req)
					if err != nil {
						b.Fatal(err)
					}
					io.Copy(io.Discard, res.Body)
					res.Body.Close()
				}
			})
		}
	}
}

// BenchmarkStreamTimeWait measures the agent's wait for a safe tool whose
// call completed mid-stream, through the gateway and a real engine: the
// model streams the call, then streams on for rest; the agent calls the
// tool when the stream ends. The tool takes latency. Reported: the wait
// over the latency (target ≤ 0.35) and the bound of ISSUE-NOTES,
// (max(0, latency − rest) + 10 ms) / latency.
//
//	go test -run '^$' -bench StreamTimeWait -benchtime 20x ./gateway/
func BenchmarkStreamTimeWait(b *testing.B) {
	const latency, rest = 100 * time.Millisecond, 75 * time.Millisecond
	eng := engine.New(&engine.Options{
		Backends: map[string]engine.Backend{"b": {Backend: backend.Funcs{
			"lookup": func(ctx context.Context, args json.RawMessage) (string, error) {
				select {
				case <-time.After(latency):
					return "found", nil
				case <-ctx.Done():
					return "", ctx.Err()
				}
			},
		}}},
		Policy:        &policy.Policy{Tools: map[string]policy.Tool{"lookup": {Allow: true, Reads: policy.Refs("id")}}},
		Amplification: -1,
	})
	defer eng.Close()
	var id atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		n := r.Header.Get("X-Call")
		io.WriteString(w, chatCallDelta(0, "call_"+n, "lookup", `{"id":"`+n+`"}`).write)
		io.WriteString(w, chatCallDelta(1, "call_x"+n, "lookup", "").write) // closes the first call
		w.(http.Flusher).Flush()
		time.Sleep(rest) // the model streams on
		io.WriteString(w, chatCallDelta(1, "", "", `{"id":"y`+n+`"}`).write)
		io.WriteString(w, "data: [DONE]\n\n")
	}))
	defer up.Close()
	g, err := New(&Options{OpenAI: &Upstream{BaseURL: up.URL + "/v1"}, Engine: eng})
	if err != nil {
		b.Fatal(err)
	}
	gw := httptest.NewServer(g.Handler())
	defer func() { gw.Close(); g.Close() }()
	client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	defer client.CloseIdleConnections()
	var waits []time.Duration
	for b.Loop() {
		n := fmt.Sprint(id.Add(1))
		req, _ := http.NewRequest("POST", gw.URL+"/v1/chat/completions", strings.NewReader(benchRequest))
		req.Header.Set(SessionHeader, "bench")
		req.Header.Set("X-Call", n)
		res, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		start := time.Now()
		r, err := eng.Call(b.Context(), "bench", "lookup", json.RawMessage(`{"id":"`+n+`"}`))
		if err != nil {
			b.Fatal(err)
		}
		if r.Source == engine.Executed {
			b.Fatalf("call %s executed: the stream's read did not serve it", n)
		}
		waits = append(waits, time.Since(start))
	}
	slices.Sort(waits)
	b.ReportMetric(float64(waits[len(waits)/2])/float64(latency), "wait/latency-p50")
	b.ReportMetric(float64(waits[len(waits)*99/100])/float64(latency), "wait/latency-p99")
	b.ReportMetric(float64(max(0, latency-rest)+10*time.Millisecond)/float64(latency), "bound/latency")
}

// BenchmarkLink is what the Linker adds to an agent's call on the tool
// side (engine.Linker, asked on every call): Link for a call no model
// emitted (it is kept for a late link), with arguments of the given size,
// the Linker full of remembered calls.
func BenchmarkLink(b *testing.B) {
	for _, size := range []int{100, 64 << 10} {
		b.Run(fmt.Sprintf("args=%dB", size), func(b *testing.B) {
			l := NewLinker(0)
			for i := range DefaultLinkerCalls {
				l.Remember(fmt.Sprintf("llm-%d", i%64), fmt.Sprintf("call_%d", i), "read", []byte(fmt.Sprintf(`{"id":%d}`, i)), time.Time{})
			}
			keys := make([]callkey.Key, 256)
			for i := range keys {
				args := fmt.Sprintf(`{"path":"/f/%d","text":%q}`, i, strings.Repeat("x", size))
				k, err := callkey.Make("write", []byte(args))
				if err != nil {
					b.Fatal(err)
				}
				keys[i] = k
			}
			i := 0
			for b.Loop() {
				l.Link("tools", keys[i%len(keys)])
				i++
			}
		})
	}
}
