package gateway

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

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
