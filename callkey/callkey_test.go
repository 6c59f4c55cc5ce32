package callkey

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCanonical(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"empty", ``, `{}`},
		{"only whitespace", " \t\r\n", `{}`},
		{"null", `null`, `{}`},
		{"null with space", " null\n", `{}`},
		{"empty object", `{}`, `{}`},
		{"empty object with space", ` { } `, `{}`},
		{"keys sorted", `{"b":1,"a":2,"c":3}`, `{"a":2,"b":1,"c":3}`},
		{"keys sorted by bytes", `{"b":1,"B":2,"é":3,"a":4,"":5}`, `{"":5,"B":2,"a":4,"b":1,"é":3}`},
		{"prefix key first", `{"ab":1,"a":2}`, `{"a":2,"ab":1}`},
		{"nested objects sorted", `{"z":{"y":1,"x":[{"b":1,"a":2}]},"a":null}`, `{"a":null,"z":{"x":[{"a":2,"b":1}],"y":1}}`},
		{"whitespace removed", "{ \"a\" :\t[ 1 ,\r\n2 ] , \"b\":{ } }", `{"a":[1,2],"b":{}}`},
		{"array order kept", `{"a":[3,1,2]}`, `{"a":[3,1,2]}`},
		{"integer kept", `{"n":1}`, `{"n":1}`},
		{"decimal kept", `{"n":1.0}`, `{"n":1.0}`},
		{"exponent kept", `{"n":1e0}`, `{"n":1e0}`},
		{"exponent case kept", `{"n":1E+0}`, `{"n":1E+0}`},
		{"negative zero kept", `{"n":-0}`, `{"n":-0}`},
		{"big int kept", `{"n":123456789012345678901234567890}`, `{"n":123456789012345678901234567890}`},
		{"beyond float64 precision", `{"n":9007199254740993}`, `{"n":9007199254740993}`},
		{"long fraction kept", `{"n":0.10000000000000000000000001}`, `{"n":0.10000000000000000000000001}`},
		{"literals", `{"t":true,"f":false,"n":null}`, `{"f":false,"n":null,"t":true}`},
		{"unicode escape decoded", `{"s":"\u0041"}`, `{"s":"A"}`},
		{"escaped key decoded", `{"\u0062":1,"a":2}`, `{"a":2,"b":1}`},
		{"solidus unescaped", `{"s":"a\/b"}`, `{"s":"a/b"}`},
		{"short escapes", `{"s":"\"\\\n\r\t"}`, `{"s":"\"\\\n\r\t"}`},
		{"b and f as u escapes", `{"s":"\b\f"}`, `{"s":"\u0008\u000c"}`},
		{"control escapes lower hex", `{"s":"\u001F\u0000"}`, `{"s":"\u001f\u0000"}`},
		{"non-ASCII raw", `{"s":"\u00e9\u4e2d"}`, `{"s":"é中"}`},
		{"surrogate pair decoded", `{"s":"\ud83d\ude00"}`, `{"s":"😀"}`},
		{"upper hex surrogate pair", `{"s":"\uD83D\uDE00"}`, `{"s":"😀"}`},
		{"raw emoji kept", `{"s":"😀"}`, `{"s":"😀"}`},
		{"line separator raw", `{"s":"\u2028"}`, "{\"s\":\"\u2028\"}"},
		{"DEL raw", `{"s":"` + "\x7f" + `"}`, "{\"s\":\"\x7f\"}"},
		{"escaped backslash then u", `{"s":"\\ud800"}`, `{"s":"\\ud800"}`},
		{"nested empty array", `{"a":[[],{}]}`, `{"a":[[],{}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Canonical([]byte(tt.in))
			if err != nil {
				t.Fatalf("Canonical(%q): %v", tt.in, err)
			}
			if string(got) != tt.want {
				t.Errorf("Canonical(%q) = %s, want %s", tt.in, got, tt.want)
			}
			again, err := Canonical(got)
			if err != nil || !bytes.Equal(again, got) {
				t.Errorf("Canonical(%s) = %s, %v; want it unchanged", got, again, err)
			}
		})
	}
}

func TestCanonicalRejects(t *testing.T) {
	tests := []struct {
		name, in, wantErr string
	}{
		{"array", `[1,2]`, "must be a JSON object, got an array"},
		{"string", `"a"`, "must be a JSON object, got a string"},
		{"number", `12`, "must be a JSON object, got a number"},
		{"boolean", `true`, "must be a JSON object, got a boolean"},
		{"invalid UTF-8", "{\"s\":\"\xff\"}", "invalid UTF-8 at offset 6"},
		{"truncated UTF-8", "{\"s\":\"\xe4\xb8\"}", "invalid UTF-8"},
		{"UTF-8 encoded surrogate", "{\"s\":\"\xed\xa0\x80\"}", "invalid UTF-8"},
		{"lone high surrogate", `{"s":"\ud800"}`, "lone UTF-16 surrogate escape at offset 6"},
		{"lone low surrogate", `{"s":"\udc00"}`, "lone UTF-16 surrogate"},
		{"high then high", `{"s":"\ud800\ud800"}`, "lone UTF-16 surrogate"},
		{"high then char", `{"s":"\ud800x"}`, "lone UTF-16 surrogate"},
		{"high at end", `{"s":"\ud800`, "lone UTF-16 surrogate"},
		{"lone surrogate in key", `{"\udfff":1}`, "lone UTF-16 surrogate"},
		{"duplicate key", `{"a":1,"a":2}`, `duplicate key "a" in the object at offset 0`},
		{"duplicate key same value", `{"a":1,"b":0,"a":1}`, `duplicate key "a"`},
		{"duplicate key by escape", `{"A":1,"\u0041":2}`, `duplicate key "A"`},
		{"duplicate key nested", `{"x":[{"k":1,"k":1}]}`, `duplicate key "k" in the object at offset 6`},
		{"duplicate key deep", `{"a":{"b":{"c":{"d":1,"d":2}}}}`, `duplicate key "d"`},
		{"NaN", `{"n":NaN}`, "invalid character 'N' looking for the beginning of a value at offset 5"},
		{"Infinity", `{"n":Infinity}`, "invalid character 'I'"},
		{"minus Infinity", `{"n":-Infinity}`, "in a number"},
		{"leading zero", `{"n":01}`, "invalid character '1' after an object member"},
		{"leading plus", `{"n":+1}`, "invalid character '+'"},
		{"bare dot", `{"n":.5}`, "invalid character '.'"},
		{"trailing dot", `{"n":1.}`, "after a decimal point"},
		{"empty exponent", `{"n":1e}`, "in an exponent"},
		{"hex number", `{"n":0x10}`, "invalid character 'x'"},
		{"trailing data", `{} {}`, "trailing data after the JSON value at offset 3"},
		{"trailing garbage", `{}x`, "trailing data"},
		{"trailing NUL", "{}\x00", "trailing data"},
		{"null then data", `null x`, "trailing data"},
		{"nul", `nul`, "in a literal (want null)"},
		{"non-JSON whitespace before", "\f{}", `invalid character '\f'`},
		{"NBSP before", "\u00a0{}", `invalid character '\u00a0'`},
		{"vertical tab inside", "{\v}", `invalid character '\v'`},
		{"unterminated object", `{"a":1`, "unexpected end of JSON input in an object"},
		{"unterminated string", `{"a":"x`, "unexpected end of JSON input in a string"},
		{"unterminated array", `{"a":[1`, "in an array"},
		{"trailing comma object", `{"a":1,}`, "looking for the beginning of an object key"},
		{"trailing comma array", `{"a":[1,]}`, "looking for the beginning of a value"},
		{"missing colon", `{"a" 1}`, "after an object key"},
		{"missing comma", `{"a":1 "b":2}`, "after an object member"},
		{"non-string key", `{1:2}`, "looking for the beginning of an object key"},
		{"single quotes", `{'a':1}`, "invalid character '\\''"},
		{"raw control in string", "{\"a\":\"x\ty\"}", `control character '\t' in a string at offset 7`},
		{"raw newline in key", "{\"a\nb\":1}", "control character"},
		{"bad escape", `{"a":"\x"}`, "in a string escape"},
		{"short u escape", `{"a":"\u12"}`, `invalid \u escape`},
		{"bad hex", `{"a":"\u12g4"}`, `invalid \u escape`},
		{"True capitalised", `{"a":True}`, "invalid character 'T'"},
		{"truncated literal", `{"a":fals}`, "want false"},
		{"comment", `{"a":1 /* c */}`, "invalid character '/'"},
		{"too deep", `{"a":` + strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth) + `}`, "nesting deeper than 512 levels"},
		{"very deep", strings.Repeat(`{"a":`, 100000), "nesting deeper than 512 levels"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Canonical([]byte(tt.in))
			if err == nil {
				t.Fatalf("Canonical(%q) = %s, want an error containing %q", tt.in, got, tt.wantErr)
			}
			if !errors.Is(err, ErrInvalidArgs) {
				t.Errorf("Canonical(%q) error %v does not wrap ErrInvalidArgs", tt.in, err)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Canonical(%q) error = %q, want it to contain %q", tt.in, err, tt.wantErr)
			}
			if _, err := Make("t", []byte(tt.in)); err == nil {
				t.Errorf("Make(t, %q) succeeded, want an error", tt.in)
			}
		})
	}
}

