package fleet

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/ahead-dev/ahead/callkey"
	"github.com/ahead-dev/ahead/policy"
)

// TestCoalesce: a batch of queued puts and purges comes to what sending
// them one by one, in order, would leave in the bucket, in a request per
// distinct purge subject and a put per result that survives: a put that a
// later purge covers, or that a later put of the same result replaces, is
// not sent. Issue 25: one request per job fell behind under load, and
// every result reached the bucket too late to be reused.
func TestCoalesce(t *testing.T) {
	f := &Fleet{opts: Options{Name: "t"}}
	get := policy.Tool{Reads: policy.Refs("key")}
	put := policy.Tool{Writes: policy.Refs("key")}
	arg := func(k string) json.RawMessage { return json.RawMessage(`{"key":"` + k + `"}`) }
	share := func(k, value string) shareJob {
		key, err := callkey.Make("get", arg(k))
		if err != nil {
			t.Fatal(err)
		}
		fp := get.Footprint(arg(k))
		return shareJob{key: f.resultKey("store", key, fp), value: []byte(value), backend: "store", fp: fp}
	}
	write := func(k string) shareJob { return shareJob{purge: f.purgeSubjects("store", put.Effect(arg(k)))} }
	writeAll := shareJob{purge: f.purgeSubjects("store", policy.Effect{All: true})}
	sub := func(k string) string { return f.purgeSubjects("store", put.Effect(arg(k)))[1] }
	anySub := f.bucketSubject() + "store.any.*"

	for _, tc := range []struct {
		name     string
		batch    []shareJob
		subjects []string
		purges   int
		puts     []string // the values sent
	}{
		{"one put", []shareJob{share("a", "a1")}, nil, 0, []string{"a1"}},
		{
			"writes behind a slow one",
			append(append([]shareJob{share("a", "a1"), share("c", "c1"), share("d", "d1")},
				slices.Repeat([]shareJob{write("b")}, 300)...),
				write("c"), share("d", "d2"), share("c", "c2")),
			[]string{anySub, sub("b"), sub("c")}, 301, []string{"a1", "d2", "c2"},
		},
		{
			"a write of anything",
			[]shareJob{share("a", "a1"), share("b", "b1"), writeAll, share("e", "e1")},
			[]string{f.bucketSubject() + "store.>"}, 1, []string{"e1"},
		},
		{
			"a write of another key",
			[]shareJob{share("a", "a1"), write("b"), share("a", "a2"), write("b")},
			[]string{anySub, sub("b")}, 2, []string{"a2"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			subjects, purges, puts := f.coalesce(tc.batch)
			var sent []string
			for _, p := range puts {
				sent = append(sent, string(p.value))
			}
			if !slices.Equal(subjects, tc.subjects) || purges != tc.purges || !slices.Equal(sent, tc.puts) {
				t.Errorf("coalesce = subjects %q, %d purges, puts %q; want %q, %d, %q", subjects, purges, sent, tc.subjects, tc.purges, tc.puts)
			}
		})
	}
}
