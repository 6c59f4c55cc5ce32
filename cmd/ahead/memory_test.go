package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ahead-dev/ahead/httpapi"
)

// Issue 23's hostile loads, each against a real `ahead serve` process whose
// VmRSS is sampled during the load: it must stay within 2 × max_bytes +
// 64 MiB over the RSS right after start-up (ISSUE-NOTES).

// bigOutput is an answer just under the default max_response_bytes.
const bigOutput = 8<<20 - 4<<10

// process is `ahead serve` running as its own process.
type process struct {
	url string
	cmd *exec.Cmd
}

func startProcess(t *testing.T, config string) *process {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "ahead.yaml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(ahead(t), "serve", "--quiet", "--config", path)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &process{cmd: cmd}
	var log bytes.Buffer
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		log.WriteString(sc.Text() + "\n")
		if m := listening.FindStringSubmatch(sc.Text()); m != nil {
			p.url = m[1]
			break
		}
	}
	drained := make(chan struct{})
	go func() { // owned: ends when the process exits; joined at cleanup
		io.Copy(io.Discard, stderr)
		close(drained)
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		<-drained
		cmd.Wait()
	})
	if p.url == "" {
		t.Fatalf("ahead serve did not listen:\n%s", log.String())
	}
	return p
}

// rss is the process's resident set, from /proc.
func (p *process) rss() (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", p.cmd.Process.Pid)
}

// underLoad runs load while sampling the process's RSS, and fails the
// test if the peak goes beyond bound over the RSS before the load.
func (p *process) underLoad(t *testing.T, bound int64, load func()) {
	t.Helper()
	base, err := p.rss()
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	peak := make(chan int64, 1)
	go func() { // owned: stopped and joined below, even if load fails the test
		var top int64
		tick := time.NewTicker(10 * time.Millisecond) // sampling, not synchronising
		defer tick.Stop()
		for {
			if n, err := p.rss(); err == nil {
				top = max(top, n)
			}
			select {
			case <-stop:
				peak <- top
				return
			case <-tick.C:
			}
		}
	}()
	stopped := false
	defer func() {
		if !stopped {
			close(stop)
			<-peak
		}
	}()
	began := time.Now()
	load()
	took := time.Since(began)
	close(stop)
	stopped = true
	top := <-peak
	t.Logf("RSS %d MiB at start, peak %d MiB under the load of %v (bound: +%d MiB)", base>>20, top>>20, took.Round(time.Millisecond), bound>>20)
	if top-base > bound {
		t.Errorf("RSS grew by %d MiB under the load, want at most %d MiB", (top-base)>>20, bound>>20)
	}
}

