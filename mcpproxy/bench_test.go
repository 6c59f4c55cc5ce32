package mcpproxy

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ahead-dev/ahead/engine"
)

// The added latency of ahead per tools/call, against the same upstream
// called direct. Each iteration makes one direct call and one through ahead,
// interleaved, so both see the same machine; the benchmark reports the
// latency percentiles of each and the ratio of the means (no speculation:
// every call is executed, which is ahead's worst case).
//
//	go test -run '^$' -bench AddedLatency -benchtime 2000x ./mcpproxy

func BenchmarkAddedLatencyStdio(b *testing.B) {
	server, err := conformanceServer()
	if err != nil {
		b.Fatal(err)
	}
	up := Upstream{Name: "everything", Command: server}
	// Direct as an agent launches it: the SDK's command transport (ahead
	// reads its upstreams with its own, stdio.go).
	direct := benchClient(b, func() mcp.Transport { return &mcp.CommandTransport{Command: exec.Command(server)} })
	via := benchClient(b, func() mcp.Transport { return stdioProxy(b, up) })
	measure(b, direct, via, "test_simple_text")
}

func BenchmarkAddedLatencyHTTP(b *testing.B) { benchHTTP(b, false) }

// BenchmarkAddedLatencyHTTPStateless: the upstream speaks 2026-07-28
// (stateless streamable HTTP, the client direct speaks it too), so ahead
// reaches it through its one shared connection, each call carrying the
// agent's identity and capabilities (issue 26).
func BenchmarkAddedLatencyHTTPStateless(b *testing.B) { benchHTTP(b, true) }

func benchHTTP(b *testing.B, stateless bool) {
	s := mcp.NewServer(&mcp.Implementation{Name: "bench", Version: "1"}, &mcp.ServerOptions{Logger: slog.New(slog.DiscardHandler)})
	mcp.AddTool(s, &mcp.Tool{Name: "echo"}, func(ctx context.Context, req *mcp.CallToolRequest, a struct {
		Text string `json:"text"`
	}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: a.Text}}}, nil, nil
	})
	upSrv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s },
		&mcp.StreamableHTTPOptions{Logger: slog.New(slog.DiscardHandler), Stateless: stateless}))
	// Closed after the clients (cleanups run last first): a server waits
	// for its open streams.
	b.Cleanup(upSrv.Close)
	up := Upstream{Name: "bench", URL: upSrv.URL}

	x := benchProxy(b, up)
	viaSrv := httptest.NewServer(x.Handler())
	b.Cleanup(viaSrv.Close)
	version := agentProtocol
	if stateless {
		version = revisionStateless
	}
	direct := benchClientAt(b, func() mcp.Transport { return &mcp.StreamableClientTransport{Endpoint: upSrv.URL} }, version)
	via := benchClient(b, func() mcp.Transport { return &mcp.StreamableClientTransport{Endpoint: viaSrv.URL} })
	if got := x.Upstreams()[0]; got.Shared != stateless {
		b.Fatalf("upstream %+v, want shared %v", got, stateless)
	}
	measure(b, direct, via, "echo")
}

func benchProxy(b testing.TB, up Upstream) *Proxy {
	p, err := New(&Options{Upstreams: []Upstream{up}, Logger: slog.New(slog.DiscardHandler), Stderr: io.Discard})
	if err != nil {
		b.Fatal(err)
	}
	eng := engine.New(&engine.Options{Backends: p.Backends(), Route: p.Route, Logger: slog.New(slog.DiscardHandler)})
	p.Attach(eng)
	b.Cleanup(func() {
		p.Close()
		eng.Close()
	})
	return p
}

// stdioProxy serves the proxy over a pair of OS pipes, as ahead mcp does
// on its stdin and stdout, and returns the agent's end.
func stdioProxy(b *testing.B, up Upstream) mcp.Transport {
	p := benchProxy(b, up)
	inR, inW, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.Serve(ctx, &mcp.IOTransport{Reader: inR, Writer: outW})
	}()
	b.Cleanup(func() {
		cancel()
		inW.Close()
		<-done
		outR.Close()
	})
	return &mcp.IOTransport{Reader: outR, Writer: inW}
}

func benchClient(b *testing.B, t func() mcp.Transport) *mcp.ClientSession {
	return benchClientAt(b, t, agentProtocol)
}

func benchClientAt(b *testing.B, t func() mcp.Transport, version string) *mcp.ClientSession {
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, &mcp.ClientOptions{Logger: slog.New(slog.DiscardHandler)}).
		Connect(context.Background(), t(), &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cs.Close() })
	return cs
}

