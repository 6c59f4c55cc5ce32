package text

import (
	"math/rand/v2"
	"strings"
	"testing"
)

func TestText(t *testing.T) {
	s := "first line\n  second: src/a.py:74:def f():  \n\nlast one\n\n"
	for _, tt := range []struct {
		n    int
		want string
		ok   bool
	}{{0, "first line", true}, {1, "second: src/a.py:74:def f():", true}, {2, "", true}, {3, "last one", true}, {4, "", false}, {-1, "last one", true}, {-3, "second: src/a.py:74:def f():", true}, {-5, "", false}} {
		got, ok := LineAt(s, tt.n)
		if got != tt.want || ok != tt.ok {
			t.Errorf("lineAt(%d) = %q, %v; want %q, %v", tt.n, got, ok, tt.want, tt.ok)
		}
	}
	if n := LineCount(s); n != 4 {
		t.Errorf("lineCount = %d, want 4", n)
	}
	line := "second: src/a.py:74:def f():"
	for _, tt := range []struct {
		n    int
		want string
	}{{0, "second"}, {1, "src/a.py"}, {2, "74"}, {-1, "f"}, {-2, "def"}} {
		if got, ok := TokenAt(line, tt.n); !ok || got != tt.want {
			t.Errorf("tokenAt(%d) = %q, %v; want %q", tt.n, got, ok, tt.want)
		}
	}
	if _, ok := TokenAt(line, 9); ok {
		t.Error("tokenAt past the end succeeded")
	}
	for norm, want := range map[string]string{Lower: "./src/a.py", Clean: "src/A.py", Base: "A.py", Dir: "src"} {
		if got, _ := Normalize("./src/A.py", norm); got != want && !(norm == Lower && got == "./src/a.py") {
			t.Errorf("normalize(%s) = %q, want %q", norm, got, want)
		}
	}
}

// TestLineTokenAt checks LineAt and TokenAt against their definitions (the
// lines of the text without its trailing newlines; the spans of
// TokenSpans) on random texts of tokens, separators and newlines.
func TestLineTokenAt(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	parts := []string{"a", "Zq", "1.5", "é", "/x", "-", " ", "  ", "\t", "\n", "\r\n", ",", "\"", "(", "_"}
	for range 20000 {
		var b strings.Builder
		for range r.IntN(12) {
			b.WriteString(parts[r.IntN(len(parts))])
		}
		s := b.String()
		lines := strings.Split(strings.TrimRight(s, "\r\n"), "\n")
		if strings.TrimRight(s, "\r\n") == "" {
			lines = nil
		}
		for n := -4; n < 4; n++ {
			want, wok := "", false
			if k := n + len(lines)*boolInt(n < 0); k >= 0 && k < len(lines) {
				want, wok = strings.TrimSpace(lines[k]), true
			}
			if got, ok := LineAt(s, n); got != want || ok != wok {
				t.Fatalf("LineAt(%q, %d) = %q, %v; want %q, %v", s, n, got, ok, want, wok)
			}
			spans := TokenSpans(nil, s)
			want, wok = "", false
			if k := n + len(spans)*boolInt(n < 0); k >= 0 && k < len(spans) {
				want, wok = s[spans[k].Start:spans[k].End], true
			}
			if got, ok := TokenAt(s, n); got != want || ok != wok {
				t.Fatalf("TokenAt(%q, %d) = %q, %v; want %q, %v", s, n, got, ok, want, wok)
			}
		}
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// BenchmarkSelect selects a line and a token of a shell command, as a
// template mapping does at every evaluation.
func BenchmarkSelect(b *testing.B) {
	s := "cd /testbed && python -m pytest tests/test_models.py -k 'test_save and not slow' -x -q 2>&1 | tail -n 40\n"
	for b.Loop() {
		for _, n := range []int{0, 3, -1, -2} {
			line, _ := LineAt(s, 0)
			TokenAt(line, n)
		}
	}
}