func TestDepthLimit(t *testing.T) {
	// maxDepth containers inside one another are fine, one more is not;
	// the top-level object counts.
	nest := func(n int) string {
		return strings.Repeat(`{"a":`, n-1) + "{}" + strings.Repeat("}", n-1)
	}
	if _, err := Canonical([]byte(nest(maxDepth))); err != nil {
		t.Errorf("%d levels: %v", maxDepth, err)
	}
	if _, err := Canonical([]byte(nest(maxDepth + 1))); err == nil {
		t.Errorf("%d levels: no error", maxDepth+1)
	}
}

func TestCanonicalValue(t *testing.T) {
	tests := []struct{ in, want string }{
		{`"/tmp/x"`, `"/tmp/x"`},
		{` "\u002ftmp" `, `"/tmp"`},
		{`1.50`, `1.50`},
		{`-0`, `-0`},
		{`null`, `null`},
		{`[ 1, {"b":1, "a":2} ]`, `[1,{"a":2,"b":1}]`},
	}
	for _, tt := range tests {
		got, err := CanonicalValue([]byte(tt.in))
		if err != nil || string(got) != tt.want {
			t.Errorf("CanonicalValue(%q) = %s, %v; want %s", tt.in, got, err, tt.want)
		}
	}
	for _, in := range []string{``, ` `, `nul`, `1 2`, `"\ud800"`, `{"a":1,"a":1}`} {
		if got, err := CanonicalValue([]byte(in)); !errors.Is(err, ErrInvalidArgs) {
			t.Errorf("CanonicalValue(%q) = %s, %v; want ErrInvalidArgs", in, got, err)
		}
	}
}

