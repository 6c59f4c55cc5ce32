package pattern

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ahead-dev/ahead/callkey"
	"github.com/ahead-dev/ahead/internal/rawjson"
	"github.com/ahead-dev/ahead/internal/text"
)

// Version is the pool file format this package writes and reads.
const Version = 1

// MaxHorizon bounds Mined.Horizon.
const MaxHorizon = 64

// Errors returned by Load and Decode (wrapped).
var (
	// ErrVersion: the file is a pool of another format version.
	ErrVersion = errors.New("pattern: unsupported pool version")
	// ErrInvalid: the file is not a valid pool.
	ErrInvalid = errors.New("pattern: invalid pool")
)

// Pool is a set of mined patterns and the discriminators their signatures
// use: the pool file, versioned JSON. Encode writes identical bytes for an
// identical pool.
type Pool struct {
	Version        int             `json:"version"`
	Mined          Mined           `json:"mined"`
	Discriminators []Discriminator `json:"discriminators"`
	Patterns       []Pattern       `json:"patterns"`
	// Conversation is the conversation model mined beside the patterns
	// (package convo), kept as its JSON: this package neither reads nor
	// changes it. Nil when the traces had no messages.
	Conversation json.RawMessage `json:"conversation,omitempty"`
}

// Mined records how a pool was mined.
type Mined struct {
	MaxContext    int     `json:"max_context"`
	MinSupport    int     `json:"min_support"`
	MinConfidence float64 `json:"min_confidence"`
	// Horizon is the number of calls Pattern.Soon looks ahead; 0 (a pool
	// from before it was counted) means Soon is absent.
	Horizon  int `json:"horizon,omitempty"`
	Sessions int `json:"sessions"`
	Calls    int `json:"calls"`
	// KeepValues records that the user opted in to keeping constants the
	// privacy rule leaves out (`ahead mine --keep-values`; private.go).
	KeepValues bool `json:"keep_values,omitempty"`
}

// Pattern is the tuple (C, T, f, p): when the session's recent signatures
// match Context, the next call is to Tool with the arguments the mappings
// Args derive from the matched events (f), with probability P.
//
// Context is an order-preserving subsequence of the last MaxContext
// signatures before the prediction (gaps allowed) whose last element is the
// latest event's signature; a leading StartSignature means the session
// start lies within reach. The context of the session start alone predicts
// a session's first call (before any event: its mappings can only be
// constants). When the same context can be found in the
// window in several ways, the events matched are the most recent ones.
type Pattern struct {
	Context []Signature `json:"context"`
	Tool    string      `json:"tool"`
	// Exact reports that Args derive every argument (possibly none): the
	// pattern predicts concrete calls. Otherwise it predicts the tool only.
	Exact bool `json:"exact"`
	// List, if set, is a list whose elements give the "item" mappings
	// their values: one candidate call per element not yet called in the
	// session, in list order (the first not used yet first).
	List *ListSource `json:"list,omitempty"`
	Args []Mapping   `json:"args,omitempty"`
	// Support counts the context's occurrences at which f could be
	// evaluated (all of them for a tool-only pattern); Hits[r] those at
	// which the next call was the r-th candidate (one rank without a
	// List); ToolHits those at which the next call was to Tool, whatever
	// its arguments. P = Hits[0] / Support.
	Support  int     `json:"support"`
	Hits     []int   `json:"hits"`
	ToolHits int     `json:"tool_hits"`
	P        float64 `json:"p"`
	// ElseSupport counts the occurrences at which f could not be evaluated
	// (a source was missing, or every list element was used already) and
	// ElseHits those followed by a call to Tool: how likely the tool is
	// when the pattern cannot say with which arguments. A list that has
	// run out is the strongest sign the agent moves on.
	ElseSupport int `json:"else_support,omitempty"`
	ElseHits    int `json:"else_hits,omitempty"`
	// Repeats counts, for a pattern without a List, the Support
	// occurrences at which its call had already been made in the session,
	// and RepeatHits those of them at which it was made again: some calls
	// are repeated (a hand-over restated), most never are, and whether
	// the call was made already is known when predicting.
	Repeats    int `json:"repeats,omitempty"`
	RepeatHits int `json:"repeat_hits,omitempty"`
	// Soon[r], for an exact pattern of a pool with a Horizon, counts the
	// Support occurrences at which the r-th candidate was called within
	// the next Mined.Horizon calls (so Soon[r] >= Hits[r]): how often
	// running it ahead pays off when the agent makes several calls, in
	// parallel or in turn, before the one after next is known. Absent in
	// older pools.
	Soon []int `json:"soon,omitempty"`
}

