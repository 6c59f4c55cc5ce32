package callkey

// The fuzz targets of the JSON toolkit, with their one corpus
// (testdata/fuzz): the canonical encoder against an encoding/json
// reference, the fast paths that skip it against the encoder, and the
// forgiving scanner of internal/rawjson against encoding/json.

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/ahead-dev/ahead/internal/rawjson"
)

func FuzzCanonical(f *testing.F) {
	for _, s := range []string{
		``, `null`, `{}`, `{"a":1}`, `{"b":[1,2.0,-0,1e5],"a":{"y":null,"x":true}}`,
		`{"s":"\u0041\ud83d\ude00\n\"\\\/"}`, `{"a":1,"a":2}`, `{"s":"\ud800"}`, "{\"s\":\"\xff\"}",
		`[1]`, `{"n":NaN}`, `{} x`, `{"a":[[[[[]]]]]}`, ` { "k" : "v" } `, `{"é":"中","":0}`,
		`{"a":1 , "b" :[ ] ,"c":{}}`, `{"a":12345678901234567890123}`, "\f{}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		got, err := Canonical(in)
		want, refErr := refCanonical(in)
		if (err == nil) != (refErr == nil) {
			t.Fatalf("Canonical(%q) error = %v, reference error = %v", in, err, refErr)
		}
		if err != nil {
			if !errors.Is(err, ErrInvalidArgs) {
				t.Fatalf("Canonical(%q) error %v does not wrap ErrInvalidArgs", in, err)
			}
			return
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("Canonical(%q) = %s, reference = %s", in, got, want)
		}
		if !json.Valid(got) || !utf8.Valid(got) {
			t.Fatalf("Canonical(%q) = %q is not valid JSON", in, got)
		}
		again, err := Canonical(got)
		if err != nil || !bytes.Equal(again, got) {
			t.Fatalf("Canonical(%s) = %s, %v; want it unchanged", got, again, err)
		}
		if len(bytes.Trim(in, " \t\r\n")) > 0 && string(bytes.Trim(in, " \t\r\n")) != "null" {
			if !cmp.Equal(decode(t, got), decode(t, in)) {
				t.Fatalf("Canonical(%q) = %s decodes to a different value", in, got)
			}
		}
	})
}

// FuzzCanonicalView checks the fast path against Canonical: whatever the
// scan accepts as canonical, Canonical encodes to the same bytes.
func FuzzCanonicalView(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"a":1,"b":[true,null,"x\n\u0001"],"c":{"d":-0.5e+3}}`, `{"b":1,"a":2}`, `{"a": 1}`,
		`{"a":"\u000a"}`, `{"a":"\/"}`, `{"a":1.}`, `{"a":01}`, `{"a":"é"}`, `{"a\\b":1}`, `{"a":1,"a":2}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := CanonicalView(b)
		want, werr := Canonical(b)
		if (err == nil) != (werr == nil) {
			t.Fatalf("CanonicalView(%q) error %v, Canonical %v", b, err, werr)
		}
		if err == nil && !bytes.Equal(got, want) {
			t.Fatalf("CanonicalView(%q) = %q, Canonical says %q", b, got, want)
		}
	})
}

// FuzzCanonicalValueView checks the fast path against CanonicalValue.
func FuzzCanonicalValueView(f *testing.F) {
	for _, s := range []string{
		`{"b": [1, {"d": "x\u00e9", "c": null}], "a": true}`, `[ "\ud83d\ude00", 1e5, -0 ]`, `"\ud800"`, `{"a":1,"a":2}`,
		`{"a" 1}`, `[1,]`, `{"\u0062":1,"a":2}`, "\"\xff\"", `{"a":{"b":{"c":[[]]}}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, gerr := CanonicalValueView(b)
		want, err := CanonicalValue(bytes.TrimSpace(b))
		if (gerr == nil) != (err == nil) {
			t.Fatalf("CanonicalValueView(%q) error %v, CanonicalValue error %v", b, gerr, err)
		}
		if err == nil && !bytes.Equal(got, want) {
			t.Fatalf("CanonicalValueView(%q) = %q, CanonicalValue says %q", b, got, want)
		}
	})
}

// FuzzUnquote checks rawjson's string decoder against encoding/json.
func FuzzUnquote(f *testing.F) {
	for _, s := range []string{`"a"`, `"a\nb\"c\\d\/e\u00e9\ud83d\ude00"`, `"\ud800"`, `"\ud800\u0041"`, `"\x"`, `"é"`, `"\u12"`, "\"\x01\""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, ok := rawjson.Unquote(raw)
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

func TestCanonicalValueView(t *testing.T) {
	tests := []struct{ in, want string }{
		{`"plain"`, `"plain"`},
		{`"\u0041\/"`, `"A/"`},
		{` 1.50 `, `1.50`},
		{`{"b": 1, "a": [ 2 ]}`, `{"a":[2],"b":1}`},
		{`true`, `true`},
	}
	for _, tt := range tests {
		got, err := CanonicalValueView([]byte(tt.in))
		if err != nil || string(got) != tt.want {
			t.Errorf("CanonicalValueView(%s) = %s, %v; want %s", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{``, `{"a":1,"a":2}`, `nul`, `"unterminated`} {
		if _, err := CanonicalValueView([]byte(bad)); err == nil {
			t.Errorf("CanonicalValueView(%q) accepted", bad)
		}
	}
	if got := rawjson.Quoted("a\"b\\c\n\x01é"); got != `"a\"b\\c\n\u0001é"` {
		t.Errorf("quoted = %s", got)
	}
}
