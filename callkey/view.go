package callkey

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/ahead-dev/ahead/internal/rawjson"
)

// errInvalidValue is CanonicalValueView's error for a literal or number
// that is not valid JSON: made once, as the miner meets many.
var errInvalidValue = fmt.Errorf("%w: invalid JSON value", ErrInvalidArgs)

// CanonicalView is Canonical without the copy when args are canonical
// already, as the engine passes them: then it returns args itself, and a
// single scan (rawjson.IsCanonical) has checked that instead of
// re-encoding. The result must not be modified.
//
// The scan is not an encoder: it tells this package's output from anything
// else, and is fuzzed against Canonical to never say yes wrongly. It stays
// because the predictor runs it on every event: on the arguments of both
// shared trace files (canonical, as the engine passes them) it takes 258 ns
// and no allocation against Canonical's 519 ns and one (216 B); using
// Canonical instead costs pattern's BenchmarkObserve an allocation per
// event (9 -> 10) and about 0.2 us at p50.
func CanonicalView(args []byte) ([]byte, error) {
	if rawjson.IsCanonical(args) {
		return args, nil
	}
	return Canonical(args)
}

// CanonicalValueView is CanonicalValue for a value with surrounding space
// (bytes.TrimSpace's), without the copy when the value is canonical already
// (always so for a string without escapes, a number or a literal): then it
// returns the trimmed value itself. The result must not be modified. The
// miner and the pattern index canonicalise every value they read this way.
func CanonicalValueView(raw []byte) ([]byte, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return nil, errInvalidValue
	}
	switch c := raw[0]; {
	case c == '"':
		if len(raw) < 2 {
			return nil, errInvalidValue
		}
		if bytes.IndexByte(raw[1:len(raw)-1], '\\') < 0 && rawjson.SkipString(raw, 0) == len(raw) && utf8.Valid(raw) && rawjson.NoControl(raw) {
			return raw, nil
		}
	case c == 't' || c == 'f' || c == 'n' || c == '-' || (c >= '0' && c <= '9'):
		// encoding/json is fast enough for a literal or a number.
		if json.Valid(raw) {
			return raw, nil
		}
		return nil, errInvalidValue
	}
	// Objects and arrays: already canonical (as the engine's arguments
	// are), which a scan tells without allocating, or encoded.
	if end, ok := rawjson.CanonicalEnd(raw, 0, 0); ok && end == len(raw) && utf8.Valid(raw) {
		return raw, nil
	}
	return CanonicalValue(raw)
}
