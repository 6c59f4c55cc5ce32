package main

import (
	"bytes"
	"errors"
	"flag"
	"log/slog"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
)

func TestParseFlagsInterspersed(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		o       string
		k       int
		rest    []string
		usage   bool
		wantErr error
	}{
		{args: []string{"-o", "p.json", "a", "b"}, o: "p.json", rest: []string{"a", "b"}},
		{args: []string{"a", "-o", "p.json", "b"}, o: "p.json", rest: []string{"a", "b"}},
		{args: []string{"a", "b", "-o", "p.json", "--k", "3"}, o: "p.json", k: 3, rest: []string{"a", "b"}},
		{args: []string{"a", "--", "-o", "x"}, rest: []string{"a", "-o", "x"}},
		{args: []string{"-", "-o", "out"}, o: "out", rest: []string{"-"}},
		{args: []string{"a", "-nope"}, usage: true},
		{args: []string{"a", "-h"}, wantErr: flag.ErrHelp},
	} {
		var out bytes.Buffer
		e := &env{stdout: &out, stderr: &out}
		fs := newFlagSet(e, "t", "t", "test")
		o := fs.String("o", "", "")
		k := fs.Int("k", 0, "")
		err := parseFlags(fs, tc.args)
		switch {
		case tc.wantErr != nil:
			if !errors.Is(err, tc.wantErr) {
				t.Errorf("%q: err = %v, want %v", tc.args, err, tc.wantErr)
			}
			continue
		case tc.usage:
			if !errors.Is(err, errUsage) {
				t.Errorf("%q: err = %v, want a usage error", tc.args, err)
			}
			continue
		case err != nil:
			t.Errorf("%q: %v", tc.args, err)
			continue
		}
		if *o != tc.o || *k != tc.k || !slices.Equal(fs.Args(), tc.rest) {
			t.Errorf("%q: o=%q k=%d args=%q; want o=%q k=%d args=%q", tc.args, *o, *k, fs.Args(), tc.o, tc.k, tc.rest)
		}
	}
}

func TestMCPTakesTheUpstreamCommandVerbatim(t *testing.T) {
	var out bytes.Buffer
	e := &env{stdout: &out, stderr: &out}
	fs := newFlagSet(e, "mcp", "mcp", "test")
	trust := fs.Bool("trust-annotations", false, "")
	if err := parseFlagsUntilArg(fs, strings.Fields("--trust-annotations npx -y server --port 1")); err != nil {
		t.Fatal(err)
	}
	if want := strings.Fields("npx -y server --port 1"); !*trust || !slices.Equal(fs.Args(), want) {
		t.Errorf("trust=%v args=%q, want true %q", *trust, fs.Args(), want)
	}
}

// TestWrongFlagOnce: a wrong flag is reported once, on stderr, with the
// usage line; stdout stays empty (issue 14).
func TestWrongFlagOnce(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(t.Context(), &env{stdout: &stdout, stderr: &stderr}, []string{"mine", "--nope", "x"})
	if code != 2 {
		t.Errorf("exit code %d, want 2", code)
	}
	if n := strings.Count(stderr.String(), "flag provided but not defined: -nope"); n != 1 || stdout.Len() != 0 {
		t.Errorf("the error is printed %d times (want 1); stdout %q; stderr:\n%s", n, stdout.String(), stderr.String())
	}
	stdout.Reset()
	if code := run(t.Context(), &env{stdout: &stdout, stderr: &stderr}, []string{"mine", "--help"}); code != 0 || !strings.HasPrefix(stdout.String(), "Usage: ahead mine") {
		t.Errorf("--help: exit %d, stdout %q", code, stdout.String())
	}
}

func TestVersionString(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "a90f4dc0123456789abcdef"}, {Key: "vcs.time", Value: "2026-11-25T10:07:57Z"}, {Key: "vcs.modified", Value: "true"},
	}}
	for _, tc := range []struct {
		read func() (*debug.BuildInfo, bool)
		want string
	}{
		{func() (*debug.BuildInfo, bool) { return bi, true }, "dev (a90f4dc01234 2026-11-25T10:07:57Z, modified; go1.26.0)"},
		{func() (*debug.BuildInfo, bool) {
			return &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v1.2.0"}}, true
		}, "v1.2.0 (go1.26.0)"},
		{func() (*debug.BuildInfo, bool) { return nil, false }, "dev"},
	} {
		if got := versionString(tc.read); got != tc.want {
			t.Errorf("versionString = %q, want %q", got, tc.want)
		}
	}
}

func TestLogLevel(t *testing.T) {
	for _, tc := range []struct {
		flag, env string
		debug     bool
		err       bool
	}{
		{"", "", false, false},
		{"", "debug", true, false},
		{"info", "debug", false, false}, // the flag wins
		{"loud", "", false, true},
	} {
		var out bytes.Buffer
		e := &env{stderr: &out, getenv: func(k string) string { return map[string]string{"AHEAD_LOG": tc.env}[k] }}
		l, err := newLogger(e, tc.flag, "warn")
		if (err != nil) != tc.err {
			t.Errorf("flag %q env %q: err %v", tc.flag, tc.env, err)
			continue
		}
		if err == nil && l.Enabled(t.Context(), slog.LevelDebug) != tc.debug {
			t.Errorf("flag %q env %q: debug enabled %v, want %v", tc.flag, tc.env, !tc.debug, tc.debug)
		}
	}
}
