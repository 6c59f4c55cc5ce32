package convo

// How a call's argument values are read, by mining and by Fresh alike: a
// value's kind and the text a mention of it would show, its canonical
// form as a constant, its hash as a candidate.

import (
	"encoding/json"
	"slices"
)

// scalar returns the kind of an argument's value ("string", "number" or
// "other") and, for a string or a number, the text a mention of it in the
// conversation would show; ok is false where there is none to look for.
func scalar(raw json.RawMessage) (v, kind string, ok bool) {
	switch {
	case len(raw) > 0 && raw[0] == '"':
		if json.Unmarshal(raw, &v) != nil {
			return "", "string", false
		}
		return v, "string", true
	case len(raw) > 0 && (raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9'):
		return string(raw), "number", true
	default:
		return "", "other", false
	}
}

// sameValues reports whether two of a call's scalar argument values (as
// candidates hash them) are equal; ok is false with fewer than two. buf
// is scratch space, returned for the next call.
func sameValues(buf []uint64, args map[string]json.RawMessage, keys []string) (_ []uint64, same, ok bool) {
	hs := buf[:0]
	for _, k := range keys {
		raw := args[k]
		if len(raw) == 0 || raw[0] == '{' || raw[0] == '[' {
			continue
		}
		if h, ok := valueHash(raw); ok {
			hs = append(hs, h)
		}
	}
	if len(hs) < 2 {
		return hs, false, false
	}
	slices.Sort(hs)
	return hs, len(slices.Compact(hs)) < len(hs), true
}

// canonValue returns a value's canonical JSON, or false if it is not one
// a model may keep as a constant (ISSUE-NOTES, privacy): numbers,
// booleans and null, and strings (also inside arrays and objects) without
// a digit, '@', '#' or an upper-case letter.
func canonValue(raw json.RawMessage) (string, bool) {
	var x any
	if json.Unmarshal(raw, &x) != nil {
		return "", false
	}
	if !keepable(x) {
		return "", false
	}
	b, err := json.Marshal(x)
	if err != nil || len(b) > 256 {
		return "", false
	}
	return string(b), true
}

// valueHash returns the hash of a value as candidates hash it: a
// string's text, a number's JSON.
func valueHash(raw json.RawMessage) (uint64, bool) {
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return 0, false
		}
		return hashString(s), true
	}
	if len(raw) > 0 && (raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9') {
		return hashString(string(raw)), true
	}
	if c, ok := canonValue(raw); ok {
		return hashString(c), true
	}
	return 0, false
}