// Ref names an event a value is read from: the context element Ctx
// (counted back from the latest event, 0), or, when Sig is set, the
// session's most recent event with that signature (Ctx is then ignored);
// with Nth (< MaxEvery), the one Nth events of that signature before it.
// An agent that edits and runs again may run the test before the last
// (Nth 1): a repeat of an earlier call that is not the latest of its
// kind.
type Ref struct {
	Ctx int        `json:"ctx"`
	Sig *Signature `json:"sig,omitempty"`
	Nth int        `json:"nth,omitempty"`
}

// Parts of an event a value is read from.
const (
	PartArgs   = "args"
	PartOutput = "output"
	PartItem   = "item" // the current element of the pattern's List
)

// ListSource is where a pattern's list lies: the JSON array at Path (a JSON
// pointer) in Part of the event From. With Every (and a signature
// reference), the lists of the session's last MaxEvery events with that
// signature are read as one: the flights of every reservation looked at,
// not only the last one's. The lists the session has already called an
// element of come first, then the others, each group the most recent
// first: an agent finishes one list before it starts the next.
//
// With Lines, the value at Path is a text (a text output read whole, or a
// JSON string) and its elements are its lines, trimmed, the empty ones
// skipped: a listing printed one entry a line ("[FILE] notes.md"). An
// item mapping then reads the line as a JSON string (Path "").
type ListSource struct {
	From  Ref    `json:"from"`
	Part  string `json:"part"`
	Path  string `json:"path"`
	Every bool   `json:"every,omitempty"`
	Lines bool   `json:"lines,omitempty"`
}

// MaxEvery bounds the events a ListSource with Every reads.
const MaxEvery = 8

// TextSel selects from a text: line Line (negative counts from the end:
// -1 is the last line), trimmed; then, if Token is set, its token Token
// (negative from the end). See the package doc for tokens.
type TextSel struct {
	Line  int  `json:"line"`
	Token *int `json:"token,omitempty"`
}

// Mapping derives one argument. Either Const is its value, or the value is
// read at Path (a JSON pointer, stepping into JSON documents inside
// strings) in Part of the event From (Part "item": in the current list
// element); then Text selects a line or token of it, Norm normalises it,
// and the result is Prefix + value + Suffix, preceded by the value at Base
// when set. A mapping with none of Text, Norm, Prefix, Suffix, Base passes
// the JSON value through unchanged.
type Mapping struct {
	Arg    string          `json:"arg"`
	Const  json.RawMessage `json:"const,omitempty"`
	From   *Ref            `json:"from,omitempty"`
	Part   string          `json:"part,omitempty"`
	Path   string          `json:"path,omitempty"`
	Text   *TextSel        `json:"text,omitempty"`
	Norm   string          `json:"norm,omitempty"`
	Prefix string          `json:"prefix,omitempty"`
	Suffix string          `json:"suffix,omitempty"`
	Base   *Base           `json:"base,omitempty"`
}

// Base is the first part of a value made of two sources: a string (or
// number) at Path in Part of an event. Without From, the event is the one
// the rest of the value is read from (for an item mapping, the event of
// the list): a folder an agent listed joined with a name the listing
// returned ("/work/a" + "/" + "notes.md"). With From, it is an event of
// its own (a context element, or the session's most recent event of a
// signature): the folder an earlier call created joined with each name a
// later listing returned, a base URL one call gave and an id another
// listed. The mapping's Prefix is the constant between the two parts.
//
// With Text, the first part is a line or token of that string: a word of
// an earlier argument (the program an agent ran its last script with,
// joined with the name of the script it has just written). A frame the
// privacy rule keeps out of the pool as a constant ("python3 ") is then
// read from the session that says it.
type Base struct {
	From *Ref     `json:"from,omitempty"`
	Part string   `json:"part"`
	Path string   `json:"path"`
	Text *TextSel `json:"text,omitempty"`
}

// Norm names a normalisation applied to a selected string before it is
// placed in its template.
const (
	NormNone  = text.None
	NormLower = text.Lower // strings.ToLower
	NormUpper = text.Upper // strings.ToUpper
	NormClean = text.Clean // path.Clean: "./a//b/" → "a/b"
	NormBase  = text.Base  // path.Base: "src/a.py" → "a.py"
	NormDir   = text.Dir   // path.Dir: "src/a.py" → "src"
)

// MappingKey identifies what a pattern computes its calls from: its list
// and mappings, as JSON. Patterns of one tool with the same key give the
// same candidates from the same events.
func (pt *Pattern) MappingKey() string {
	b, _ := json.Marshal(struct {
		L *ListSource
		A []Mapping
	}{pt.List, pt.Args})
	return string(b)
}