func TestMake(t *testing.T) {
	k1, err := Make("search", []byte(`{"q":"go", "n": 3}`))
	if err != nil {
		t.Fatal(err)
	}
	want := Key{Tool: "search", Args: `{"n":3,"q":"go"}`}
	if k1 != want {
		t.Errorf("Make = %+v, want %+v", k1, want)
	}
	if got := k1.String(); got != `search{"n":3,"q":"go"}` {
		t.Errorf("String() = %q", got)
	}
	k2, _ := Make("search", []byte(`{"n":3,"q":"\u0067o"}`))
	if k1 != k2 || k1.Hash() != k2.Hash() {
		t.Errorf("equal calls got different keys: %v (%x), %v (%x)", k1, k1.Hash(), k2, k2.Hash())
	}
	k3, _ := Make("fetch", []byte(`{"n":3,"q":"go"}`))
	if k1 == k3 || k1.Hash() == k3.Hash() {
		t.Errorf("different tools share a key: %v, %v", k1, k3)
	}
	// The hash separates the tool from the arguments.
	a, b := Key{Tool: "ab", Args: "c"}, Key{Tool: "a", Args: "bc"}
	if a.Hash() == b.Hash() {
		t.Errorf("Hash(%v) == Hash(%v)", a, b)
	}
	if _, err := Make("", []byte(`{}`)); !errors.Is(err, ErrInvalidArgs) {
		t.Errorf("Make with no tool name: %v, want ErrInvalidArgs", err)
	}
	if k, err := Make("t", nil); err != nil || k.Args != "{}" {
		t.Errorf("Make(t, nil) = %v, %v; want args {}", k, err)
	}
}

