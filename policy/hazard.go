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
	// KindPath compares slash-separated file paths as the files they may
	// name (paths.go): cleaned (path.Clean: "./a", "a/" and "b/../a" all
	// name "a"), relative paths resolved against the backend's root,
	// symlinks resolved where the backend runs on this machine; where
	// ahead cannot tell, they conflict.
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
	res, _, ok := resources(args, refs, PathSpace{})
	return res, ok
}

// resources returns what Resources does, and the paths among them as they
// compare in sp.
func resources(args json.RawMessage, refs []Ref, sp PathSpace) ([]string, []Path, bool) {
	if len(refs) == 0 {
		return nil, nil, false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(args, &m) != nil {
		return nil, nil, false
	}
	var out []string
	var paths []Path
	for _, r := range refs {
		v, ok := m[r.Arg]
		if !ok {
			return nil, nil, false
		}
		var list []json.RawMessage
		if json.Unmarshal(v, &list) != nil {
			list = []json.RawMessage{v} // not a list: one value
		}
		for _, e := range list {
			c, ok := normalise(e, r.As)
			if !ok {
				return nil, nil, false
			}
			out = append(out, c)
			if r.As == KindPath {
				var s string
				json.Unmarshal([]byte(c), &s) // a string: normalise made it
				paths = append(paths, resolvePath(s, sp))
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out), paths, true
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
	// Resources are the resources the call writes, otherwise; Paths
	// those of them declared as paths, as they compare (paths.go).
	Resources []string
	Paths     []Path
}

// Effect returns what a call of this tool with args may change, its paths
// compared knowing nothing of the backend (the zero PathSpace).
func (t Tool) Effect(args json.RawMessage) Effect { return t.EffectIn(args, PathSpace{}) }

// EffectIn returns what a call of this tool with args, on a backend whose
// paths name files as sp says, may change. It may stat the paths' folders
// (sp.Local).
func (t Tool) EffectIn(args json.RawMessage, sp PathSpace) Effect {
	if t.IsReadOnly() {
		return Effect{ReadOnly: true}
	}
	res, paths, ok := resources(args, t.Writes, sp)
	if !ok {
		return Effect{All: true}
	}
	return Effect{Resources: res, Paths: paths}
}

// Keys returns the index keys under which the reads this call may
// invalidate are filed (Footprint.Keys), apart from those that name no
// resource: its resources, and keys that find every read of a path it may
// conflict with. It is nil for a read-only call or one that may change
// anything.
func (ef Effect) Keys() []string {
	if ef.ReadOnly || ef.All {
		return nil
	}
	keys := slices.Clone(ef.Resources)
	for _, p := range ef.Paths {
		keys = p.writeKeys(keys)
	}
	return keys
}

// Footprint is what the result of a call may depend on.
type Footprint struct {
	// Any: the result may depend on anything (the tool is not read-only,
	// or names no resource it reads).
	Any bool
	// Resources are the resources it reads, otherwise; Paths those of
	// them declared as paths, as they compare (paths.go).
	Resources []string
	Paths     []Path
}

// Footprint returns what the result of a call of this tool with args may
// depend on, its paths compared knowing nothing of the backend.
func (t Tool) Footprint(args json.RawMessage) Footprint {
	return t.FootprintIn(args, PathSpace{})
}

// FootprintIn returns what the result of a call of this tool with args, on
// a backend whose paths name files as sp says, may depend on. It may stat
// the paths' folders (sp.Local).
func (t Tool) FootprintIn(args json.RawMessage, sp PathSpace) Footprint {
	if !t.IsReadOnly() {
		return Footprint{Any: true}
	}
	res, paths, ok := resources(args, t.Reads, sp)
	if !ok {
		return Footprint{Any: true}
	}
	return Footprint{Resources: res, Paths: paths}
}

// Keys returns the index keys a read with this footprint is filed under,
// so that a write finds it among those under its Effect.Keys: its
// resources, and for each path its last element, its elements and whether
// it is absolute. Nil when it may depend on anything.
func (fp Footprint) Keys() []string {
	if fp.Any {
		return nil
	}
	keys := slices.Clone(fp.Resources)
	for _, p := range fp.Paths {
		keys = p.readKeys(keys)
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

// Invalidates is the hazard rule, the one place that says which write
// invalidates which read: a read-only call changes nothing; a call that
// names the resources it writes changes the reads of those resources (for
// paths, of the files they may name: Path.Conflicts) and the reads that
// name none; any other call may change anything.
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
	for _, w := range ef.Paths {
		for _, r := range fp.Paths {
			if w.Conflicts(r) {
				return true
			}
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