func (m *Mapping) template() bool {
	return m.Text != nil || m.Norm != "" || m.Prefix != "" || m.Suffix != "" || m.Base != nil
}

// Encode writes the pool as JSON, one pattern per line so that pools diff
// well. Identical pools give identical bytes. What the privacy rule
// forbids is left out (private.go), unless Mined.KeepValues.
func (p *Pool) Encode(w io.Writer) error {
	p = p.private()
	var b bytes.Buffer
	head := *p
	head.Version = Version
	head.Patterns = nil
	fmt.Fprintf(&b, "{\"version\": %d,\n\"mined\": ", Version)
	if err := appendJSON(&b, head.Mined); err != nil {
		return err
	}
	b.WriteString(",\n\"discriminators\": [")
	for i, d := range p.Discriminators {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("\n  ")
		if err := appendJSON(&b, d); err != nil {
			return err
		}
	}
	b.WriteString("],\n\"patterns\": [")
	for i := range p.Patterns {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("\n  ")
		if err := appendJSON(&b, &p.Patterns[i]); err != nil {
			return err
		}
	}
	b.WriteString("]")
	if len(p.Conversation) > 0 {
		b.WriteString(",\n\"conversation\": ")
		if err := json.Compact(&b, p.Conversation); err != nil {
			return fmt.Errorf("pattern: conversation model: %w", err)
		}
	}
	b.WriteString("}\n")
	_, err := w.Write(b.Bytes())
	return err
}

func appendJSON(b *bytes.Buffer, v any) error {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	b.Truncate(b.Len() - 1) // the encoder's newline
	return nil
}

// Save writes the pool to path atomically: to a temporary file in the same
// directory, synced, then renamed over path. A crash leaves the old pool or
// the new one, never a torn file.
func (p *Pool) Save(path string) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("saving pool: %w", err)
	}
	tmp := f.Name()
	err = f.Chmod(0o644) // CreateTemp's 0600 is for secrets; a pool is not one
	if err == nil {
		err = p.Encode(f)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("saving pool: %w", err)
	}
	return nil
}

