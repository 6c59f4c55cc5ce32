package server

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ahead-dev/ahead/config"
)

// BenchmarkNormalClients measures a normal client's call through `ahead
// serve` (max_connections: 100, a new connection per call, the worst case)
// side by side: alone; beside 100 idle keep-alive connections, reopened as
// soon as one is closed (issue 23: they locked normal clients out); and
// beside 100 clients that asked for 8 MiB answers and read nothing (issue
// 23: they held 1 GiB until the write timeout). It reports the p50 and p99
// of the calls.
//
//	go test ./server -run '^$' -bench NormalClients -benchtime 400x
func BenchmarkNormalClients(b *testing.B) {
	big := strings.Repeat("x", 8<<20-4<<10)
	tools := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if strings.HasSuffix(r.URL.Path, "/big") {
			io.WriteString(w, big)
			return
		}
		io.WriteString(w, "ok")
	}))
	defer tools.Close()
	for _, load := range []string{"alone", "100 idle", "100 not reading"} {
		b.Run(load, func(b *testing.B) {
			cfg, err := (&config.Loader{Dir: b.TempDir()}).Parse("a.yaml", []byte(`
listen: 127.0.0.1:0
max_connections: 100
backends: {web: {http: {url: "`+tools.URL+`/tools/{tool}"}}}
`))
			if err != nil {
				b.Fatal(err)
			}
			u := startRun(b, cfg)
			addr := strings.TrimPrefix(u, "http://")
			var hostile sync.WaitGroup
			stop := make(chan struct{})
			defer func() { close(stop); hostile.Wait() }()
			switch load {
			case "100 idle":
				for range 100 {
					hostile.Go(func() { idleForever(b, addr, stop) })
				}
			case "100 not reading":
				for i := range 100 {
					c, err := net.Dial("tcp", addr)
					if err != nil {
						b.Fatal(err)
					}
					defer c.Close()
					body := fmt.Sprintf(`{"tool":"big","args":{"i":%d}}`, i)
					fmt.Fprintf(c, "POST /v1/sessions/r%d/calls HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", i, len(body), body)
				}
			}
			client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: time.Minute}
			var lat []time.Duration
			for b.Loop() {
				start := time.Now()
				resp, err := client.Post(u+"/v1/sessions/n/calls", "application/json", strings.NewReader(`{"tool":"read","args":{}}`))
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Fatalf("a normal call: %s", resp.Status)
				}
				lat = append(lat, time.Since(start))
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
		})
	}
}

// idleForever keeps a keep-alive connection idle, opening another as soon
// as the server closes it, until stop.
func idleForever(b *testing.B, addr string, stop <-chan struct{}) {
	for {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return
		}
		done := make(chan struct{})
		go func() { // owned: ends when c closes, joined below
			defer close(done)
			io.WriteString(c, "GET /v1/stats HTTP/1.1\r\nHost: x\r\n\r\n")
			io.Copy(io.Discard, c) // the answer, then EOF when the server closes c
		}()
		select {
		case <-done:
			c.Close()
		case <-stop:
			c.Close()
			<-done
			return
		}
	}
}
