package rawjson

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/ahead-dev/ahead/callkey"
)

func TestLookup(t *testing.T) {
	doc := []byte(` {"a": {"b": [10, {"c": "x\"y"}, [true]]}, "s": "{\"inner\": [1, 2]}", "k~/": 5, "esc\u0061": 6} `)
	tests := []struct {
		path string
		want string
		ok   bool
	}{
		{"", string(doc[1 : len(doc)-1]), true},
		{"/a/b/0", "10", true},
		{"/a/b/1/c", `"x\"y"`, true},
		{"/a/b/2/0", "true", true},
		{"/a/b/3", "", false},
		{"/a/b/-1", "", false},
		{"/a/x", "", false},
		{"/s/inner/1", "2", true}, // a JSON document inside a string
		{"/k~0~1", "5", true},
		{"/esca", "6", true}, // an escaped key
		{"/a/b/0/z", "", false},
	}
	for _, tt := range tests {
		steps, ok := ParsePointer(tt.path)
		if !ok {
			t.Fatalf("parsePointer(%q) failed", tt.path)
		}
		got, ok := Lookup(doc, steps)
		if ok != tt.ok || (ok && string(got) != tt.want) {
			t.Errorf("lookup(%q) = %q, %v; want %q, %v", tt.path, got, ok, tt.want, tt.ok)
		}
	}
	if p := Pointer([]string{"a/b", "~", "0"}); p != "/a~1b/~0/0" {
		t.Errorf("pointer = %q", p)
	}
	// Malformed input is "not found", never a panic.
	for _, bad := range []string{`{"a":`, `{"a" 1}`, `[1,`, `"\`, `{`, `]`} {
		if _, ok := Lookup([]byte(bad), []string{"a", "1"}); ok {
			t.Errorf("lookup in %q found something", bad)
		}
	}
}

func TestCanonValue(t *testing.T) {
	tests := []struct{ in, want string }{
		{`"plain"`, `"plain"`},
		{`"\u0041\/"`, `"A/"`},
		{` 1.50 `, `1.50`},
		{`{"b": 1, "a": [ 2 ]}`, `{"a":[2],"b":1}`},
		{`true`, `true`},
	}
	for _, tt := range tests {
		got, ok := CanonValue([]byte(tt.in))
		if !ok || string(got) != tt.want {
			t.Errorf("canonValue(%s) = %s, %v; want %s", tt.in, got, ok, tt.want)
		}
	}
	for _, bad := range []string{``, `{"a":1,"a":2}`, `nul`, `"unterminated`} {
		if _, ok := CanonValue([]byte(bad)); ok {
			t.Errorf("canonValue(%q) accepted", bad)
		}
	}
	if got := Quoted("a\"b\\c\n\x01é"); got != `"a\"b\\c\n\u0001é"` {
		t.Errorf("quoted = %s", got)
	}
}

// FuzzUnquote checks the hand-written string decoder against
// encoding/json.
func FuzzUnquote(f *testing.F) {
	for _, s := range []string{`"a"`, `"a\nb\"c\\d\/e\u00e9\ud83d\ude00"`, `"\ud800"`, `"\ud800\u0041"`, `"\x"`, `"é"`, `"\u12"`, "\"\x01\""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, ok := Unquote(raw)
		var want string
		err := json.Unmarshal(raw, &want)
		if len(raw) < 2 || raw[0] != '"' {
			return
		}
		if ok && err == nil && got != want {
			t.Fatalf("unquote(%q) = %q, encoding/json says %q", raw, got, want)
		}
		if ok && err != nil {
			t.Fatalf("unquote(%q) accepted what encoding/json rejects (%v)", raw, err)
		}
	})
}

// FuzzCanonValue checks the value encoder against callkey's.
func FuzzCanonValue(f *testing.F) {
	for _, s := range []string{
		`{"b": [1, {"d": "x\u00e9", "c": null}], "a": true}`, `[ "\ud83d\ude00", 1e5, -0 ]`, `"\ud800"`, `{"a":1,"a":2}`,
		`{"a" 1}`, `[1,]`, `{"\u0062":1,"a":2}`, "\"\xff\"", `{"a":{"b":{"c":[[]]}}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, ok := CanonValue(b)
		want, err := callkey.CanonicalValue(bytes.TrimSpace(b))
		if ok != (err == nil) {
			t.Fatalf("CanonValue(%q) ok=%v, callkey error %v", b, ok, err)
		}
		if ok && !bytes.Equal(got, want) {
			t.Fatalf("CanonValue(%q) = %q, callkey says %q", b, got, want)
		}
	})
}
