package pattern

import (
	"encoding/json"
	"slices"
	"unicode"
)

// The privacy rule (issue 23; README "Privacy"): a pool holds, as
// constants, no string that may be something a user said or is: none with
// a digit, '@' or '#', or a capitalised word (order ids such as
// "#W4689314", user ids, e-mail addresses, names such as "Daiki").
// Numbers, booleans, lower-case words ("economy") and words in capitals
// ("README", "JFK": conventions and codes, not names) stay. It holds for every pool written, by
// whatever made it (mining, online learning, merges, checkpoints): Encode
// leaves out what breaks it, unless the pool records that its user opted
// in (Mined.KeepValues, `ahead mine --keep-values`). The conversation
// model (Pool.Conversation) keeps the same rule itself (package convo).
//
// Constants are a mapping's Const (every string in it, object keys too),
// its Prefix and Suffix, and the values of discriminators (which contexts
// then name). A pattern with such a constant is left out whole; a
// discriminator value is dropped, and the patterns whose signatures name
// it with it.

// Identifying reports whether s may identify a user by the privacy rule:
// it contains a digit, '@', '#', or a capitalised word (an upper-case
// letter followed by a lower-case one: "Daiki", "iPhone").
func Identifying(s string) bool {
	upper := false
	for _, r := range s {
		switch {
		case r == '@' || r == '#' || unicode.IsDigit(r):
			return true
		case upper && unicode.IsLower(r):
			return true
		}
		upper = unicode.IsUpper(r)
	}
	return false
}

// IdentifyingJSON reports whether a JSON value holds a string (or an
// object key) that is Identifying. Invalid JSON counts as identifying.
func IdentifyingJSON(v json.RawMessage) bool {
	var x any
	if json.Unmarshal(v, &x) != nil {
		return true
	}
	return identifyingValue(x)
}

func identifyingValue(x any) bool {
	switch x := x.(type) {
	case string:
		return Identifying(x)
	case []any:
		return slices.ContainsFunc(x, identifyingValue)
	case map[string]any:
		for k, v := range x {
			if Identifying(k) || identifyingValue(v) {
				return true
			}
		}
	}
	return false
}

// identifying reports whether the pattern holds a constant the rule
// forbids, or names in a signature a discriminator value not in kept.
func (pt *Pattern) identifying(kept map[string]bool) bool {
	for i := range pt.Args {
		m := &pt.Args[i]
		if m.Const != nil && IdentifyingJSON(m.Const) || Identifying(m.Prefix) || Identifying(m.Suffix) {
			return true
		}
	}
	sigs := slices.Clone(pt.Context)
	for _, r := range pt.refs() {
		if r.Sig != nil {
			sigs = append(sigs, *r.Sig)
		}
	}
	for _, s := range sigs {
		if s.Value != "" && s.Value != Other && !kept[s.Tool+"\x00"+s.Value] {
			return true
		}
	}
	return false
}

// refs returns the event references of the pattern's list and mappings.
func (pt *Pattern) refs() []Ref {
	var out []Ref
	if pt.List != nil {
		out = append(out, pt.List.From)
	}
	for _, m := range pt.Args {
		if m.From != nil {
			out = append(out, *m.From)
		}
		if m.Base != nil && m.Base.From != nil {
			out = append(out, *m.Base.From)
		}
	}
	return out
}

// private returns the pool as it may be written: unless KeepValues, the
// discriminator values and patterns the privacy rule forbids are left out
// (see the comment at the top of this file). p is not changed; the
// result shares what is unchanged.
func (p *Pool) private() *Pool {
	if p.Mined.KeepValues {
		return p
	}
	q := *p
	kept := make(map[string]bool)
	q.Discriminators = make([]Discriminator, len(p.Discriminators))
	for i, d := range p.Discriminators {
		d.Values = slices.DeleteFunc(slices.Clone(d.Values), Identifying)
		for _, v := range d.Values {
			kept[d.Tool+"\x00"+v] = true
		}
		q.Discriminators[i] = d
	}
	q.Patterns = make([]Pattern, 0, len(p.Patterns))
	for i := range p.Patterns {
		if !p.Patterns[i].identifying(kept) {
			q.Patterns = append(q.Patterns, p.Patterns[i])
		}
	}
	return &q
}

// Scrub applies the privacy rule to the pool in place, as Encode does to
// what it writes, and returns how many patterns it left out. Miners call
// it so that what they evaluate is what they write.
func (p *Pool) Scrub() int {
	q := p.private()
	n := len(p.Patterns) - len(q.Patterns)
	*p = *q
	return n
}
