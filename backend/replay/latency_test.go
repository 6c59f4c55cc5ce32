package replay

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ahead-dev/ahead/callkey"
)

func TestParseLatency(t *testing.T) {
	tests := []struct {
		spec string
		want Latency
	}{
		{"trace", Trace{}},
		{"const:800ms", Const(800 * time.Millisecond)},
		{"const:0s", Const(0)},
		{"lognormal:600ms:1500ms", LogNormal{Median: 600 * time.Millisecond, P90: 1500 * time.Millisecond, Seed: 7}},
		{"lognormal:1s:1s", LogNormal{Median: time.Second, P90: time.Second, Seed: 7}},
	}
	for _, tt := range tests {
		got, err := ParseLatency(tt.spec, 7)
		if err != nil {
			t.Errorf("ParseLatency(%q): %v", tt.spec, err)
			continue
		}
		if got != tt.want {
			t.Errorf("ParseLatency(%q) = %#v, want %#v", tt.spec, got, tt.want)
		}
		if got.String() != tt.spec && tt.spec != "const:0s" {
			t.Errorf("ParseLatency(%q).String() = %q", tt.spec, got.String())
		}
	}
	for _, bad := range []string{
		"", "fast", "trace:1", "const", "const:-1s", "const:800", "lognormal:600ms",
		"lognormal:0s:1s", "lognormal:2s:1s", "lognormal:x:1s", "lognormal:1s:x", "file:/nonexistent/lat.yaml",
	} {
		if _, err := ParseLatency(bad, 0); !errors.Is(err, ErrBadLatency) {
			t.Errorf("ParseLatency(%q): err = %v, want ErrBadLatency", bad, err)
		}
	}
}

func TestLogNormalDraws(t *testing.T) {
	l := LogNormal{Median: 600 * time.Millisecond, P90: 1500 * time.Millisecond, Seed: 1}
	var ds []time.Duration
	for i := range 20000 {
		ds = append(ds, l.Duration(Call{Session: "s", Index: i}))
	}
	slices.Sort(ds)
	near := func(got, want time.Duration) bool {
		return math.Abs(float64(got-want)) <= 0.03*float64(want)
	}
	if got := ds[len(ds)/2]; !near(got, l.Median) {
		t.Errorf("median of draws = %v, want about %v", got, l.Median)
	}
	if got := ds[len(ds)*9/10]; !near(got, l.P90) {
		t.Errorf("p90 of draws = %v, want about %v", got, l.P90)
	}
	// Same call, same draw; the draw depends on the seed, session, position
	// and, for unmatched calls, the key.
	c := Call{Session: "s", Index: 3}
	if l.Duration(c) != l.Duration(c) {
		t.Error("the same call drew two latencies")
	}
	other := []Call{{Session: "t", Index: 3}, {Session: "s", Index: 4}}
	for _, o := range other {
		if l.Duration(o) == l.Duration(c) {
			t.Errorf("%+v drew the same latency as %+v", o, c)
		}
	}
	l2 := l
	l2.Seed = 2
	if l2.Duration(c) == l.Duration(c) {
		t.Error("another seed drew the same latency")
	}
	u1 := Call{Session: "s", Index: -1, Key: callkey.Key{Tool: "get", Args: `{"id":1}`}}
	u2 := Call{Session: "s", Index: -1, Key: callkey.Key{Tool: "get", Args: `{"id":2}`}}
	if l.Duration(u1) == l.Duration(u2) || l.Duration(u1) != l.Duration(u1) {
		t.Error("unmatched calls must draw by key, deterministically")
	}
}

func TestTraceLatency(t *testing.T) {
	if got := (Trace{}).Duration(Call{Recorded: ms(12.5)}); got != 12500*time.Microsecond {
		t.Errorf("recorded 12.5ms: %v", got)
	}
	if got := (Trace{}).Duration(Call{Typical: time.Second}); got != time.Second {
		t.Errorf("no record: %v, want the typical 1s", got)
	}
}