func measure(b *testing.B, direct, via *mcp.ClientSession, tool string) {
	ctx := context.Background()
	one := func(cs *mcp.ClientSession) time.Duration {
		// Params of their own for each call: a 2026-07-28 client adds its
		// protocol version to the _meta of the params it is given.
		params := &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"text": "hello"}}
		t0 := time.Now()
		res, err := cs.CallTool(ctx, params)
		d := time.Since(t0)
		if err != nil || res.IsError {
			b.Fatalf("calling %s (%s): %v %v", tool, cs.InitializeResult().ProtocolVersion, err, res)
		}
		return d
	}
	for range 50 { // warm both paths (connections, the engine's tables)
		one(direct)
		one(via)
	}
	var ds, vs []time.Duration
	for b.Loop() {
		ds = append(ds, one(direct))
		vs = append(vs, one(via))
	}
	pct := func(s []time.Duration, p float64) float64 {
		s = slices.Clone(s)
		slices.Sort(s)
		return float64(s[min(len(s)-1, int(p*float64(len(s))))].Microseconds())
	}
	mean := func(s []time.Duration) float64 {
		var t time.Duration
		for _, d := range s {
			t += d
		}
		return float64(t.Microseconds()) / float64(len(s))
	}
	b.ReportMetric(pct(ds, 0.5), "direct_p50_us")
	b.ReportMetric(pct(ds, 0.99), "direct_p99_us")
	b.ReportMetric(pct(vs, 0.5), "ahead_p50_us")
	b.ReportMetric(pct(vs, 0.99), "ahead_p99_us")
	b.ReportMetric(pct(vs, 0.5)-pct(ds, 0.5), "added_p50_us")
	b.ReportMetric(pct(vs, 0.99)-pct(ds, 0.99), "added_p99_us")
	b.ReportMetric(mean(vs)/mean(ds), "ratio_mean")
}

// BenchmarkAddedLatencyEras: the added latency of a tools/call through
// ahead over streamable HTTP for an agent speaking 2026-07-28 (stateless,
// its run named by Ahead-Session) beside one speaking 2025-11-25 (a
// protocol session), in one run: each iteration calls direct, then through
// ahead in the older revision, then in the new one, so all three see the
// same machine. The upstream is the same Go SDK server for all three.
//
//	go test -run '^$' -bench AddedLatencyEras -benchtime 3000x ./mcpproxy
func BenchmarkAddedLatencyEras(b *testing.B) {
	s := mcp.NewServer(&mcp.Implementation{Name: "bench", Version: "1"}, &mcp.ServerOptions{Logger: slog.New(slog.DiscardHandler)})
	mcp.AddTool(s, &mcp.Tool{Name: "echo"}, func(ctx context.Context, req *mcp.CallToolRequest, a struct {
		Text string `json:"text"`
	}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: a.Text}}}, nil, nil
	})
	upSrv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Logger: slog.New(slog.DiscardHandler)}))
	b.Cleanup(upSrv.Close)
	x := benchProxy(b, Upstream{Name: "bench", URL: upSrv.URL})
	viaSrv := httptest.NewServer(x.Handler())
	b.Cleanup(viaSrv.Close)

	direct := benchClient(b, func() mcp.Transport { return &mcp.StreamableClientTransport{Endpoint: upSrv.URL} })
	old := benchClient(b, func() mcp.Transport { return &mcp.StreamableClientTransport{Endpoint: viaSrv.URL} })
	hc := &http.Client{Transport: headerTransport{base: http.DefaultTransport, headers: map[string]string{SessionHeader: "bench-run"}}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, &mcp.ClientOptions{Logger: slog.New(slog.DiscardHandler)}).
		Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: viaSrv.URL, HTTPClient: hc}, &mcp.ClientSessionOptions{ProtocolVersion: newEraVersion})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cs.Close() })
	if v := cs.InitializeResult().ProtocolVersion; v != newEraVersion {
		b.Fatalf("the new-era client negotiated %q", v)
	}

	ctx := context.Background()
	args := map[string]any{"text": "hello"}
	one := func(cs *mcp.ClientSession) time.Duration {
		// Params of its own: a 2026-07-28 client adds its _meta to them.
		params := &mcp.CallToolParams{Name: "echo", Arguments: args}
		t0 := time.Now()
		res, err := cs.CallTool(ctx, params)
		d := time.Since(t0)
		if err != nil || res.IsError {
			b.Fatalf("calling echo (%s): %v %v", cs.InitializeResult().ProtocolVersion, err, res)
		}
		return d
	}
	for range 50 {
		one(direct)
		one(old)
		one(cs)
	}
	var ds, os_, ns []time.Duration
	for b.Loop() {
		ds = append(ds, one(direct))
		os_ = append(os_, one(old))
		ns = append(ns, one(cs))
	}
	pct := func(s []time.Duration, p float64) float64 {
		s = slices.Clone(s)
		slices.Sort(s)
		return float64(s[min(len(s)-1, int(p*float64(len(s))))].Microseconds())
	}
	b.ReportMetric(pct(ds, 0.5), "direct_p50_us")
	b.ReportMetric(pct(os_, 0.5)-pct(ds, 0.5), "added_2025_p50_us")
	b.ReportMetric(pct(ns, 0.5)-pct(ds, 0.5), "added_2026_p50_us")
	b.ReportMetric(pct(os_, 0.99)-pct(ds, 0.99), "added_2025_p99_us")
	b.ReportMetric(pct(ns, 0.99)-pct(ds, 0.99), "added_2026_p99_us")
}
