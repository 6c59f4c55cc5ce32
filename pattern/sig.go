package pattern

import (
	"strings"
	"unicode/utf8"

	"github.com/ahead-dev/ahead/callkey"
	"github.com/ahead-dev/ahead/internal/rawjson"
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
	v, ok := rawjson.Member(args, arg)
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
		s, ok := rawjson.Unquote(v)
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
	c, err := callkey.CanonicalValueView(v)
	if err != nil || len(c) > maxWordLen {
		return ""
	}
	return string(c)
}

// Read returns the discriminator's reading of its argument in args (the
// whole value or its first word, by Kind), before it is matched against
// Values; "" if there is none.
func (d *Discriminator) Read(args []byte) string { return extract(args, d.Arg, d.Kind) }

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
