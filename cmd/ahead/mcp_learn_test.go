package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ahead-dev/ahead/pattern"
	"github.com/ahead-dev/ahead/trace"
)

// fakeMCP makes the test binary the upstream of ahead mcp (see
// fakemcp_test.go) and returns its command line and the file counting its
// launches.
func fakeMCP(t *testing.T) (cmd []string, launches string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	launches = filepath.Join(t.TempDir(), "launches")
	t.Setenv(fakeMCPEnv, "1")
	t.Setenv(fakeMCPLaunches, launches)
	return []string{exe}, launches
}

func countLines(t *testing.T, name string) int {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "\n")
}

// runMCPSession runs ahead mcp in-process with args, lets session talk to
// it as an agent, hangs up (end of stdin), and returns the exit code and
// stderr.
func runMCPSession(t *testing.T, args []string, session func(cs *mcp.ClientSession)) (int, string) {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	var stderr syncBuffer
	e := &env{stdin: inR, stdout: outW, stderr: &stderr}
	done := make(chan int, 1)
	go func() {
		code := run(context.Background(), e, append([]string{"mcp"}, args...))
		outW.Close()
		done <- code
	}()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil).
		Connect(t.Context(), &mcp.IOTransport{Reader: outR, Writer: inW}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		inW.Close()
		<-done
		t.Fatalf("connecting to ahead mcp: %v\n%s", err, stderr.String())
	}
	session(cs)
	cs.Close()
	code := <-done
	return code, stderr.String()
}

