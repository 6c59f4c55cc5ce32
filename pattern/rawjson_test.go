package pattern

import (
	"encoding/json"
	"testing"
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
		steps, ok := parsePointer(tt.path)
		if !ok {
			t.Fatalf("parsePointer(%q) failed", tt.path)
		}
		got, ok := lookup(doc, steps)
		if ok != tt.ok || (ok && string(got) != tt.want) {
			t.Errorf("lookup(%q) = %q, %v; want %q, %v", tt.path, got, ok, tt.want, tt.ok)
		}
	}
	if p := pointer([]string{"a/b", "~", "0"}); p != "/a~1b/~0/0" {
		t.Errorf("pointer = %q", p)
	}
	// Malformed input is "not found", never a panic.
	for _, bad := range []string{`{"a":`, `{"a" 1}`, `[1,`, `"\`, `{`, `]`} {
		if _, ok := lookup([]byte(bad), []string{"a", "1"}); ok {
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
		got, ok := canonValue([]byte(tt.in))
		if !ok || string(got) != tt.want {
			t.Errorf("canonValue(%s) = %s, %v; want %s", tt.in, got, ok, tt.want)
		}
	}
	for _, bad := range []string{``, `{"a":1,"a":2}`, `nul`, `"unterminated`} {
		if _, ok := canonValue([]byte(bad)); ok {
			t.Errorf("canonValue(%q) accepted", bad)
		}
	}
	if got := quoted("a\"b\\c\n\x01é"); got != `"a\"b\\c\n\u0001é"` {
		t.Errorf("quoted = %s", got)
	}
}

func TestText(t *testing.T) {
	s := "first line\n  second: src/a.py:74:def f():  \n\nlast one\n\n"
	for _, tt := range []struct {
		n    int
		want string
		ok   bool
	}{{0, "first line", true}, {1, "second: src/a.py:74:def f():", true}, {2, "", true}, {3, "last one", true}, {4, "", false}, {-1, "last one", true}, {-3, "second: src/a.py:74:def f():", true}, {-5, "", false}} {
		got, ok := lineAt(s, tt.n)
		if got != tt.want || ok != tt.ok {
			t.Errorf("lineAt(%d) = %q, %v; want %q, %v", tt.n, got, ok, tt.want, tt.ok)
		}
	}
	if n := lineCount(s); n != 4 {
		t.Errorf("lineCount = %d, want 4", n)
	}
	line := "second: src/a.py:74:def f():"
	for _, tt := range []struct {
		n    int
		want string
	}{{0, "second"}, {1, "src/a.py"}, {2, "74"}, {-1, "f"}, {-2, "def"}} {
		if got, ok := tokenAt(line, tt.n); !ok || got != tt.want {
			t.Errorf("tokenAt(%d) = %q, %v; want %q", tt.n, got, ok, tt.want)
		}
	}
	if _, ok := tokenAt(line, 9); ok {
		t.Error("tokenAt past the end succeeded")
	}
	for norm, want := range map[string]string{NormLower: "./src/a.py", NormClean: "src/A.py", NormBase: "A.py", NormDir: "src"} {
		if got, _ := normalize("./src/A.py", norm); got != want && !(norm == NormLower && got == "./src/a.py") {
			t.Errorf("normalize(%s) = %q, want %q", norm, got, want)
		}
	}
}

// FuzzUnquote checks the hand-written string decoder against
// encoding/json.
func FuzzUnquote(f *testing.F) {
	for _, s := range []string{`"a"`, `"a\nb\"c\\d\/e\u00e9\ud83d\ude00"`, `"\ud800"`, `"\ud800\u0041"`, `"\x"`, `"é"`, `"\u12"`, "\"\x01\""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, ok := unquote(raw)
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
