package pattern_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ahead-dev/ahead/pattern"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s (-want +got):\n%s", name, diff)
	}
}

// TestWriteTableGolden prints the miner's test pools (one per kind of
// mapping: constants, list elements, paths, templates, text tokens) as
// ahead patterns shows them, with and without its filters.
func TestWriteTableGolden(t *testing.T) {
	for _, name := range []string{"const", "list", "path", "template", "text"} {
		pool, err := pattern.Load(filepath.Join("..", "mine", "testdata", name+".pool.json"))
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			suffix string
			opts   pattern.ShowOptions
		}{
			{"", pattern.ShowOptions{}},
			{"-exact-top2", pattern.ShowOptions{ExactOnly: true, Top: 2}},
		} {
			t.Run(name+tc.suffix, func(t *testing.T) {
				var b bytes.Buffer
				if err := pattern.WriteTable(&b, pool, tc.opts); err != nil {
					t.Fatal(err)
				}
				b.WriteString("\n")
				for i := range pool.Patterns {
					b.WriteString(pool.Patterns[i].Describe())
					b.WriteString("\n")
				}
				golden(t, "show-"+name+tc.suffix+".golden", b.Bytes())
			})
		}
	}
}
