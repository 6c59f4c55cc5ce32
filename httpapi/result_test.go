package httpapi

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/ahead-dev/ahead/engine"
	"github.com/ahead-dev/ahead/trace"
)

func TestAppendResult(t *testing.T) {
	for _, tc := range []struct {
		res  engine.Result
		want string
	}{
		{engine.Result{Tool: "read", Status: trace.StatusOK, Output: "{\n  \"a\": [1, 2.50e3],\n  \"b\": \"<x>\"\n}", Source: engine.Reused, Saved: 1500 * time.Microsecond, Seq: 3},
			`{"tool":"read","status":"ok","output":{"a":[1,2.50e3],"b":"<x>"},"source":"reused","saved_ms":1.5,"seq":3}`},
		{engine.Result{Tool: "sh", Status: trace.StatusError, Output: "exit 1\n\t\"quoted\" \\ \x01 é \xff", Source: engine.Executed},
			`{"tool":"sh","status":"error","output":"exit 1\n\t\"quoted\" \\ \u0001 é \ufffd","source":"executed","saved_ms":0,"seq":0}`},
		{engine.Result{Tool: "t\"", Output: "", Source: engine.Promoted, Saved: time.Second},
			`{"tool":"t\"","status":"","output":"","source":"promoted","saved_ms":1000,"seq":0}`},
		{engine.Result{Tool: "n", Output: " null ", Source: engine.Executed},
			`{"tool":"n","status":"","output":null,"source":"executed","saved_ms":0,"seq":0}`},
		{engine.Result{Tool: "bad", Output: `{"a": 1`, Source: engine.Executed},
			`{"tool":"bad","status":"","output":"{\"a\": 1","source":"executed","saved_ms":0,"seq":0}`},
		{engine.Result{Tool: "latin1 in json", Output: "\"\xe9\"", Source: engine.Executed},
			`{"tool":"latin1 in json","status":"","output":"\"\ufffd\"","source":"executed","saved_ms":0,"seq":0}`},
	} {
		got := string(appendResult(nil, tc.res))
		if got != tc.want+"\n" {
			t.Errorf("appendResult(%+v) =\n%s\nwant\n%s", tc.res, got, tc.want)
		}
	}
}

// FuzzAppendOutput checks the hand-written encoding against encoding/json:
// the answer is always valid JSON; a string decodes to what encoding/json
// would have sent; a valid JSON output decodes to the same value.
func FuzzAppendOutput(f *testing.F) {
	for _, s := range []string{``, `{"a":1}`, ` [1, "x"] `, "plain\ntext", "\xff\xfe", `"str"`, "\u2028<&>", "1e999", `{"a":1}{`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, out string) {
		b := appendOutput([]byte("x"), out)[1:]
		if !json.Valid(b) {
			t.Fatalf("appendOutput(%q) = %s, not JSON", out, b)
		}
		got, err := decodeExact(b)
		if err != nil {
			t.Fatal(err)
		}
		var want any
		if !json.Valid([]byte(out)) || !utf8.ValidString(out) {
			std, _ := json.Marshal(out)
			want, _ = decodeExact(std)
		} else if want, err = decodeExact([]byte(out)); err != nil {
			t.Fatalf("appendOutput(%q) = %s, a JSON value, but the output is not JSON: %v", out, b, err)
		}
		gb, _ := json.Marshal(got)
		wb, _ := json.Marshal(want)
		if !bytes.Equal(gb, wb) {
			t.Fatalf("appendOutput(%q) = %s, decodes to %s, want %s", out, b, gb, wb)
		}
	})
}

// decodeExact decodes JSON keeping numbers as written.
func decodeExact(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	return v, err
}
