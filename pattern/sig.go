package pattern

import (
	"math"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/ahead-dev/ahead/trace"
)

// Signature is the payload-free shape of an event: its tool, whether it
// failed, and, for tools with a discriminator, the discriminator's value.
// The zero Signature with Start set marks the session start.
type Signature struct {
	Start bool   `json:"start,omitempty"`
	Tool  string `json:"tool,omitempty"`
	Error bool   `json:"error,omitempty"`
	// Value is the discriminator value; "" when the tool has none, Other
	// when the event's value is not one of the discriminator's Values.
	Value string `json:"value,omitempty"`
}

// Other is the discriminator value of events whose value is rare.
const Other = "*"

// StartSignature marks the session start in contexts.
var StartSignature = Signature{Start: true}

// String formats a signature as tool[value], with "!" appended for errors
// and "^" for the session start.
func (s Signature) String() string {
	if s.Start {
		return "^"
	}
	var b strings.Builder
	b.WriteString(s.Tool)
	if s.Value != "" {
		b.WriteByte('[')
		b.WriteString(s.Value)
		b.WriteByte(']')
	}
	if s.Error {
		b.WriteByte('!')
	}
	return b.String()
}

func compareSig(a, b Signature) int {
	if a.Start != b.Start {
		if a.Start {
			return -1
		}
		return 1
	}
	if c := strings.Compare(a.Tool, b.Tool); c != 0 {
		return c
	}
	if c := strings.Compare(a.Value, b.Value); c != 0 {
		return c
	}
	switch {
	case a.Error == b.Error:
		return 0
	case !a.Error:
		return -1
	}
	return 1
}

// Discriminator kinds: how a value is read from an argument.
const (
	KindValue = "value" // the whole argument (a string, or canonical JSON)
	KindWord  = "word"  // the first whitespace-separated word of a string argument
)

// Discriminator refines a tool's signatures by one argument with few
// distinct values that tells what happens next: a shell command's program,
// a meta-tool's action name. Discriminators are discovered from traces by
// the miner, never configured.
type Discriminator struct {
	Tool string `json:"tool"`
	Arg  string `json:"arg"`
	Kind string `json:"kind"`
	// Values are the values kept, sorted; other values sign as Other.
	Values []string `json:"values"`
	// Gain is how many bits knowing the value told about the next call,
	// in the traces it was discovered on (after a small-sample correction).
	Gain float64 `json:"gain"`
}

// maxWordLen bounds a discriminator word: longer first words are not
// program names but data.
const maxWordLen = 64

// extract returns the discriminator's raw value in args, or "" if absent.
func extract(args []byte, arg, kind string) string {
	v, ok := member(args, arg)
	if !ok {
		return ""
	}
	if kind == KindWord && len(v) > 1 && v[0] == '"' {
		// The first word of a long command without decoding the whole
		// command, when no escape comes before the word ends.
		body := v[1:]
		i := 0
		for i < len(body) && (body[i] == ' ' || body[i] == '\t') {
			i++
		}
		j := i
		for j < len(body) && body[j] != '"' && body[j] != '\\' && body[j] != ' ' && body[j] != '\t' && body[j] >= 0x20 {
			j++
		}
		if j < len(body) && body[j] != '\\' && j > i && j-i <= maxWordLen && utf8.Valid(body[i:j]) {
			return string(body[i:j])
		}
	}
	if len(v) > 0 && v[0] == '"' {
		s, ok := unquote(v)
		if !ok {
			return ""
		}
		if kind == KindWord {
			s = strings.TrimSpace(s)
			if i := strings.IndexAny(s, " \t\r\n"); i >= 0 {
				s = s[:i]
			}
			if len(s) > maxWordLen {
				return ""
			}
		}
		return s
	}
	if kind == KindWord {
		return ""
	}
	c, ok := canonValue(v)
	if !ok || len(c) > maxWordLen {
		return ""
	}
	return string(c)
}