// bigTools answers "big" with bigOutput bytes, "mib" with 1 MiB, "k64"
// with 64 KiB, and any other tool at once.
func bigTools(t *testing.T) *httptest.Server {
	big := strings.Repeat("x", bigOutput)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		switch {
		case strings.HasSuffix(r.URL.Path, "/big"):
			io.WriteString(w, big)
		case strings.HasSuffix(r.URL.Path, "/mib"):
			io.WriteString(w, `{"text":"`+big[:1<<20-12]+`"}`)
		case strings.HasSuffix(r.URL.Path, "/k64"):
			io.WriteString(w, `{"text":"`+big[:64<<10-12]+`"}`)
		default:
			io.WriteString(w, "ok")
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// holdOpen opens n connections that each send head and then nothing,
// held until hold returns. With started, each waits for the first byte of
// its answer before the next connects, and reads no more.
func holdOpen(t *testing.T, addr string, n int, started bool, head func(i int) string, hold func()) {
	t.Helper()
	conns := make([]net.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		if _, err := io.WriteString(c, head(i)); err != nil {
			t.Fatal(err)
		}
		if started {
			c.SetReadDeadline(time.Now().Add(time.Minute)) // a bound for a broken test
			if _, err := bufio.NewReaderSize(c, 16).Peek(1); err != nil {
				t.Fatalf("client %d: no answer: %v", i, err)
			}
		}
	}
	hold()
}

func TestServeMemory(t *testing.T) {
	tools := bigTools(t)
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, `{"choices":[]}`)
	}))
	defer provider.Close()
	config := func(extra string) string {
		return `listen: 127.0.0.1:0
llm: {openai: {base_url: "` + provider.URL + `/v1"}}
backends: {web: {http: {url: "` + tools.URL + `/tools/{tool}"}}}
` + extra
	}
	// settle holds the load while RSS is sampled: until the process has
	// served calls calls (answered them, whether or not the clients
	// read), then a second more.
	settle := func(s *process, t *testing.T, calls int64) {
		// Eight megabytes a call, on a machine the other tests share:
		// a generous bound for a broken test, not a timing.
		for limit := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
			st, err := httpapi.FetchStats(t.Context(), nil, s.url)
			if err == nil && st.Calls >= calls {
				break
			}
			if time.Now().After(limit) {
				t.Fatalf("%d calls served after a minute, want %d", st.Calls, calls)
			}
		}
		deadline := time.Now().Add(time.Second)
		for time.Now().Before(deadline) {
			resp, err := http.Get(s.url + "/healthz")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			time.Sleep(50 * time.Millisecond) // the load's duration, not a synchronisation
		}
	}

	// Issue 23: 200 connections declaring 8 MiB bodies and sending one
	// byte took RSS to 1.6 GiB. 200 to the tool API, 100 to the gateway,
	// 100 to /mcp (the fake MCP server of fakemcp_test.go upstream).
	t.Run("declared bodies", func(t *testing.T) {
		fake, _ := fakeMCP(t)
		s := startProcess(t, config("mcpServers: {fs: {command: \""+fake[0]+"\"}}\n"))
		addr := strings.TrimPrefix(s.url, "http://")
		s.underLoad(t, 2*defaultMaxBytes+64<<20, func() {
			holdOpen(t, addr, 400, false, func(i int) string {
				path := "/v1/sessions/s/calls"
				switch i % 4 {
				case 2:
					path = "/v1/chat/completions"
				case 3:
					path = "/mcp"
				}
				return "POST " + path + " HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nAhead-Session: s\r\nContent-Length: 8388608\r\n\r\n{"
			}, func() { settle(s, t, 0) })
		})
	})

	// Issue 23: 20,000 tool names took RSS from 25 to 203 MiB and made
	// /v1/stats 85 MB. Here 2,000 names of 32 KiB (about the bytes in
	// fewer calls), with max_bytes 8MiB.
	t.Run("tool names", func(t *testing.T) {
		s := startProcess(t, config("engine: {max_bytes: 8MiB}\n"))
		s.underLoad(t, 2*8<<20+64<<20, func() {
			var wg sync.WaitGroup
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
			defer client.CloseIdleConnections()
			for w := range 8 {
				wg.Go(func() {
					for i := w; i < 2000; i += 8 {
						name := fmt.Sprintf("%032768d", i)
						resp, err := client.Post(s.url+"/v1/sessions/s"+strconv.Itoa(w)+"/calls", "application/json",
							strings.NewReader(`{"tool":"`+name+`","args":{}}`))
						if err != nil {
							t.Error(err)
							return
						}
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
					}
				})
			}
			wg.Wait()
			resp, err := http.Get(s.url + "/v1/stats")
			if err != nil {
				t.Fatal(err)
			}
			n, _ := io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if n > 1<<20 {
				t.Errorf("/v1/stats is %d bytes after 2,000 tool names, want at most 1 MiB", n)
			}
		})
	})

	// Issue 23: with slots unset, calls in flight are not limited, and 40
	// clients calling a tool of 8 MiB outputs at once took RSS to 862 MiB
	// (max_connections × max_response_bytes). Here 48 clients at once,
	// each reading its whole answer: every one is answered, and the
	// outputs being read wait within max_answer_bytes.
	t.Run("outputs at once", func(t *testing.T) {
		s := startProcess(t, config(""))
		bigCallsAtOnce(t, s, 48, "o")
	})

	// Issue 23: outputs of exec backends were outside max_answer_bytes,
	// each held up to max_output_bytes while read and answered. 64
	// clients at once calling a command that writes 8 MiB, each reading
	// its whole answer: every one is answered, the outputs being read
	// wait within max_answer_bytes.
	t.Run("exec outputs at once", func(t *testing.T) {
		dir := t.TempDir()
		script := filepath.Join(dir, "big.sh")
		if err := os.WriteFile(script, []byte("#!/bin/sh\nhead -c "+strconv.Itoa(bigOutput)+" /dev/zero | tr '\\0' x\n"), 0o700); err != nil {
			t.Fatal(err)
		}
		s := startProcess(t, "listen: 127.0.0.1:0\nbackends: {local: {exec: {command: ["+strconv.Quote(script)+"]}}}\n")
		bigCallsAtOnce(t, s, 64, "x")
	})

	// Issue 23: answers of MCP upstreams were outside max_answer_bytes,
	// and an HTTP upstream's JSON answer had no bound at all. 32 clients
	// at once calling an HTTP upstream's tool of 8 MiB outputs through the
	// tool API, each reading its whole answer: +913 MiB before. The
	// upstream runs as a process of its own: in the test's process, under
	// the race detector, encoding 8 MiB answers starved the test's own
	// readers, one of which then took nothing of its answer for over a
	// second while the others took theirs, which is what the budget cuts
	// (the test was held at 24 clients then).
	t.Run("MCP outputs at once", func(t *testing.T) {
		s := startProcess(t, "listen: 127.0.0.1:0\nmcpServers: {big: {url: "+strconv.Quote(bigMCPOverHTTP(t))+"}}\n")
		bigCallsAtOnce(t, s, 32, "m")
	})

	// Issue 23: a stdio upstream's answers were read whole by the SDK, up
	// to 16 MiB each, outside max_answer_bytes: N sessions each calling a
	// tool that answers 8 MiB held N × 8 MiB. 32 clients at once, each in
	// a session of its own (so 32 upstream processes), each reading its
	// whole answer.
	t.Run("stdio MCP outputs at once", func(t *testing.T) {
		s := startProcess(t, "listen: 127.0.0.1:0\nmcpServers: {big: {command: "+strconv.Quote(bigMCP(t))+
			", args: [-size, \""+strconv.Itoa(bigOutput)+"\"]}}\n")
		bigCallsAtOnce(t, s, 32, "d")
	})

	// Issue 23: the Learner's kept calls. One session of 400 calls of
	// 1 MiB outputs with learning on took RSS from 25 to 649 MiB at
	// max_bytes: 8MiB (the loop that trims kept calls never trimmed the
	// only live session); 4,000 sessions of 64 KiB answers with a pool and
	// learning on left 184 MiB. These loads, through the tool API with a
	// pool learnt from scratch, stay within the bound on the code before
	// the Learner's bound (64f1107^) too: the figures came from a
	// setting these do not reproduce; they pin the bound as it is.
	learning := func(t *testing.T) *process {
		pool := filepath.Join(t.TempDir(), "pool.json") // learnt from scratch
		return startProcess(t, config("engine: {max_bytes: 8MiB}\npatterns: {pool: "+strconv.Quote(pool)+", learn: true}\n"))
	}
	call := func(t *testing.T, client *http.Client, s *process, session, tool string, i int) {
		resp, err := client.Post(s.url+"/v1/sessions/"+session+"/calls", "application/json",
			strings.NewReader(fmt.Sprintf(`{"tool":%q,"args":{"i":%d}}`, tool, i)))
		if err != nil {
			t.Error(err)
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("call %d: %s", i, resp.Status)
		}
	}
	t.Run("learner, one session", func(t *testing.T) {
		s := learning(t)
		s.underLoad(t, 2*8<<20+64<<20, func() {
			for i := range 400 {
				call(t, http.DefaultClient, s, "one", "mib", i)
			}
		})
	})
	t.Run("learner, 4000 sessions", func(t *testing.T) {
		s := learning(t)
		s.underLoad(t, 2*8<<20+64<<20, func() {
			var wg sync.WaitGroup
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
			defer client.CloseIdleConnections()
			for w := range 8 {
				wg.Go(func() {
					for i := w; i < 4000; i += 8 {
						call(t, client, s, "s"+strconv.Itoa(i), "k64", i)
					}
				})
			}
			wg.Wait()
		})
	})

	// Issue 23: 40 clients asking for 8 MiB answers and reading nothing
	// held 1,032 MiB until the write timeout. Here 64, one after another
	// (40 held 537 MiB on that code, paced so: too close to the bound to
	// tell), each reading the first byte of its answer only: what
	// answers are held is measured here, not what 40 tools' outputs take
	// while they are produced at once (with no slots, calls in flight are
	// not limited, and each holds up to its backend's max_response_bytes).
	t.Run("answers not read", func(t *testing.T) {
		s := startProcess(t, config(""))
		addr := strings.TrimPrefix(s.url, "http://")
		s.underLoad(t, 2*defaultMaxBytes+64<<20, func() {
			holdOpen(t, addr, 64, true, func(i int) string {
				body := fmt.Sprintf(`{"tool":"big","args":{"i":%d}}`, i)
				return fmt.Sprintf("POST /v1/sessions/r%d/calls HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", i, len(body), body)
			}, func() { settle(s, t, 64) })
		})
	})
}