func TestParseLatencyFile(t *testing.T) {
	data := `# per-tool latencies
default: const:1s
tools:
  search: const:2s
  get_*: lognormal:100ms:300ms
  g*: const:3s
`
	dir := t.TempDir()
	name := filepath.Join(dir, "lat.yaml")
	if err := os.WriteFile(name, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := ParseLatency("file:"+name, 5)
	if err != nil {
		t.Fatal(err)
	}
	if l.String() != "file:"+name {
		t.Errorf("String() = %q", l.String())
	}
	tests := []struct {
		tool string
		want time.Duration
	}{
		{"search", 2 * time.Second},
		{"get_x", LogNormal{Median: 100 * time.Millisecond, P90: 300 * time.Millisecond, Seed: 5}.Duration(Call{Tool: "get_x"})},
		{"go", 3 * time.Second},
		{"other", time.Second},
	}
	for _, tt := range tests {
		if got := l.Duration(Call{Tool: tt.tool}); got != tt.want {
			t.Errorf("Duration(%s) = %v, want %v", tt.tool, got, tt.want)
		}
	}
	empty, err := ParseLatencyFile(nil, "empty.yaml", 0)
	if err != nil || empty.Duration(Call{Tool: "x"}) != 0 {
		t.Errorf("empty file: %v, %v", empty, err)
	}
}

func TestParseLatencyFileErrors(t *testing.T) {
	tests := []struct {
		data, want string
	}{
		{"default: fast\n", "lat.yaml:1: default:"},
		{"tools:\n  a: const:1s\n  b: lognormal:2s:1s\n", "lat.yaml:3: tools.b:"},
		{"tools:\n  a: const:1s\n  a: const:2s\n", "lat.yaml:3: tools.a: tool named twice"},
		{"tools:\n  a: file:x.yaml\n", "lat.yaml:2: tools.a:"},
		{"tools:\n  '[': const:1s\n", "lat.yaml:2: tools.[: bad glob"},
		{"tools: [a]\n", "lat.yaml:1: tools:"},
		{"tools:\n  a: {x: 1}\n", "lat.yaml:2: tools.a: want a latency spec"},
		{"speed: 1\n", "lat.yaml:1: speed: unknown field"},
		{"default: const:1s\ndefault: const:2s\n", "lat.yaml:2: default: given twice"},
		{"- a\n", "lat.yaml:1: (top)"},
		{"a: [\n", "lat.yaml:"},
	}
	for _, tt := range tests {
		_, err := ParseLatencyFile([]byte(tt.data), "lat.yaml", 0)
		if !errors.Is(err, ErrBadLatency) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseLatencyFile(%q): err = %v, want ErrBadLatency containing %q", tt.data, err, tt.want)
		}
	}
}

func FuzzParseLatency(f *testing.F) {
	for _, s := range []string{"trace", "const:1s", "lognormal:600ms:1500ms", "lognormal:1h:2h", "file:", "const:1e9h"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		if strings.HasPrefix(spec, "file:") {
			return // reads files
		}
		l, err := ParseLatency(spec, 1)
		if err != nil {
			if !errors.Is(err, ErrBadLatency) {
				t.Fatalf("error %v does not wrap ErrBadLatency", err)
			}
			return
		}
		if d := l.Duration(Call{Session: "s", Index: 1}); d < 0 {
			t.Fatalf("%q gave a negative latency %v", spec, d)
		}
		again, err := ParseLatency(l.String(), 1)
		if err != nil || again.Duration(Call{Session: "s", Index: 1}) != l.Duration(Call{Session: "s", Index: 1}) {
			t.Fatalf("%q does not round-trip through %q: %v", spec, l.String(), err)
		}
	})
}

func FuzzParseLatencyFile(f *testing.F) {
	f.Add("default: const:1s\ntools:\n  a: trace\n  b*: lognormal:1ms:2ms\n")
	f.Add("tools: {}\n")
	f.Add("")
	f.Fuzz(func(t *testing.T, data string) {
		l, err := ParseLatencyFile([]byte(data), "f.yaml", 1)
		if err != nil {
			if !errors.Is(err, ErrBadLatency) || !strings.Contains(err.Error(), "f.yaml") {
				t.Fatalf("error %v must wrap ErrBadLatency and name the file", err)
			}
			return
		}
		if d := l.Duration(Call{Tool: "a", Index: 0}); d < 0 {
			t.Fatalf("negative latency %v", d)
		}
	})
}