// Signer computes events' signatures. It is immutable and safe for
// concurrent use.
type Signer struct {
	byTool map[string]*signerDisc
}

type signerDisc struct {
	arg, kind string
	values    map[string]string // value → itself, so signatures share the pool's strings
}

// NewSigner returns a Signer for the given discriminators (at most one per
// tool; later ones win).
func NewSigner(ds []Discriminator) *Signer {
	s := &Signer{byTool: make(map[string]*signerDisc)}
	for _, d := range ds {
		sd := &signerDisc{arg: d.Arg, kind: d.Kind, values: make(map[string]string, len(d.Values))}
		for _, v := range d.Values {
			sd.values[v] = v
		}
		s.byTool[d.Tool] = sd
	}
	return s
}

// Sign returns the signature of a call.
func (s *Signer) Sign(tool string, status trace.Status, args []byte) Signature {
	sig := Signature{Tool: tool, Error: status == trace.StatusError}
	if d := s.byTool[tool]; d != nil {
		if v, ok := d.values[extract(args, d.arg, d.kind)]; ok {
			sig.Value = v
		} else {
			sig.Value = Other
		}
	}
	return sig
}

// DiscoverOptions tune discriminator discovery. Zero values mean the
// defaults given.
type discoverOptions struct {
	minCount  int     // occurrences of the tool; 0 means 30
	maxValues int     // values kept; 0 means 24
	minGain   float64 // bits, after correction; 0 means 0.1
}

// discoverDiscriminators finds, for each tool, the argument reading (whole
// value or first word) that tells most about the next call, if it tells
// enough. "The next call" is its tool and status and, when it is the same
// tool, the same reading of its arguments: a shell tool's program predicts
// the next program even though the tool never changes.
func discoverDiscriminators(sessions []trace.Session, o discoverOptions) []Discriminator {
	if o.minCount == 0 {
		o.minCount = 30
	}
	if o.maxValues == 0 {
		o.maxValues = 24
	}
	if o.minGain == 0 {
		o.minGain = 0.1
	}
	type key struct{ tool, arg, kind string }
	count := make(map[string]int)
	argsOf := make(map[string]map[string]bool)
	for _, s := range sessions {
		for _, ev := range s.Events {
			count[ev.Tool]++
			if argsOf[ev.Tool] == nil {
				argsOf[ev.Tool] = make(map[string]bool)
			}
			eachMember(ev.Args, func(k, _ []byte) bool {
				if name, ok := unquote(k); ok {
					argsOf[ev.Tool][name] = true
				}
				return true
			})
		}
	}
	tools := make([]string, 0, len(count))
	for t, n := range count {
		if n >= o.minCount {
			tools = append(tools, t)
		}
	}
	slices.Sort(tools)
	var out []Discriminator
	for _, tool := range tools {
		var best *Discriminator
		args := make([]string, 0, len(argsOf[tool]))
		for a := range argsOf[tool] {
			args = append(args, a)
		}
		slices.Sort(args)
		for _, arg := range args {
			for _, kind := range []string{KindValue, KindWord} {
				d, ok := evalDiscriminator(sessions, tool, arg, kind, count[tool], o)
				// On a tie the first word wins: it is the coarser
				// reading, and generalises to arguments not seen.
				if ok && (best == nil || d.Gain > best.Gain || (d.Gain == best.Gain && kind == KindWord)) {
					best = &d
				}
			}
		}
		if best != nil {
			out = append(out, *best)
		}
	}
	return out
}