// bigMCPBinary builds testdata/bigmcp (an MCP server whose tool big
// answers -size bytes) once, without the race detector: an upstream of
// its own, as in production.
var bigMCPBinary = sync.OnceValues(func() (string, error) {
	dir, err := buildDir("bigmcp-bin")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "bigmcp")
	if out, err := exec.Command("go", "build", "-o", bin, "./testdata/bigmcp").CombinedOutput(); err != nil {
		return "", fmt.Errorf("building testdata/bigmcp: %v\n%s", err, out)
	}
	return bin, nil
})

func bigMCP(t *testing.T) string {
	t.Helper()
	bin, err := bigMCPBinary()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// bigMCPOverHTTP starts testdata/bigmcp on a streamable HTTP endpoint,
// its tool answering bigOutput bytes, and returns the endpoint's URL; the
// process is killed at cleanup.
func bigMCPOverHTTP(t *testing.T) string {
	t.Helper()
	cmd := exec.Command(bigMCP(t), "-http", "-size", strconv.Itoa(bigOutput))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // registered first: runs after ahead serve stops (it holds streams open)
		cmd.Process.Kill()
		cmd.Wait()
	})
	url, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("testdata/bigmcp told no URL: %v", err)
	}
	return strings.TrimSpace(url)
}

// defaultMaxBytes is engine.max_bytes when the configuration sets none.
const defaultMaxBytes = 256 << 20

