package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ahead-dev/ahead/backend"
	"github.com/ahead-dev/ahead/backend/remote"
	"github.com/ahead-dev/ahead/engine"
	"github.com/ahead-dev/ahead/httpapi"
)

// BenchmarkHandler measures what the API adds in process, without any
// network: decoding the request, the engine's authoritative miss on an
// instant backend, and encoding the answer.
func BenchmarkHandler(b *testing.B) {
	eng := engine.New(&engine.Options{Backends: map[string]engine.Backend{"b": {Backend: backend.Funcs{
		"read": func(ctx context.Context, args json.RawMessage) (string, error) {
			return `{"content": "hello", "lines": 1}`, nil
		},
	}}}})
	defer eng.Close()
	h := httpapi.New(eng, &httpapi.Options{Logger: quiet})
	const body = `{"tool": "read", "args": {"path": "/src/main.go", "offset": 0, "limit": 200}}`
	b.ReportAllocs()
	for b.Loop() {
		req := httptest.NewRequest("POST", "/v1/sessions/s/calls", strings.NewReader(body))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != 200 {
			b.Fatalf("code %d: %s", rec.Code, rec.Body)
		}
	}
}

// BenchmarkAddedLatency measures issue 2's §10 figure: the latency ahead's
// HTTP API adds to a tool call, against calling the tool server directly,
// both on loopback. Each iteration makes one direct call and one through
// ahead (API → engine → HTTP backend → the same tool server), alternating
// which goes first, so both see the same machine load. It reports the
// percentiles of each path and the added latency (ahead minus direct) at
// p50 and p99, in microseconds; ns/op is the time of both calls together.
// Every call is a miss (distinct arguments, no predictor): the path a real
// call takes when speculation did not help.
func BenchmarkAddedLatency(b *testing.B) {
	tools := newToolServer(b)
	rb, err := remote.New(tools.URL+"/tools/{tool}", nil)
	if err != nil {
		b.Fatal(err)
	}
	defer rb.Close()
	eng := engine.New(&engine.Options{Backends: map[string]engine.Backend{"web": {Backend: rb}}})
	defer eng.Close()
	api := httptest.NewServer(httpapi.New(eng, &httpapi.Options{Logger: quiet}))
	defer api.Close()

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	defer client.CloseIdleConnections()
	call := func(url, body string) time.Duration {
		start := time.Now()
		resp, err := client.Post(url, "application/json", strings.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		d := time.Since(start)
		if err != nil || resp.StatusCode != 200 {
			b.Fatalf("POST %s: %d %v", url, resp.StatusCode, err)
		}
		return d
	}
	direct := tools.URL + "/tools/echo"
	ahead := api.URL + "/v1/sessions/bench/calls"
	var dd, ad []time.Duration
	i := 0
	for b.Loop() {
		i++
		args := `{"path": "/src/main.go", "n": ` + itoa(i) + `}`
		wrapped := `{"tool": "echo", "args": ` + args + `}`
		if i%2 == 0 {
			dd = append(dd, call(direct, args))
			ad = append(ad, call(ahead, wrapped))
		} else {
			ad = append(ad, call(ahead, wrapped))
			dd = append(dd, call(direct, args))
		}
	}
	// The session grows with every call; drop it so the engine's state
	// does not leak into the next run of the benchmark.
	eng.EndSession("bench")
	slices.Sort(dd)
	slices.Sort(ad)
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	b.ReportMetric(us(pct(dd, 50)), "direct-p50-µs")
	b.ReportMetric(us(pct(dd, 99)), "direct-p99-µs")
	b.ReportMetric(us(pct(ad, 50)), "ahead-p50-µs")
	b.ReportMetric(us(pct(ad, 99)), "ahead-p99-µs")
	b.ReportMetric(us(pct(ad, 50)-pct(dd, 50)), "added-p50-µs")
	b.ReportMetric(us(pct(ad, 99)-pct(dd, 99)), "added-p99-µs")
}

// pct returns the p-th percentile of sorted durations (nearest rank).
func pct(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := (len(sorted)*p + 99) / 100
	return sorted[max(i-1, 0)]
}

func itoa(i int) string {
	b, _ := json.Marshal(i)
	return string(b)
}

// BenchmarkDecodeCall measures decoding a call request body alone: the
// part of BenchmarkHandler that is rawjson's scanner.
func BenchmarkDecodeCall(b *testing.B) {
	for _, body := range []string{
		`{"tool": "read", "args": {"path": "/src/main.go", "offset": 0, "limit": 200}}`,
		`{"args":{"command":"cd /testbed && grep -rn \"def canonical\" --include=*.py src/ | head -50\n"},"tool":"bash"}`,
	} {
		b.Run(strconv.Itoa(len(body)), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			data := []byte(body)
			for b.Loop() {
				if _, err := httpapi.DecodeCall(data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