func evalDiscriminator(sessions []trace.Session, tool, arg, kind string, n int, o discoverOptions) (Discriminator, bool) {
	freq := make(map[string]int)
	inSessions := make(map[string]int) // sessions using the value
	toolSessions := 0
	for _, s := range sessions {
		seen := make(map[string]bool)
		used := false
		for _, ev := range s.Events {
			if ev.Tool == tool {
				used = true
				if v := extract(ev.Args, arg, kind); v != "" {
					freq[v]++
					if !seen[v] {
						seen[v] = true
						inSessions[v]++
					}
				}
			}
		}
		if used {
			toolSessions++
		}
	}
	// A value must be common across sessions, not frequent in a few:
	// identifiers recur within a session (and across the sessions of one
	// task) but say nothing about other tasks.
	minSessions := max(3, toolSessions/10)
	var values []string
	for v, c := range freq {
		if c >= 3 && inSessions[v] >= minSessions {
			values = append(values, v)
		}
	}
	// The most frequent values first, then by value for determinism.
	slices.SortFunc(values, func(a, b string) int {
		if freq[a] != freq[b] {
			return freq[b] - freq[a]
		}
		return strings.Compare(a, b)
	})
	if len(values) > o.maxValues {
		values = values[:o.maxValues]
	}
	// Keep the number of values that tells most about the next call once
	// its cost is paid: more values tell more, and cost more.
	best, bestGain := 0, math.Inf(-1)
	for v := 2; v <= len(values); v++ {
		covered := 0
		for _, x := range values[:v] {
			covered += freq[x]
		}
		// The values must describe most calls, not a few memorable ones.
		if covered*2 < n {
			continue
		}
		if g, ok := discriminatorGain(sessions, tool, arg, kind, values[:v], o); ok && g > bestGain {
			best, bestGain = v, g
		}
	}
	if best == 0 || bestGain < o.minGain {
		return Discriminator{}, false
	}
	kept := slices.Clone(values[:best])
	slices.Sort(kept)
	return Discriminator{Tool: tool, Arg: arg, Kind: kind, Values: kept, Gain: math.Round(bestGain*1000) / 1000}, true
}

// discriminatorGain measures, in bits, what the values tell about the next
// call, less the cost of the parameters it takes to say it.
func discriminatorGain(sessions []trace.Session, tool, arg, kind string, values []string, o discoverOptions) (float64, bool) {
	kept := make(map[string]bool, len(values))
	for _, v := range values {
		kept[v] = true
	}
	read := func(ev trace.Event) string {
		v := extract(ev.Args, arg, kind)
		if kept[v] {
			return v
		}
		return Other
	}
	// Joint counts of (this value, next label).
	joint := make(map[[2]string]int)
	dcount := make(map[string]int)
	lcount := make(map[string]int)
	total := 0
	for _, s := range sessions {
		// Each (value, next) pair counts once per session: an agent
		// looping on one call must not pass for a strong regularity.
		seen := make(map[[2]string]bool)
		for i, ev := range s.Events {
			if ev.Tool != tool || i+1 >= len(s.Events) {
				continue
			}
			next := s.Events[i+1]
			label := next.Tool + "\x00" + string(next.Status)
			if next.Tool == tool {
				label += "\x00" + read(next)
			}
			pair := [2]string{read(ev), label}
			if seen[pair] {
				continue
			}
			seen[pair] = true
			joint[pair]++
			dcount[pair[0]]++
			lcount[label]++
			total++
		}
	}
	if total < o.minCount {
		return 0, false
	}
	h := func(m map[string]int) float64 {
		e := 0.0
		for _, c := range m {
			p := float64(c) / float64(total)
			e -= p * math.Log2(p)
		}
		return e
	}
	hjoint := 0.0
	for _, c := range joint {
		p := float64(c) / float64(total)
		hjoint -= p * math.Log2(p)
	}
	mi := h(lcount) + h(dcount) - hjoint
	// The information must pay for the parameters it takes to describe
	// it: the BIC penalty of the (|D|-1)(|L|-1) extra parameters of the
	// joint model, (|D|-1)(|L|-1) log2(n) / 2n bits. It is several times
	// the small-sample bias of mutual information, and it is what keeps
	// identifiers (which do predict, within the task they belong to) out.
	penalty := float64((len(dcount)-1)*(len(lcount)-1)) * math.Log2(float64(total)) / (2 * float64(total))
	return mi - penalty, true
}