// TestCanonicalDoesNotAlias checks that results do not share memory with
// the pooled buffers they were built in.
func TestCanonicalDoesNotAlias(t *testing.T) {
	a, _ := Canonical([]byte(`{"b":1,"a":2}`))
	b, _ := Canonical([]byte(`{"x":"yyyyyyyyyyyyyyyy"}`))
	if string(a) != `{"a":2,"b":1}` || string(b) != `{"x":"yyyyyyyyyyyyyyyy"}` {
		t.Errorf("results changed after later calls: %s, %s", a, b)
	}
}

// A jsonValue is a generated JSON value: numbers as literals, objects as
// members with distinct keys. Equal means equal values with equal number
// literals and object members in any order.
type jsonValue struct {
	kind    byte // 'o', 'a', 's', 'n' (number), 'l' (literal)
	text    string
	members []jsonMember
	elems   []jsonValue
}

type jsonMember struct {
	key string
	val jsonValue
}

func (v jsonValue) equal(w jsonValue) bool {
	if v.kind != w.kind || v.text != w.text || len(v.members) != len(w.members) || len(v.elems) != len(w.elems) {
		return false
	}
	for i := range v.elems {
		if !v.elems[i].equal(w.elems[i]) {
			return false
		}
	}
	for _, m := range v.members {
		i := slices.IndexFunc(w.members, func(n jsonMember) bool { return n.key == m.key })
		if i < 0 || !m.val.equal(w.members[i].val) {
			return false
		}
	}
	return true
}

// Small alphabets make equal values common among random draws.
var (
	genKeys    = []string{"a", "b", "é", "A", "a\"b", "\x00", "😀", ""}
	genStrings = []string{"", "x", "X", "\\", "/", "\n", "\u2028", "é", "😀", "\x1f", "\x7f"}
	genNumbers = []string{"0", "-0", "1", "1.0", "1e0", "1E0", "10", "-1", "0.5", "12345678901234567890123"}
	genLits    = []string{"true", "false", "null"}
)

func genValue(r *rand.Rand, depth int) jsonValue {
	k := r.IntN(6)
	if depth > 3 {
		k = 2 + r.IntN(3)
	}
	switch k {
	case 0:
		v := jsonValue{kind: 'o'}
		for _, i := range r.Perm(len(genKeys))[:r.IntN(3)] {
			v.members = append(v.members, jsonMember{genKeys[i], genValue(r, depth+1)})
		}
		return v
	case 1:
		v := jsonValue{kind: 'a'}
		for range r.IntN(3) {
			v.elems = append(v.elems, genValue(r, depth+1))
		}
		return v
	case 2:
		return jsonValue{kind: 's', text: genStrings[r.IntN(len(genStrings))]}
	case 3:
		return jsonValue{kind: 'n', text: genNumbers[r.IntN(len(genNumbers))]}
	default:
		return jsonValue{kind: 'l', text: genLits[r.IntN(len(genLits))]}
	}
}

func genObject(r *rand.Rand) jsonValue {
	for {
		if v := genValue(r, 0); v.kind == 'o' {
			return v
		}
	}
}

// write serialises v in one of the many ways JSON allows: any member
// order, any whitespace, any escaping.
func (v jsonValue) write(r *rand.Rand, b *strings.Builder) {
	space := func() {
		for range r.IntN(3) {
			b.WriteByte(" \t\r\n"[r.IntN(4)])
		}
	}
	space()
	switch v.kind {
	case 'o':
		b.WriteByte('{')
		space()
		for n, i := range r.Perm(len(v.members)) {
			if n > 0 {
				b.WriteByte(',')
			}
			space()
			writeString(r, b, v.members[i].key)
			space()
			b.WriteByte(':')
			v.members[i].val.write(r, b)
		}
		b.WriteByte('}')
	case 'a':
		b.WriteByte('[')
		space()
		for i, e := range v.elems {
			if i > 0 {
				b.WriteByte(',')
			}
			e.write(r, b)
		}
		b.WriteByte(']')
	case 's':
		writeString(r, b, v.text)
	default:
		b.WriteString(v.text)
	}
	space()
}

