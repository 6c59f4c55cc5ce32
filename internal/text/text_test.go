package text

import "testing"

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
