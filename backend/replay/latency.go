package replay

import (
	"bytes"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"os"
	"path"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/ahead-dev/ahead/callkey"
)

// ErrBadLatency is wrapped by every error about a latency model spec.
var ErrBadLatency = errors.New("replay: bad latency model")

// Call describes a call whose latency is being modelled.
type Call struct {
	Session string
	Tool    string
	Key     callkey.Key
	// Index is the position, in its session, of the recorded call it
	// matched; -1 if it matched none.
	Index int
	// Recorded is the matched call's recorded duration_ms; nil if it
	// matched none or the trace does not say.
	Recorded *float64
	// Typical is the median recorded duration of the tool over the
	// backend's traces; 0 if no call of the tool has one.
	Typical time.Duration
}

// Latency models how long a tool call takes, in trace time. Duration must
// be a pure function of the call (and the model's seed), so that every
// replay of the same sessions sees the same latencies.
type Latency interface {
	Duration(c Call) time.Duration
	// String returns the spec the model was parsed from.
	String() string
}

// Const is a fixed latency.
type Const time.Duration

// Duration returns d.
func (d Const) Duration(Call) time.Duration { return time.Duration(d) }

func (d Const) String() string { return "const:" + fmtDuration(time.Duration(d)) }

// fmtDuration writes whole milliseconds as such ("1500ms", not "1.5s"), as
// latency specs are usually written.
func fmtDuration(d time.Duration) string {
	if d%time.Second != 0 && d%time.Millisecond == 0 {
		return strconv.FormatInt(int64(d/time.Millisecond), 10) + "ms"
	}
	return d.String()
}

// Trace is the recorded duration_ms of the matched call; a call that
// matched none, or whose record has no duration, takes the tool's typical
// (median recorded) duration.
type Trace struct{}

// Duration returns the recorded or typical duration.
func (Trace) Duration(c Call) time.Duration {
	if c.Recorded != nil && *c.Recorded >= 0 {
		return time.Duration(*c.Recorded * float64(time.Millisecond))
	}
	return c.Typical
}

func (Trace) String() string { return "trace" }

// LogNormal draws each call's latency from a log-normal distribution with
// the given median and 90th percentile. The draw is a hash of (Seed,
// session, recorded position) — or of the call key for a call that matched
// nothing — so the same call takes the same time in every mode and run.
type LogNormal struct {
	Median, P90 time.Duration
	Seed        uint64
}

// z90 is the standard normal's 90th percentile.
const z90 = 1.2815515655446004

// Duration returns the call's draw.
func (l LogNormal) Duration(c Call) time.Duration {
	h := fnv.New64a()
	var b [8]byte
	for i := range b {
		b[i] = byte(l.Seed >> (8 * i))
	}
	h.Write(b[:])
	h.Write([]byte(c.Session))
	h.Write([]byte{0})
	if c.Index >= 0 {
		h.Write([]byte(strconv.Itoa(c.Index)))
	} else {
		h.Write([]byte{1})
		h.Write([]byte(c.Key.Tool))
		h.Write([]byte{0})
		h.Write([]byte(c.Key.Args))
	}
	u := unit(splitmix(h.Sum64()))
	z := math.Sqrt2 * math.Erfinv(2*u-1)
	mu := math.Log(float64(l.Median))
	sigma := (math.Log(float64(l.P90)) - mu) / z90
	v := math.Exp(mu + sigma*z)
	if v >= math.MaxInt64 {
		return math.MaxInt64 // a model beyond 292 years is not worth wrapping around
	}
	return time.Duration(v)
}

func (l LogNormal) String() string {
	return "lognormal:" + fmtDuration(l.Median) + ":" + fmtDuration(l.P90)
}

// splitmix finalises a hash so that its bits are uniform.
func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// unit maps x to (0, 1), never 0 or 1.
func unit(x uint64) float64 { return (float64(x>>11) + 0.5) / (1 << 53) }

// PerTool gives tools their own models: an exact name first, then the
// first glob (path.Match) that matches, then Default.
type PerTool struct {
	Tools   map[string]Latency
	Globs   []ToolGlob
	Default Latency
	// Spec is what String returns (the file it came from).
	Spec string
}

// ToolGlob is the model of the tools whose names match Pattern.
type ToolGlob struct {
	Pattern string
	Latency Latency
}

// Duration returns the duration under the tool's model; a tool with none
// and no Default takes no time.
func (p *PerTool) Duration(c Call) time.Duration {
	if l := p.lookup(c.Tool); l != nil {
		return l.Duration(c)
	}
	return 0
}

func (p *PerTool) lookup(tool string) Latency {
	if l, ok := p.Tools[tool]; ok {
		return l
	}
	for _, g := range p.Globs {
		if ok, _ := path.Match(g.Pattern, tool); ok {
			return g.Latency
		}
	}
	return p.Default
}

func (p *PerTool) String() string { return p.Spec }

