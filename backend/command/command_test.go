//go:build unix

package command

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ahead-dev/ahead/backend"
)

// script writes a /bin/sh script to a temporary file and returns its path.
func script(t testing.TB, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tool.sh")
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestCall(t *testing.T) {
	big := bytes.Repeat([]byte(`{"k":"0123456789abcdef"},`), 50000) // 1.25 MB: more than a pipe holds
	bigArgs := append(append([]byte(`{"a":[`), big[:len(big)-1]...), "]}"...)
	dir := t.TempDir()
	dir, _ = filepath.EvalSymlinks(dir)
	tests := []struct {
		name  string
		body  string   // the script
		extra []string // arguments after the script
		opts  Options
		req   backend.Request
		want  backend.Response
	}{
		{name: "stdin to stdout", body: `exec cat`,
			req:  backend.Request{Tool: "echo", Args: []byte(`{"q":"x"}`)},
			want: backend.Response{Output: `{"q":"x"}`}},
		{name: "no args is an empty object", body: `exec cat`,
			req:  backend.Request{Tool: "echo"},
			want: backend.Response{Output: `{}`}},
		{name: "tool in argv", body: `printf '%s|%s' "$1" "$2"`, extra: []string{"{tool}", "--name={tool}"},
			req:  backend.Request{Tool: "get_user.v2-x"},
			want: backend.Response{Output: "get_user.v2-x|--name=get_user.v2-x"}},
		{name: "tool and session in env", body: `printf '%s %s' "$AHEAD_TOOL" "$AHEAD_SESSION"`,
			req:  backend.Request{Tool: "a b", Session: "s-1"},
			want: backend.Response{Output: "a b s-1"}},
		{name: "speculative marked in env", body: `printf '%s|%s' "$AHEAD_SPECULATIVE" "${AHEAD_SPECULATIVE-unset}"`,
			req:  backend.Request{Tool: "t", Speculative: true},
			want: backend.Response{Output: "1|1"}},
		{name: "authoritative not marked", body: `printf '%s' "${AHEAD_SPECULATIVE-unset}"`,
			req:  backend.Request{Tool: "t"},
			want: backend.Response{Output: "unset"}},
		{name: "stderr ignored on success", body: "echo ok; echo warning >&2",
			want: backend.Response{Output: "ok\n"}},
		{name: "non-zero exit", body: "printf partial; echo oops >&2; exit 3",
			want: backend.Response{IsError: true, Output: "partial\nexit status 3\noops\n"}},
		{name: "non-zero exit without output", body: "exit 1",
			want: backend.Response{IsError: true, Output: "exit status 1"}},
		{name: "killed by a signal", body: "kill -9 $$",
			want: backend.Response{IsError: true, Output: "killed by signal killed"}},
		{name: "stderr tail", body: `i=0; while [ $i -lt 100 ]; do echo "line $i" >&2; i=$((i+1)); done; exit 2`,
			opts: Options{MaxStderrBytes: 20},
			want: backend.Response{IsError: true, Output: "exit status 2\n(770 earlier bytes of standard error left out)\n 97\nline 98\nline 99\n"}},
		{name: "stderr tail on a character boundary", body: `printf 'aé€€' >&2; exit 2`,
			opts: Options{MaxStderrBytes: 5},
			want: backend.Response{IsError: true, Output: "exit status 2\n(6 earlier bytes of standard error left out)\n€"}},
		{name: "output over the limit kills the command", body: `exec yes`,
			opts: Options{MaxOutputBytes: 1000},
			want: backend.Response{IsError: true, Output: "output over the 1000-byte limit; command killed"}},
		{name: "output exactly at the limit", body: `head -c 1000 /dev/zero | tr '\0' x`,
			opts: Options{MaxOutputBytes: 1000},
			want: backend.Response{Output: strings.Repeat("x", 1000)}},
		{name: "large input echoed", body: `exec cat`,
			req:  backend.Request{Tool: "echo", Args: bigArgs},
			want: backend.Response{Output: string(bigArgs)}},
		{name: "large input not read", body: `echo done`,
			req:  backend.Request{Tool: "t", Args: bigArgs},
			want: backend.Response{Output: "done\n"}},
		{name: "working directory", body: `pwd`, opts: Options{Dir: dir},
			want: backend.Response{Output: dir + "\n"}},
		{name: "environment replaced", body: `printf '%s-%s' "$FOO" "$HOME"`, opts: Options{Env: []string{"FOO=bar"}},
			want: backend.Response{Output: "bar-"}},
		{name: "background child holding stdout", body: `sleep 1000 & echo started`,
			want: backend.Response{Output: "started\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := New(append([]string{script(t, tt.body)}, tt.extra...), &tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			req := tt.req
			if req.Tool == "" {
				req.Tool = "t"
			}
			got, err := b.Call(t.Context(), req)
			if err != nil {
				t.Fatalf("Call: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				if len(diff) > 2000 {
					diff = diff[:2000] + "…"
				}
				t.Errorf("Call mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCallTimeout(t *testing.T) {
	b, err := New([]string{script(t, "sleep 1000")}, &Options{Timeout: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.Call(t.Context(), backend.Request{Tool: "slow"})
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("Call = %v, want ErrTimeout", err)
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		t.Errorf("a timeout must not look like the caller's context ending: %v", err)
	}
	if !strings.Contains(err.Error(), "slow: no result within 20ms") {
		t.Errorf("error %q does not name the tool and the timeout", err)
	}
}

func TestCallContextAlreadyDone(t *testing.T) {
	b, err := New([]string{script(t, "echo ran")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := b.Call(ctx, backend.Request{Tool: "t"}); err != context.Canceled {
		t.Errorf("Call with a cancelled context = %v, want context.Canceled", err)
	}
}

func TestNew(t *testing.T) {
	if _, err := New(nil, nil); err == nil {
		t.Error("New(nil) succeeded")
	}
	if _, err := New([]string{""}, nil); err == nil {
		t.Error(`New("") succeeded`)
	}
	if _, err := New([]string{"ahead-no-such-command-xyz"}, nil); err == nil || !strings.Contains(err.Error(), "executable file not found") {
		t.Errorf("New(missing command) = %v", err)
	}
	if _, err := New([]string{"sh", "-c", "cat"}, nil); err != nil {
		t.Errorf("New(sh from PATH) = %v", err)
	}
	// A command chosen by tool name is looked up per call.
	b, err := New([]string{filepath.Join(t.TempDir(), "{tool}")}, nil)
	if err != nil {
		t.Fatalf("New with {tool} in the command: %v", err)
	}
	if _, err := b.Call(t.Context(), backend.Request{Tool: "missing"}); err == nil {
		t.Error("Call of a missing command succeeded")
	}
}

func TestToolNames(t *testing.T) {
	b, err := New([]string{script(t, `printf %s "$1"`), "{tool}"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"", "..", ".hidden", "-rf", "--help", "a b", "a;rm -rf x", "a/b", "$(id)", "a\nb", "é", strings.Repeat("x", 129)} {
		if resp, err := b.Call(t.Context(), backend.Request{Tool: name}); err == nil {
			t.Errorf("tool name %q was put on the command line: %+v", name, resp)
		}
	}
	for _, name := range []string{"get_user", "a.b-c", "X9", "_x", strings.Repeat("x", 128)} {
		if resp, err := b.Call(t.Context(), backend.Request{Tool: name}); err != nil || resp.Output != name {
			t.Errorf("tool name %q: %+v, %v", name, resp, err)
		}
	}
}

func BenchmarkCall(b *testing.B) {
	be, err := New([]string{"cat"}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer be.Close()
	req := backend.Request{Tool: "echo", Args: []byte(`{"max_results":10,"query":"golang canonical json"}`)}
	b.ReportAllocs()
	for b.Loop() {
		if resp, err := be.Call(b.Context(), req); err != nil || resp.IsError {
			b.Fatal(resp, err)
		}
	}
}
