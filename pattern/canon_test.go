package pattern

import (
	"bytes"
	"testing"

	"github.com/ahead-dev/ahead/callkey"
)

// FuzzCanonicalArgs checks the fast path against callkey: whatever it
// accepts as canonical, callkey encodes to the same bytes.
func FuzzCanonicalArgs(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"a":1,"b":[true,null,"x\n\u0001"],"c":{"d":-0.5e+3}}`, `{"b":1,"a":2}`, `{"a": 1}`,
		`{"a":"\u000a"}`, `{"a":"\/"}`, `{"a":1.}`, `{"a":01}`, `{"a":"é"}`, `{"a\\b":1}`, `{"a":1,"a":2}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := CanonicalArgs(b)
		want, werr := callkey.Canonical(b)
		if (err == nil) != (werr == nil) {
			t.Fatalf("CanonicalArgs(%q) error %v, callkey %v", b, err, werr)
		}
		if err == nil && !bytes.Equal(got, want) {
			t.Fatalf("CanonicalArgs(%q) = %q, callkey says %q", b, got, want)
		}
	})
}
