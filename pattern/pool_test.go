package pattern

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDecodeErrors(t *testing.T) {
	valid := `{"version":1,"mined":{"max_context":3,"min_support":3,"min_confidence":0.05,"sessions":1,"calls":2},"discriminators":[],"patterns":[%s]}`
	pat := func(s string) string { return strings.Replace(valid, "%s", s, 1) }
	tests := []struct {
		name, data string
		err        error
		msg        string
	}{
		{"not json", "{", ErrInvalid, ""},
		{"no version", `{"patterns":[]}`, ErrInvalid, "no version"},
		{"other version", `{"version":99}`, ErrVersion, "99"},
		{"unknown field", `{"version":1,"bogus":1}`, ErrInvalid, "bogus"},
		{"empty context", pat(`{"context":[],"tool":"t","hits":[1]}`), ErrInvalid, "patterns[0]"},
		{"soon ranks", pat(`{"context":[{"tool":"a"}],"tool":"t","support":2,"hits":[1],"soon":[1,1]}`), ErrInvalid, "soon has 2 ranks"},
		{"soon above support", pat(`{"context":[{"tool":"a"}],"tool":"t","support":2,"hits":[1],"soon":[3]}`), ErrInvalid, "soon: counts out of range"},
		{"horizon", strings.Replace(pat(""), `"calls":2`, `"calls":2,"horizon":65`, 1), ErrInvalid, "mined.horizon 65"},
		{"start not first", pat(`{"context":[{"tool":"a"},{"start":true},{"tool":"b"}],"tool":"t","hits":[1]}`), ErrInvalid, "start"},
		{"no tool", pat(`{"context":[{"tool":"a"}],"tool":"","hits":[1]}`), ErrInvalid, "empty tool"},
		{"no hits", pat(`{"context":[{"tool":"a"}],"tool":"t","hits":[]}`), ErrInvalid, "hits"},
		{"negative", pat(`{"context":[{"tool":"a"}],"tool":"t","hits":[-1]}`), ErrInvalid, "negative"},
		{"ctx out of range", pat(`{"context":[{"tool":"a"}],"tool":"t","exact":true,"args":[{"arg":"x","from":{"ctx":3},"part":"args","path":"/x"}],"hits":[1]}`), ErrInvalid, "ctx 3"},
		{"item without list", pat(`{"context":[{"tool":"a"}],"tool":"t","exact":true,"args":[{"arg":"x","part":"item"}],"hits":[1]}`), ErrInvalid, "list"},
		{"bad part", pat(`{"context":[{"tool":"a"}],"tool":"t","exact":true,"args":[{"arg":"x","from":{"ctx":0},"part":"body"}],"hits":[1]}`), ErrInvalid, "part"},
		{"bad pointer", pat(`{"context":[{"tool":"a"}],"tool":"t","exact":true,"args":[{"arg":"x","from":{"ctx":0},"part":"args","path":"x"}],"hits":[1]}`), ErrInvalid, "pointer"},
		{"bad const", pat(`{"context":[{"tool":"a"}],"tool":"t","exact":true,"args":[{"arg":"x","const":{"a":1,"a":2}}],"hits":[1]}`), ErrInvalid, "const"},
		{"unsorted args", pat(`{"context":[{"tool":"a"}],"tool":"t","exact":true,"args":[{"arg":"y","const":1},{"arg":"x","const":1}],"hits":[1]}`), ErrInvalid, "sorted"},
		{"repeats", pat(`{"context":[{"tool":"a"}],"tool":"t","hits":[1],"support":2,"repeats":2,"repeat_hits":3}`), ErrInvalid, "repeats"},
		{"nth without sig", pat(`{"context":[{"tool":"a"}],"tool":"t","exact":true,"args":[{"arg":"x","from":{"ctx":0,"nth":1},"part":"args","path":"/x"}],"hits":[1]}`), ErrInvalid, "nth needs a signature"},
		{"nth out of range", pat(`{"context":[{"tool":"a"}],"tool":"t","exact":true,"args":[{"arg":"x","from":{"ctx":0,"sig":{"tool":"a"},"nth":8},"part":"args","path":"/x"}],"hits":[1]}`), ErrInvalid, "nth 8"},
		{"negative nth", pat(`{"context":[{"tool":"a"}],"tool":"t","exact":true,"args":[{"arg":"x","from":{"ctx":0,"sig":{"tool":"a"},"nth":-1},"part":"args","path":"/x"}],"hits":[1]}`), ErrInvalid, "nth -1"},
		{"every with nth", pat(`{"context":[{"tool":"a"}],"tool":"t","exact":true,"list":{"from":{"ctx":0,"sig":{"tool":"a"},"nth":1},"part":"output","path":"","every":true},"args":[{"arg":"x","part":"item"}],"hits":[1]}`), ErrInvalid, "every"},
		{"bad norm", pat(`{"context":[{"tool":"a"}],"tool":"t","exact":true,"args":[{"arg":"x","from":{"ctx":0},"part":"args","norm":"rot13"}],"hits":[1]}`), ErrInvalid, "norm"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode([]byte(tt.data))
			if !errors.Is(err, tt.err) {
				t.Fatalf("error = %v, want %v", err, tt.err)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error %q does not mention %q", err, tt.msg)
			}
		})
	}
	if _, err := Decode([]byte(pat(`{"context":[{"start":true},{"tool":"a"}],"tool":"t","exact":true,"args":[{"arg":"x","const":1.50}],"hits":[1],"support":1}`))); err != nil {
		t.Errorf("valid pool rejected: %v", err)
	}
}