// Load reads and validates a pool file.
func Load(path string) (*Pool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	p, err := Decode(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

// Decode parses and validates a pool. Constants are canonicalised.
func Decode(data []byte) (*Pool, error) {
	var probe struct {
		Version *int `json:"version"`
	}
	if err := json.Unmarshal(data, &probe); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if probe.Version == nil {
		return nil, fmt.Errorf("%w: no version field", ErrInvalid)
	}
	if *probe.Version != Version {
		return nil, fmt.Errorf("%w %d (this ahead reads version %d)", ErrVersion, *probe.Version, Version)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var p Pool
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if err := p.validate(); err != nil {
		return nil, err
	}
	return &p, nil
}

func (p *Pool) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
	}
	discs := make(map[string]bool)
	for i, d := range p.Discriminators {
		switch {
		case d.Tool == "" || d.Arg == "":
			return bad("discriminators[%d]: empty tool or arg", i)
		case d.Kind != KindValue && d.Kind != KindWord:
			return bad("discriminators[%d]: unknown kind %q", i, d.Kind)
		case discs[d.Tool]:
			return bad("discriminators[%d]: second discriminator for tool %q", i, d.Tool)
		}
		discs[d.Tool] = true
	}
	if p.Mined.Horizon < 0 || p.Mined.Horizon > MaxHorizon {
		return bad("mined.horizon %d out of range 0..%d", p.Mined.Horizon, MaxHorizon)
	}
	for i := range p.Patterns {
		if err := p.Patterns[i].validate(); err != nil {
			return bad("patterns[%d]: %v", i, err)
		}
	}
	return nil
}

func (pt *Pattern) validate() error {
	n := len(pt.Context)
	if n == 0 || n > MaxContextLimit+1 {
		return fmt.Errorf("context has %d elements (want 1 to %d)", n, MaxContextLimit+1)
	}
	for j, s := range pt.Context {
		if s.Start != (s.Tool == "") {
			return fmt.Errorf("context[%d]: a signature has a tool or is the start", j)
		}
		if s.Start && j != 0 {
			return fmt.Errorf("context[%d]: the session start can only come first", j)
		}
	}
	if n > 1 && pt.Context[n-1].Start {
		return errors.New("context ends with the session start")
	}
	if pt.Tool == "" {
		return errors.New("empty tool")
	}
	if len(pt.Hits) == 0 || len(pt.Hits) > 64 {
		return fmt.Errorf("hits has %d ranks (want 1 to 64)", len(pt.Hits))
	}
	if pt.Repeats < 0 || pt.RepeatHits < 0 || pt.RepeatHits > pt.Repeats || pt.Repeats > pt.Support {
		return errors.New("repeats: counts out of range")
	}
	if pt.Support < 0 || pt.ToolHits < 0 || pt.ElseSupport < 0 || pt.ElseHits < 0 || slices.ContainsFunc(pt.Hits, func(h int) bool { return h < 0 }) {
		return errors.New("negative counts")
	}
	if pt.Soon != nil {
		if len(pt.Soon) != len(pt.Hits) {
			return fmt.Errorf("soon has %d ranks, hits %d", len(pt.Soon), len(pt.Hits))
		}
		if slices.ContainsFunc(pt.Soon, func(h int) bool { return h < 0 || h > pt.Support }) {
			return errors.New("soon: counts out of range")
		}
	}
	if pt.List != nil {
		if err := checkRef(pt.List.From, pt.Context, "list"); err != nil {
			return err
		}
		if pt.List.Every && pt.List.From.Sig == nil {
			return errors.New("list: every needs a signature reference")
		}
		if pt.List.Every && pt.List.From.Nth != 0 {
			return errors.New("list: every reads the recent events from the most recent, not the nth")
		}
		if pt.List.Part != PartArgs && pt.List.Part != PartOutput {
			return fmt.Errorf("list: part %q (want args or output)", pt.List.Part)
		}
		if _, ok := rawjson.ParsePointer(pt.List.Path); !ok {
			return fmt.Errorf("list: path %q is not a JSON pointer", pt.List.Path)
		}
	}
	for j := range pt.Args {
		m := &pt.Args[j]
		if err := m.validate(pt); err != nil {
			return fmt.Errorf("args[%d] (%s): %v", j, m.Arg, err)
		}
		if j > 0 && pt.Args[j-1].Arg >= m.Arg {
			return fmt.Errorf("args[%d]: arguments not sorted or repeated", j)
		}
	}
	return nil
}

func checkRef(r Ref, ctx []Signature, what string) error {
	if r.Sig != nil {
		if r.Sig.Start || r.Sig.Tool == "" {
			return fmt.Errorf("%s: a signature reference needs a tool", what)
		}
		if r.Nth < 0 || r.Nth >= MaxEvery {
			return fmt.Errorf("%s: nth %d out of range (0 to %d)", what, r.Nth, MaxEvery-1)
		}
		return nil
	}
	if r.Nth != 0 {
		return fmt.Errorf("%s: nth needs a signature reference", what)
	}
	if r.Ctx < 0 || r.Ctx >= len(ctx) || ctx[len(ctx)-1-r.Ctx].Start {
		return fmt.Errorf("%s: ctx %d does not name an event of the context", what, r.Ctx)
	}
	return nil
}

func (m *Mapping) validate(pt *Pattern) error {
	if m.Arg == "" {
		return errors.New("empty argument name")
	}
	if m.Const != nil {
		if m.From != nil || m.Part != "" || m.Path != "" || m.template() {
			return errors.New("a constant has no source")
		}
		c, err := callkey.CanonicalValue(m.Const)
		if err != nil {
			return fmt.Errorf("const: %v", err)
		}
		m.Const = c
		return nil
	}
	switch m.Part {
	case PartItem:
		if pt.List == nil {
			return errors.New("an item mapping needs the pattern's list")
		}
		if m.From != nil {
			return errors.New("an item mapping reads the list element, not an event")
		}
	case PartArgs, PartOutput:
		if m.From == nil {
			return errors.New("no source event")
		}
		if err := checkRef(*m.From, pt.Context, "from"); err != nil {
			return err
		}
	default:
		return fmt.Errorf("part %q (want args, output or item)", m.Part)
	}
	if _, ok := rawjson.ParsePointer(m.Path); !ok {
		return fmt.Errorf("path %q is not a JSON pointer", m.Path)
	}
	if _, ok := text.Normalize("", m.Norm); !ok {
		return fmt.Errorf("unknown norm %q", m.Norm)
	}
	if b := m.Base; b != nil {
		if b.From != nil {
			if err := checkRef(*b.From, pt.Context, "base: from"); err != nil {
				return err
			}
		}
		if b.Part != PartArgs && b.Part != PartOutput {
			return fmt.Errorf("base: part %q (want args or output)", b.Part)
		}
		if _, ok := rawjson.ParsePointer(b.Path); !ok {
			return fmt.Errorf("base: path %q is not a JSON pointer", b.Path)
		}
	}
	return nil
}

// FormatContext formats a context as "a → b → c".
func FormatContext(ctx []Signature) string {
	parts := make([]string, len(ctx))
	for i, s := range ctx {
		parts[i] = s.String()
	}
	return strings.Join(parts, " → ")
}
