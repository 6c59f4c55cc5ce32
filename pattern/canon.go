package pattern

import (
	"github.com/ahead-dev/ahead/callkey"
	"github.com/ahead-dev/ahead/internal/rawjson"
)

// CanonicalArgs returns the canonical JSON of a call's arguments (see
// callkey.Canonical), fast when they are canonical already, as the engine
// passes them: a single scan checks that instead of re-encoding.
//
// The scan is not an encoder (callkey is the only one): it tells callkey's
// output from anything else, and is fuzzed against callkey to never say
// yes wrongly. It stays because the predictor runs it on every event: on
// the arguments of both shared trace files (canonical, as the engine
// passes them) it takes 258 ns and no allocation against callkey.Canonical's
// 519 ns and one (216 B); using callkey instead costs the Observe
// benchmark an allocation per event (9 -> 10) and about 0.2 us at p50.
func CanonicalArgs(args []byte) ([]byte, error) {
	if rawjson.IsCanonical(args) {
		return args, nil
	}
	return callkey.Canonical(args)
}
