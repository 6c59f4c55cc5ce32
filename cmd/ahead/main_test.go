package main

import (
	"bytes"
	"errors"
	"flag"
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
