package rawjson

import "testing"

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