// bigCallsAtOnce makes n calls of the tool big at once through s's tool
// API, each in a session of its own (prefix and its number), within the
// RSS bound: each client reads its whole answer (the output, a JSON string
// of x's, with a few fields around it), and afterwards the answer budget
// holds no byte and cut none.
func bigCallsAtOnce(t *testing.T, s *process, n int, prefix string) {
	t.Helper()
	s.underLoad(t, 2*defaultMaxBytes+64<<20, func() {
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			wg.Go(func() {
				<-start
				resp, err := http.Post(s.url+"/v1/sessions/"+prefix+strconv.Itoa(i)+"/calls", "application/json",
					strings.NewReader(fmt.Sprintf(`{"tool":"big","args":{"i":%d}}`, i)))
				if err != nil {
					t.Error(err)
					return
				}
				defer resp.Body.Close()
				got, err := io.Copy(io.Discard, resp.Body)
				if err != nil || resp.StatusCode != http.StatusOK || got < bigOutput || got > bigOutput+200 {
					t.Errorf("client %d: %s, %d bytes, %v; want 200 and the whole output", i, resp.Status, got, err)
				}
			})
		}
		close(start)
		wg.Wait()
	})
	st, err := httpapi.FetchStats(t.Context(), nil, s.url)
	if err != nil {
		t.Fatal(err)
	}
	if st.Answers == nil || st.Answers.Bytes != 0 || st.Answers.Cut != 0 {
		t.Errorf("/v1/stats answers = %+v after the load, want 0 bytes held and none cut", st.Answers)
	}
}
