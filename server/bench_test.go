package server

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ahead-dev/ahead/config"
)

// BenchmarkNormalClients measures a normal client's call through `ahead
// serve` (max_connections: 100, a new connection per call, the worst case)
// side by side: alone; beside 100 idle keep-alive connections, reopened as
// soon as one is closed (issue 23: they locked normal clients out); beside
// 100 clients that ask for 8 MiB answers and read nothing, asking again on
// a new connection as soon as theirs is closed, so that they hold every
// slot they can all along (the steady state); and beside 100 such clients
// that ask once (issue 23: they held 1 GiB until the write timeout), where
// the 400 calls measure mostly the first seconds, while their answers are
// produced and cut (the transient). It reports the p50, p99 and max of
// the calls, how many idle connections were closed a call, and for the
// steady state how often the clients reading nothing asked.
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
	for _, load := range []string{"alone", "100 idle", "100 not reading", "100 not reading once"} {
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
			var asks atomic.Int64 // idle clients' connections made idle, requests of those reading nothing
			switch load {
			case "100 idle":
				for range 100 {
					hostile.Go(func() { idleForever(addr, &asks, stop) })
				}
				// Measured once all 100 are idle.
				for deadline := time.Now().Add(5 * time.Second); asks.Load() < 100 && time.Now().Before(deadline); {
					time.Sleep(10 * time.Millisecond)
				}
			case "100 not reading":
				for i := range 100 {
					hostile.Go(func() { readNothing(addr, i, &asks, stop) })
				}
				// Measured once every client has been cut and has asked
				// again at least once on average (or after 5 s).
				for deadline := time.Now().Add(5 * time.Second); asks.Load() < 200 && time.Now().Before(deadline); {
					time.Sleep(10 * time.Millisecond)
				}
			case "100 not reading once":
				for i := range 100 {
					c, err := net.Dial("tcp", addr)
					if err != nil {
						b.Fatal(err)
					}
					defer c.Close()
					askBig(c, i)
				}
			}
			client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: time.Minute}
			var lat []time.Duration
			asked, began := asks.Load(), time.Now()
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
			switch load {
			case "100 idle":
				// One per call: the idle connection closed for it.
				b.ReportMetric(float64(asks.Load()-asked)/float64(len(lat)), "reconnects/call")
			case "100 not reading":
				b.ReportMetric(float64(asks.Load()-asked)/time.Since(began).Seconds(), "hostile-asks/s")
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
			b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "max-ms")
		})
	}
}

// askBig sends on c a request for an 8 MiB answer.
func askBig(c net.Conn, i int) {
	body := fmt.Sprintf(`{"tool":"big","args":{"i":%d}}`, i)
	fmt.Fprintf(c, "POST /v1/sessions/r%d/calls HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", i, len(body), body)
}

// readNothing asks for an 8 MiB answer and reads none of it, asking again
// on a new connection as soon as the server closes the one it has, until
// stop. It learns of the close without reading: after its request it
// sends bytes without end, which the server does not read (they fill its
// receive buffer), so the server's close resets the connection and the
// blocked write fails.
func readNothing(addr string, i int, asks *atomic.Int64, stop <-chan struct{}) {
	filler := strings.Repeat(" ", 32<<10)
	for {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return
		}
		closed := make(chan struct{})
		go func() { // owned: ends when c fails or closes, joined below
			defer close(closed)
			askBig(c, i)
			asks.Add(1)
			for {
				if _, err := io.WriteString(c, filler); err != nil {
					return
				}
			}
		}()
		select {
		case <-closed:
			c.Close()
		case <-stop:
			c.Close()
			<-closed
			return
		}
	}
}

// idleForever keeps a keep-alive connection idle, opening another as soon
// as the server closes it, until stop. It counts in idle the connections
// that became idle (their request answered).
func idleForever(addr string, idle *atomic.Int64, stop <-chan struct{}) {
	for {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return
		}
		done := make(chan struct{})
		go func() { // owned: ends when c closes, joined below
			defer close(done)
			io.WriteString(c, "GET /v1/stats HTTP/1.1\r\nHost: x\r\n\r\n")
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			idle.Add(1)
			io.Copy(io.Discard, br) // EOF when the server closes c
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
