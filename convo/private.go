package convo

import "unicode"

// The privacy rule of a pool's constants (README, the **Privacy** item):
// the conversation model keeps as a constant no value that holds a string
// private reports.

// keepable reports whether x, a decoded JSON value, may be stored as a
// constant: no string in it, nor any object key, is private.
func keepable(x any) bool {
	switch x := x.(type) {
	case string:
		return !private(x)
	case []any:
		for _, e := range x {
			if !keepable(e) {
				return false
			}
		}
	case map[string]any:
		for k, e := range x {
			if private(k) || !keepable(e) {
				return false
			}
		}
	}
	return true
}

// private reports whether a string may not be stored as a constant: it
// has a digit, '@', '#' or an upper-case letter.
func private(s string) bool {
	for _, r := range s {
		if r == '@' || r == '#' || unicode.IsDigit(r) || unicode.IsUpper(r) {
			return true
		}
	}
	return false
}