// ParseLatency parses a latency model spec:
//
//	trace                   the recorded duration_ms (see Trace)
//	const:800ms             a fixed latency
//	lognormal:600ms:1500ms  log-normal with that median and p90, seeded
//	file:lat.yaml           per tool, from a YAML file (see ParseLatencyFile)
func ParseLatency(spec string, seed uint64) (Latency, error) {
	if name, ok := strings.CutPrefix(spec, "file:"); ok {
		data, err := os.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadLatency, err)
		}
		l, err := ParseLatencyFile(data, name, seed)
		if err != nil {
			return nil, err
		}
		l.Spec = spec
		return l, nil
	}
	return parseSimple(spec, seed)
}

func parseSimple(spec string, seed uint64) (Latency, error) {
	kind, rest, _ := strings.Cut(spec, ":")
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w %q: %s", ErrBadLatency, spec, fmt.Sprintf(format, args...))
	}
	switch kind {
	case "trace":
		if rest != "" {
			return nil, bad("trace takes no parameters")
		}
		return Trace{}, nil
	case "const":
		d, err := parseDuration(rest)
		if err != nil {
			return nil, bad("%v", err)
		}
		return Const(d), nil
	case "lognormal":
		m, p, ok := strings.Cut(rest, ":")
		if !ok {
			return nil, bad("want lognormal:MEDIAN:P90")
		}
		median, err := parseDuration(m)
		if err != nil {
			return nil, bad("median: %v", err)
		}
		p90, err := parseDuration(p)
		if err != nil {
			return nil, bad("p90: %v", err)
		}
		if median <= 0 {
			return nil, bad("median must be positive")
		}
		if p90 < median {
			return nil, bad("p90 %v is below the median %v", p90, median)
		}
		return LogNormal{Median: median, P90: p90, Seed: seed}, nil
	case "file":
		return nil, bad("a latency file cannot name another file")
	default:
		return nil, bad("want trace, const:D, lognormal:MEDIAN:P90 or file:PATH")
	}
}

func parseDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, err
	}
	if d < 0 {
		return 0, fmt.Errorf("negative duration %v", d)
	}
	return d, nil
}

// ParseLatencyFile parses a per-tool latency file (name is used in errors):
//
//	default: lognormal:600ms:1500ms   # tools named by no rule; omitted: no latency
//	tools:
//	  search_flights: const:1200ms    # an exact tool name
//	  get_*: lognormal:100ms:300ms    # a path.Match glob; the first match wins
//
// Each value is a spec ParseLatency accepts, except file:.
func ParseLatencyFile(data []byte, name string, seed uint64) (*PerTool, error) {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil && err != io.EOF {
		return nil, fmt.Errorf("%w: %s: %v", ErrBadLatency, name, err)
	}
	p := &PerTool{Tools: make(map[string]Latency), Spec: "file:" + name}
	if len(doc.Content) == 0 {
		return p, nil // empty file: no latency for any tool
	}
	root := doc.Content[0]
	at := func(n *yaml.Node, field, format string, args ...any) error {
		return fmt.Errorf("%w: %s:%d: %s: %s", ErrBadLatency, name, n.Line, field, fmt.Sprintf(format, args...))
	}
	if root.Kind != yaml.MappingNode {
		return nil, at(root, "(top)", "want a mapping with default and tools")
	}
	spec := func(n *yaml.Node, field string) (Latency, error) {
		if n.Kind != yaml.ScalarNode {
			return nil, at(n, field, "want a latency spec string")
		}
		l, err := parseSimple(n.Value, seed)
		if err != nil {
			return nil, at(n, field, "%v", errors.Unwrap(err))
		}
		return l, nil
	}
	seen := make(map[string]bool)
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if seen[k.Value] {
			return nil, at(k, k.Value, "given twice")
		}
		seen[k.Value] = true
		switch k.Value {
		case "default":
			l, err := spec(v, "default")
			if err != nil {
				return nil, err
			}
			p.Default = l
		case "tools":
			if v.Kind != yaml.MappingNode {
				return nil, at(v, "tools", "want a mapping from tool name to latency spec")
			}
			for j := 0; j+1 < len(v.Content); j += 2 {
				tk, tv := v.Content[j], v.Content[j+1]
				field := "tools." + tk.Value
				if tk.Value == "" {
					return nil, at(tk, "tools", "empty tool name")
				}
				l, err := spec(tv, field)
				if err != nil {
					return nil, err
				}
				if strings.ContainsAny(tk.Value, `*?[\`) {
					if _, err := path.Match(tk.Value, ""); err != nil {
						return nil, at(tk, field, "bad glob: %v", err)
					}
					p.Globs = append(p.Globs, ToolGlob{Pattern: tk.Value, Latency: l})
					continue
				}
				if _, dup := p.Tools[tk.Value]; dup {
					return nil, at(tk, field, "tool named twice")
				}
				p.Tools[tk.Value] = l
			}
		default:
			return nil, at(k, k.Value, "unknown field (want default or tools)")
		}
	}
	return p, nil
}