// TestMCPFirstUse is issue 14's first use of the README's snippet: the
// pool file does not exist yet (a warning, not an error); each session
// launches the upstream once, even with --trust-annotations; end of stdin
// is a clean exit with a summary and a checkpoint; and after a few
// sessions where list_directory is followed by read_text_file, the pool
// written predicts the second, and the next session is served ahead.
func TestMCPFirstUse(t *testing.T) {
	upstream, launches := fakeMCP(t)
	dir := t.TempDir()
	pool, traces := filepath.Join(dir, "pool.json"), filepath.Join(dir, "traces")
	args := append([]string{"--trust-annotations", "--traces", traces, "--patterns", pool, "--"}, upstream...)
	work := func(i int) func(cs *mcp.ClientSession) {
		return func(cs *mcp.ClientSession) {
			project := fmt.Sprintf("/home/me/project%d", i)
			callSource(t, cs, "list_directory", map[string]any{"path": project})
			if text, src := callSource(t, cs, "read_text_file", map[string]any{"path": project + "/README.md"}); text != fmt.Sprintf("# project%d", i) {
				t.Errorf("session %d: read_text_file = %q (%s)", i, text, src)
			}
		}
	}
	for i := range 4 {
		code, stderr := runMCPSession(t, args, work(i))
		if code != 0 {
			t.Fatalf("session %d: ahead mcp exited %d:\n%s", i, code, stderr)
		}
		if got, want := strings.Count(stderr, "does not exist yet"), map[bool]int{true: 1}[i == 0]; got != want {
			t.Errorf("session %d: %d warnings of a missing pool, want %d:\n%s", i, got, want, stderr)
		}
		if !strings.Contains(stderr, "ahead: 2 tool calls: ") {
			t.Errorf("session %d: no summary at exit:\n%s", i, stderr)
		}
		if n := countLines(t, launches); n != i+1 {
			t.Errorf("after session %d: the upstream was launched %d times, want %d", i, n, i+1)
		}
		if _, err := os.Stat(pool); err != nil {
			t.Fatalf("session %d: no checkpoint at exit: %v", i, err)
		}
	}

	p, err := pattern.Load(pool)
	if err != nil {
		t.Fatal(err)
	}
	o, err := pattern.NewOnline(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	preds := o.Observe(trace.Event{Session: "s", Tool: "list_directory", Args: []byte(`{"path":"/home/me/x"}`), Status: trace.StatusOK, Output: "[FILE] README.md\n[DIR] src"})
	if len(preds) == 0 || preds[0].Tool != "read_text_file" || string(preds[0].Args) != `{"path":"/home/me/x/README.md"}` {
		t.Fatalf("the pool written after 4 sessions predicts %+v after list_directory, want read_text_file of its README", preds)
	}

	// The next session finds its read ready; at debug level, stderr has a
	// line for the speculative execution that served it.
	code, stderr := runMCPSession(t, append([]string{"--log-level", "debug"}, args...), func(cs *mcp.ClientSession) {
		callSource(t, cs, "list_directory", map[string]any{"path": "/home/me/next"})
		if _, src := callSource(t, cs, "read_text_file", map[string]any{"path": "/home/me/next/README.md"}); src != "reused" && src != "promoted" {
			t.Errorf("read after list with the learnt pool: source %q, want reused or promoted", src)
		}
	})
	if code != 0 || !strings.Contains(stderr, "1 reused") && !strings.Contains(stderr, "1 promoted") {
		t.Errorf("exit %d, summary:\n%s", code, stderr)
	}
	if !regexp.MustCompile(`msg=speculation .*tool=read_text_file .*outcome=(reused|promoted)`).MatchString(stderr) {
		t.Errorf("no debug line for the speculative read:\n%s", stderr)
	}
}

// TestMCPPatternsNone: --patterns none and --policy none are documented
// and work: no predictions, no file read.
func TestMCPPatternsNone(t *testing.T) {
	upstream, _ := fakeMCP(t)
	args := append([]string{"--patterns", "none", "--policy", "none", "--quiet", "--log-level", "debug", "--"}, upstream...)
	code, stderr := runMCPSession(t, args, func(cs *mcp.ClientSession) {
		if _, src := callSource(t, cs, "list_directory", map[string]any{"path": "/x"}); src != "executed" {
			t.Errorf("source %q, want executed", src)
		}
	})
	if code != 0 || strings.Contains(stderr, "ahead: 1 tool call") {
		t.Errorf("exit %d (want 0), and --quiet prints no summary:\n%s", code, stderr)
	}
}

// TestMCPLearnsListedReads is issue 24's target: ahead mcp in front of the
// real filesystem server, an empty pool, one process per session, each
// session in a folder of its own with files of new names: it lists the
// folder and reads each file listed. The path read is the folder the agent
// named joined with a name the listing returned (a value of two sources),
// and each process learns from the sessions before it, recorded in
// --traces or, without it, kept beside the pool (--recent's default). After
// six sessions, at least half of the reads are served ahead.
func TestMCPLearnsListedReads(t *testing.T) {
	node, bin := testdeps(t)
	server := filepath.Join(bin, "mcp-server-filesystem")
	for _, mode := range []string{"traces", "pool alone"} {
		t.Run(mode, func(t *testing.T) {
			root, state := t.TempDir(), t.TempDir()
			pool := filepath.Join(state, "pool.json")
			args := []string{"--trust-annotations", "--patterns", pool}
			if mode == "traces" {
				args = append(args, "--traces", filepath.Join(state, "traces"))
			}
			args = append(args, "--", node, server, root)
			words := []string{"notes", "plan", "draft", "budget", "todo", "ideas", "log", "report", "summary", "memo"}
			served, reads := 0, 0
			for i := range 7 {
				dir := filepath.Join(root, fmt.Sprintf("task%d", i))
				if err := os.Mkdir(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				files := map[string]string{}
				for j := range 3 {
					files[fmt.Sprintf("%s-%d-%d.md", words[(i+j)%len(words)], i, j)] = fmt.Sprintf("file %d of task %d\n", j, i)
				}
				writeFiles(t, dir, files)
				code, stderr := runMCPSession(t, args, func(cs *mcp.ClientSession) {
					listing, _ := callSource(t, cs, "list_directory", map[string]any{"path": dir})
					var names []string
					for line := range strings.Lines(listing) {
						if name, ok := strings.CutPrefix(strings.TrimSpace(line), "[FILE] "); ok {
							names = append(names, name)
						}
					}
					if i%2 == 0 {
						// Not always in the listing's order: what is read
						// is each listed name, not line 1 then line 2.
						slices.Reverse(names)
					}
					for _, name := range names {
						text, src := callSource(t, cs, "read_text_file", map[string]any{"path": dir + "/" + name})
						if text != files[name] {
							t.Errorf("session %d: read %s = %q, want %q", i, name, text, files[name])
						}
						if i == 6 {
							reads++
							if src == "reused" || src == "promoted" {
								served++
							}
						}
					}
				})
				if code != 0 {
					t.Fatalf("session %d: ahead mcp exited %d:\n%s", i, code, stderr)
				}
			}
			if reads != 3 || 2*served < reads {
				t.Errorf("session 7: %d of %d reads served ahead, want at least half", served, reads)
			}
			if mode == "pool alone" {
				recent := pool + ".recent"
				entries, err := os.ReadDir(recent)
				if err != nil || len(entries) == 0 {
					t.Fatalf("nothing kept beside the pool in %s: %v", recent, err)
				}
				for _, e := range entries {
					if info, err := e.Info(); err != nil || info.Mode().Perm() != 0o600 {
						t.Errorf("%s: mode %v (err %v), want 0600", e.Name(), info.Mode().Perm(), err)
					}
				}
			}
			p, err := pattern.Load(pool)
			if err != nil {
				t.Fatal(err)
			}
			data, _ := os.ReadFile(pool)
			for _, s := range []string{root, "task", "notes"} {
				if strings.Contains(string(data), s) {
					t.Errorf("the pool holds %q, a value of the sessions", s)
				}
			}
			if t.Failed() {
				for _, pt := range p.Patterns {
					t.Logf("pool: %s p=%.2f hits=%v", pt.Describe(), pt.P, pt.Hits)
				}
			}
		})
	}
}

// TestMCPRecentFlag: with a pool that learns and no --traces, the session
// is kept beside the pool (in POOL.recent, or in --recent's folder);
// --recent none keeps nothing; --recent with --traces is a usage error.
func TestMCPRecentFlag(t *testing.T) {
	upstream, _ := fakeMCP(t)
	list := func(cs *mcp.ClientSession) { callSource(t, cs, "list_directory", map[string]any{"path": "/x"}) }
	files := func(dir string) int {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return 0
		}
		return len(entries)
	}
	state := t.TempDir()
	pool := filepath.Join(state, "pool.json")
	elsewhere := filepath.Join(state, "elsewhere")
	for _, tt := range []struct {
		flags      []string
		dir        string
		want, code int
	}{
		{nil, pool + ".recent", 1, 0},
		{[]string{"--recent", elsewhere}, elsewhere, 1, 0},
		{[]string{"--recent", "none"}, pool + ".recent", 1, 0}, // the first run's file, no new one
		{[]string{"--recent", elsewhere, "--traces", filepath.Join(state, "traces")}, elsewhere, 1, 2},
	} {
		args := append(append([]string{"--quiet", "--patterns", pool}, tt.flags...), "--")
		if tt.code != 0 {
			var stderr syncBuffer
			if code := run(t.Context(), &env{stdin: strings.NewReader(""), stdout: io.Discard, stderr: &stderr}, append(append([]string{"mcp"}, args...), upstream...)); code != tt.code {
				t.Errorf("%v: exit %d, want %d:\n%s", tt.flags, code, tt.code, stderr.String())
			}
			continue
		}
		if code, stderr := runMCPSession(t, append(args, upstream...), list); code != 0 {
			t.Fatalf("%v: exit %d:\n%s", tt.flags, code, stderr)
		}
		if got := files(tt.dir); got != tt.want {
			t.Errorf("%v: %d files in %s, want %d", tt.flags, got, tt.dir, tt.want)
		}
	}
}

// TestMCPWithoutPool is issue 24 item 6 for ahead mcp: without --patterns
// the built-in default predicts and learns in memory, and nothing is
// written (no pool, no recent sessions beside one); --patterns none turns
// it off.
func TestMCPWithoutPool(t *testing.T) {
	upstream, _ := fakeMCP(t)
	t.Chdir(t.TempDir())
	const fresh = "no pool file: predicting from the built-in default, learning in memory"
	for _, tc := range []struct {
		args  []string
		fresh bool
	}{
		{nil, true},
		{[]string{"--patterns", "none"}, false},
	} {
		args := append(append(tc.args, "--log-level", "info", "--trust-annotations", "--"), upstream...)
		code, stderr := runMCPSession(t, args, func(cs *mcp.ClientSession) {
			callSource(t, cs, "list_directory", map[string]any{"path": "/x"})
		})
		if code != 0 || strings.Contains(stderr, fresh) != tc.fresh {
			t.Errorf("%q: exit %d (want 0), built-in default announced: %v, want %v:\n%s", tc.args, code, !tc.fresh, tc.fresh, stderr)
		}
	}
	if entries, err := os.ReadDir("."); err != nil || len(entries) != 0 {
		t.Errorf("the working folder holds %d files (%v), want none: nothing is written without a pool", len(entries), err)
	}
}