func writeString(r *rand.Rand, b *strings.Builder, s string) {
	b.WriteByte('"')
	for _, c := range s {
		mustEscape := c == '"' || c == '\\' || c < 0x20
		switch {
		case r.IntN(3) == 0 && c >= 0x10000:
			hi, lo := (c-0x10000)>>10+0xd800, (c-0x10000)&0x3ff+0xdc00
			fmt.Fprintf(b, `\u%04x\u%04X`, hi, lo)
		case c < 0x10000 && (r.IntN(3) == 0 || mustEscape && c != '"' && c != '\\'):
			fmt.Fprintf(b, `\u%04x`, c)
		case c == '/' && r.IntN(2) == 0:
			b.WriteString(`\/`)
		case mustEscape:
			b.WriteByte('\\')
			b.WriteRune(c)
		default:
			b.WriteRune(c)
		}
	}
	b.WriteByte('"')
}

func (v jsonValue) String() string {
	var b strings.Builder
	v.write(rand.New(rand.NewPCG(0, 0)), &b)
	return b.String()
}

// TestKeyEquality is the defining property of call keys: two argument
// texts get equal keys if and only if they are the same JSON value with
// the same number literals, however they are written.
func TestKeyEquality(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const n = 600
	values := make([]jsonValue, n)
	keys := make([]Key, n)
	for i := range values {
		values[i] = genObject(r)
		var b1, b2 strings.Builder
		values[i].write(r, &b1)
		values[i].write(r, &b2)
		k1, err := Make("t", []byte(b1.String()))
		if err != nil {
			t.Fatalf("Make(%q): %v", b1.String(), err)
		}
		k2, err := Make("t", []byte(b2.String()))
		if err != nil {
			t.Fatalf("Make(%q): %v", b2.String(), err)
		}
		if k1 != k2 {
			t.Fatalf("two spellings of one value got different keys:\n%q -> %s\n%q -> %s", b1.String(), k1.Args, b2.String(), k2.Args)
		}
		keys[i] = k1
		// The canonical text must mean what the input meant.
		if got := decode(t, []byte(k1.Args)); !cmp.Equal(got, decode(t, []byte(b1.String()))) {
			t.Fatalf("canonical %s of %q decodes differently", k1.Args, b1.String())
		}
	}
	equalPairs := 0 // of non-empty objects
	for i := range values {
		for j := i + 1; j < n; j++ {
			eq := values[i].equal(values[j])
			if eq && len(values[i].members) > 0 {
				equalPairs++
			}
			if got := keys[i] == keys[j]; got != eq {
				t.Errorf("values %s and %s: keys equal = %v, values equal = %v", values[i], values[j], got, eq)
			}
		}
	}
	// Guard against a generator that never produces equal values, which
	// would leave the "if" direction untested.
	if equalPairs < 40 {
		t.Errorf("only %d equal pairs of non-empty objects generated; make the generator's alphabet smaller", equalPairs)
	}
}

// decode parses JSON with numbers kept as their literal text.
func decode(t testing.TB, data []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decoding %q: %v", data, err)
	}
	return v
}

var benchArgs = map[string]string{
	"small sorted":   `{"max_results":10,"query":"golang canonical json"}`,
	"small unsorted": `{"query": "golang canonical json", "max_results": 10}`,
	"nested": `{"query":"golang canonical json","max_results":10,` +
		`"filters":{"site":"go.dev","lang":["en","fr"],"after":"2024-01-01"},"page":{"size":20,"offset":40}}`,
	"bash command": `{"command":"cd /testbed && grep -rn \"def canonical\" --include=*.py src/ | head -50\n"}`,
}

func BenchmarkMake(b *testing.B) {
	for _, name := range slices.Sorted(maps.Keys(benchArgs)) {
		args := []byte(benchArgs[name])
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(args)))
			for b.Loop() {
				if _, err := Make("web_search", args); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	// The reference implementation (encoding/json's tokenizer), for
	// comparison: why this package has its own parser.
	args := []byte(benchArgs["nested"])
	b.Run("nested/encoding_json_reference", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(args)))
		for b.Loop() {
			if _, err := refCanonical(args); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkCanonicalLarge(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(`{"items":[`)
	for i := range 200 {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"z":%d,"name":"item \"%d\" \u00e9","tags":["a","b"],"price":%d.99}`, i, i, i)
	}
	sb.WriteString(`]}`)
	args := []byte(sb.String())
	b.ReportAllocs()
	b.SetBytes(int64(len(args)))
	for b.Loop() {
		if _, err := Canonical(args); err != nil {
			b.Fatal(err)
		}
	}
}
