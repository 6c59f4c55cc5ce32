package policy

import (
	"bytes"
	"encoding/json"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/ahead-dev/ahead/callkey"
)

// Kind says how the values of a resource argument compare.
type Kind int

const (
	// KindID compares values as canonical JSON, numbers by value: 7 and
	// 7.0 name one resource, 7 and "7" two, "a" and "./a" two.
	KindID Kind = iota
	// KindPath compares slash-separated file paths after cleaning them
	// (path.Clean): "./a", "a/" and "b/../a" all name "a". A relative
	// path and an absolute one stay different (ahead does not know the
	// tool's working directory).
	KindPath
	// KindURL compares URLs with the scheme and host lower-cased, the
	// default port and the fragment dropped, and the path cleaned (so a
	// trailing slash does not matter). The query is kept as written.
	KindURL
)

var kindNames = [...]string{"id", "path", "url"}

func (k Kind) String() string {
	if k < 0 || int(k) >= len(kindNames) {
		return "invalid"
	}
	return kindNames[k]
}

// Ref names an argument whose value identifies a resource a tool reads or
// writes, and how such values compare. An argument holding a list names
// each of its elements.
type Ref struct {
	Arg string
	As  Kind
}

func (r Ref) String() string {
	if r.As == KindID {
		return r.Arg
	}
	return r.Arg + " as " + r.As.String()
}

// Refs returns a Ref of KindID for each argument name: `reads: [a, b]`.
func Refs(args ...string) []Ref {
	refs := make([]Ref, len(args))
	for i, a := range args {
		refs[i] = Ref{Arg: a}
	}
	return refs
}

// Resources returns the resources a call with args names through refs, as
// canonical JSON of each normalised value (sorted, without duplicates). It
// reports false if refs is empty or an argument is missing or cannot be
// read: then the call names no resource it can be held to.
func Resources(args json.RawMessage, refs []Ref) ([]string, bool) {
	if len(refs) == 0 {
		return nil, false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(args, &m) != nil {
		return nil, false
	}
	var out []string
	for _, r := range refs {
		v, ok := m[r.Arg]
		if !ok {
			return nil, false
		}
		var list []json.RawMessage
		if json.Unmarshal(v, &list) != nil {
			list = []json.RawMessage{v} // not a list: one value
		}
		for _, e := range list {
			c, ok := normalise(e, r.As)
			if !ok {
				return nil, false
			}
			out = append(out, c)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), true
}

// normalise returns the canonical JSON of a resource value of kind k.
func normalise(v json.RawMessage, k Kind) (string, bool) {
	if k == KindID {
		var f float64
		if v = bytes.TrimSpace(v); len(v) > 0 && (v[0] == '-' || v[0] >= '0' && v[0] <= '9') && json.Unmarshal(v, &f) == nil {
			// By value (canonical JSON keeps 7 and 7.0 apart). Numbers too
			// big to tell apart as float64 become one resource: a write
			// then invalidates more, never less.
			return strconv.FormatFloat(f, 'g', -1, 64), true
		}
	} else {
		var s string
		if json.Unmarshal(v, &s) != nil {
			return "", false // a path or URL is a string
		}
		if k == KindPath {
			s = path.Clean(s)
		} else {
			s = normaliseURL(s)
		}
		b, err := json.Marshal(s)
		if err != nil {
			return "", false
		}
		v = b
	}
	c, err := callkey.CanonicalValue(v)
	if err != nil {
		return "", false
	}
	return string(c), true
}

func normaliseURL(s string) string {
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil || u.Scheme == "" || u.Opaque != "" {
		return s // not a URL ahead can take apart: compared as written
	}
	u.Scheme = strings.ToLower(u.Scheme)
	u.Host = strings.ToLower(u.Host)
	if p := u.Port(); (p == "80" && u.Scheme == "http") || (p == "443" && u.Scheme == "https") {
		u.Host = strings.TrimSuffix(u.Host, ":"+p)
	}
	u.Fragment, u.RawFragment = "", ""
	p := path.Clean("/" + u.Path)
	if p == "/" && u.RawQuery == "" {
		p = ""
	}
	u.Path, u.RawPath = p, ""
	return u.String()
}

// Effect is what a call may change, by the hazard rule.
type Effect struct {
	// ReadOnly: the call changes nothing.
	ReadOnly bool
	// All: the call may change anything (it is not read-only and names
	// no resource it writes).
	All bool
	// Resources are the resources the call writes, otherwise.
	Resources []string
}

// Effect returns what a call of this tool with args may change.
func (t Tool) Effect(args json.RawMessage) Effect {
	if t.IsReadOnly() {
		return Effect{ReadOnly: true}
	}
	res, ok := Resources(args, t.Writes)
	if !ok {
		return Effect{All: true}
	}
	return Effect{Resources: res}
}

// Footprint is what the result of a call may depend on.
type Footprint struct {
	// Any: the result may depend on anything (the tool is not read-only,
	// or names no resource it reads).
	Any bool
	// Resources are the resources it reads, otherwise.
	Resources []string
}

// Footprint returns what the result of a call of this tool with args may
// depend on.
func (t Tool) Footprint(args json.RawMessage) Footprint {
	if !t.IsReadOnly() {
		return Footprint{Any: true}
	}
	res, ok := Resources(args, t.Reads)
	if !ok {
		return Footprint{Any: true}
	}
	return Footprint{Resources: res}
}

// Invalidates is the hazard rule, the one place that says which write
// invalidates which read: a read-only call changes nothing; a call that
// names the resources it writes changes the reads of those resources and
// the reads that name none; any other call may change anything.
func (ef Effect) Invalidates(fp Footprint) bool {
	switch {
	case ef.ReadOnly:
		return false
	case ef.All, fp.Any:
		return true
	}
	for _, w := range ef.Resources {
		if _, ok := slices.BinarySearch(fp.Resources, w); ok {
			return true
		}
	}
	return false
}

// Invalidates reports whether a call of tool w with arguments wargs may
// change what a call of tool r with arguments rargs returns (see
// Effect.Invalidates).
func (p *Policy) Invalidates(w string, wargs json.RawMessage, r string, rargs json.RawMessage) bool {
	return p.Lookup(w).Effect(wargs).Invalidates(p.Lookup(r).Footprint(rargs))
}
