package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ahead-dev/ahead/pattern"
)

// TestMCPLearnsJoinedAcross is issue 24's value of two events through ahead
// mcp and the real filesystem server, set up as README says: an empty
// pool, --trust-annotations, one process per session, with and without
// --traces. Each session has a folder of its own with files of new names,
// and brings their backup up to date: it makes sure the backup folder
// exists (create_directory, which the server documents as "create a new
// directory or ensure a directory exists"), lists the folder, and for each
// listed file looks at its backup copy (get_file_info), reads the file and,
// where the copy's size differs, writes the copy; at the end it looks at
// each copy again. The path of a copy is the folder create_directory named
// joined with a name the listing returned: two parts from two events
// (pattern.Base.From), in a call no single earlier event names whole. The
// first look at each copy can be served ahead only through such a value.
//
// Writes are never speculated (the server's annotations say write_file and
// create_directory are not read-only), and each one invalidates the
// session's speculative results: a look at a copy speculated before its
// write is never handed over after it. The test checks every size the
// agent is told against the file's at the time, and, after every call,
// that the backup holds exactly what the agent's own writes put there (a
// write run speculatively would show), and that no debug line reports a
// speculative execution of a tool that is not read-only.
func TestMCPLearnsJoinedAcross(t *testing.T) {
	node, bin := testdeps(t)
	server := filepath.Join(bin, "mcp-server-filesystem")
	speculated := regexp.MustCompile(`msg=speculation .*tool=(\S+)`)
	sizeOf := regexp.MustCompile(`(?m)^size: (\d+)$`)
	for _, mode := range []string{"traces", "pool alone"} {
		t.Run(mode, func(t *testing.T) {
			root, state := t.TempDir(), t.TempDir()
			pool := filepath.Join(state, "pool.json")
			args := []string{"--trust-annotations", "--log-level", "debug", "--patterns", pool}
			if mode == "traces" {
				args = append(args, "--traces", filepath.Join(state, "traces"))
			}
			args = append(args, "--", node, server, root)
			words := []string{"notes", "plan", "draft", "budget", "todo", "ideas", "log", "report", "summary", "memo"}
			const sessions, perSession = 7, 3
			served := make([]int, sessions) // first looks at a copy served ahead
			again := make([]int, sessions)  // looks after the writes
			values := []string{root}
			for i := range sessions {
				task := filepath.Join(root, fmt.Sprintf("task%d", i))
				folder, backup := filepath.Join(task, "work"), filepath.Join(task, fmt.Sprintf("%s-%d", words[(i+5)%len(words)], i))
				for _, d := range []string{folder, backup} {
					if err := os.MkdirAll(d, 0o755); err != nil {
						t.Fatal(err)
					}
				}
				files, copies := map[string]string{}, map[string]string{}
				for j := range perSession {
					name := fmt.Sprintf("%s-%d-%d.md", words[(i+j)%len(words)], i, j)
					files[name] = fmt.Sprintf("%s, edition %d\n", name, i+2)
					// An older version: of another size (the agent writes the
					// copy), or of the same size (it leaves it: a write run
					// speculatively would show).
					copies[name] = strings.Repeat("old ", j+1)
					if j == 1 {
						copies[name] = strings.ToUpper(files[name])
					}
				}
				values = append(values, filepath.Base(backup), filepath.Base(task))
				for name := range files {
					values = append(values, name)
				}
				writeFiles(t, folder, files)
				writeFiles(t, backup, copies)
				// The backup holds what the agent's own writes put there.
				check := func(after string) {
					t.Helper()
					for name, want := range copies {
						if got, err := os.ReadFile(filepath.Join(backup, name)); err != nil || string(got) != want {
							t.Errorf("session %d, after %s: the copy of %s holds %q (%v), want %q", i, after, name, got, err, want)
						}
					}
				}
				look := func(cs *mcp.ClientSession, name string) (size int, src string) {
					t.Helper()
					info, src := callSource(t, cs, "get_file_info", map[string]any{"path": backup + "/" + name})
					m := sizeOf.FindStringSubmatch(info)
					if m == nil {
						t.Fatalf("session %d: get_file_info %s = %q, no size", i, name, info)
					}
					fmt.Sscan(m[1], &size)
					if size != len(copies[name]) {
						t.Errorf("session %d: get_file_info of the copy of %s (%s) says size %d, the copy has %d", i, name, src, size, len(copies[name]))
					}
					return size, src
				}
				code, stderr := runMCPSession(t, args, func(cs *mcp.ClientSession) {
					callSource(t, cs, "create_directory", map[string]any{"path": backup})
					listing, _ := callSource(t, cs, "list_directory", map[string]any{"path": folder})
					var names []string
					for line := range strings.Lines(listing) {
						if name, ok := strings.CutPrefix(strings.TrimSpace(line), "[FILE] "); ok {
							names = append(names, name)
						}
					}
					if i%2 == 0 {
						slices.Reverse(names) // what is used is each listed name, not line 1 then 2
					}
					for _, name := range names {
						size, src := look(cs, name)
						if src == "reused" || src == "promoted" {
							served[i]++
						}
						text, _ := callSource(t, cs, "read_text_file", map[string]any{"path": folder + "/" + name})
						if text != files[name] {
							t.Errorf("session %d: read %s = %q, want %q", i, name, text, files[name])
						}
						if size != len(text) {
							callSource(t, cs, "write_file", map[string]any{"path": backup + "/" + name, "content": text})
							copies[name] = text
						}
						check(name)
					}
					for _, name := range names {
						if _, src := look(cs, name); src == "reused" || src == "promoted" {
							again[i]++
						}
					}
				})
				if code != 0 {
					t.Fatalf("session %d: ahead mcp exited %d:\n%s", i, code, stderr)
				}
				check("the session")
				for _, m := range speculated.FindAllStringSubmatch(stderr, -1) {
					if !slices.Contains([]string{"get_file_info", "list_directory", "read_text_file"}, m[1]) {
						t.Errorf("session %d: %s executed speculatively:\n%s", i, m[1], m[0])
					}
				}
			}
			t.Logf("of %d copies a session, first looks served ahead %v, looks after the writes %v", perSession, served, again)
			if last := served[sessions-1]; 2*last < perSession {
				t.Errorf("session %d: %d of %d first looks at a copy served ahead, want at least half", sessions, last, perSession)
			}
			p, err := pattern.Load(pool)
			if err != nil {
				t.Fatal(err)
			}
			// The pool predicts the first look at a copy from two events,
			// and the write with its path: what kept the write from
			// running is the policy, not a want of predictions.
			across, writes := false, false
			for _, pt := range p.Patterns {
				for _, m := range pt.Args {
					across = across || pt.Tool == "get_file_info" && m.Base != nil && m.Base.From != nil
					writes = writes || pt.Tool == "write_file" && m.Arg == "path"
				}
			}
			if !across || !writes {
				t.Errorf("the pool predicts get_file_info from two events: %v, write_file's path: %v; want both", across, writes)
			}
			// No value the privacy rule keeps out (strings with a digit:
			// the folders, the files' names).
			data, _ := os.ReadFile(pool)
			for _, s := range values {
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