// FuzzDecode checks that no input crashes the pool loader, and that every
// pool it accepts compiles and survives a round trip.
func FuzzDecode(f *testing.F) {
	for _, name := range []string{"list", "text", "template"} {
		data, err := os.ReadFile(filepath.Join(minedPools, name+".pool.json"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"version":1,"patterns":[{"context":[{"tool":"a"}],"tool":"t","hits":[1]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Decode(data)
		if err != nil {
			return
		}
		x, err := NewIndex(p)
		if err != nil {
			t.Fatalf("a decoded pool does not compile: %v", err)
		}
		var b bytes.Buffer
		if err := x.Snapshot().Encode(&b); err != nil {
			t.Fatal(err)
		}
		if _, err := Decode(b.Bytes()); err != nil {
			t.Fatalf("re-encoded pool rejected: %v", err)
		}
	})
}

// TestDecodeBase: a value of two sources names its first part by part
// and path; anything else is a clear error.
func TestDecodeBase(t *testing.T) {
	pool := func(base string) string {
		return `{"version":1,"mined":{"max_context":4,"min_support":3,"min_confidence":0.05,"sessions":1,"calls":1},"discriminators":[],"patterns":[` +
			`{"context":[{"tool":"ls"}],"tool":"read","exact":true,"list":{"from":{"ctx":0},"part":"output","path":"","lines":true},` +
			`"args":[{"arg":"path","part":"item","text":{"line":0,"token":-1},"prefix":"/","base":` + base + `}],"support":3,"hits":[2],"tool_hits":3,"p":0.6}]}`
	}
	// Without from, the event of the rest; with from, an event of its
	// own, named as any source's event.
	for _, good := range []string{`{"part":"args","path":"/path"}`, `{"from":{"ctx":0},"part":"args","path":"/path"}`,
		`{"from":{"ctx":0,"sig":{"tool":"mkdir"}},"part":"output","path":"/dir"}`} {
		if _, err := Decode([]byte(pool(good))); err != nil {
			t.Errorf("a valid base %s: %v", good, err)
		}
	}
	for _, bad := range []string{`{"part":"item","path":""}`, `{"part":"args","path":"x"}`, `{"from":{"ctx":1},"part":"args","path":"/path"}`,
		`{"from":{"ctx":0,"sig":{"start":true}},"part":"args","path":"/path"}`} {
		if _, err := Decode([]byte(pool(bad))); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "base") {
			t.Errorf("base %s: error %v, want ErrInvalid naming the base", bad, err)
		}
	}
}
