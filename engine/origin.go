package engine

import (
	"time"

	"github.com/ahead-dev/ahead/predict"
)

// origins is the set of origins that predicted a speculative entry: the
// same call named by patterns and by the conversation is one entry, and
// each origin is credited with what became of it.
type origins uint8

// maxOrigins is how many origins an origins set can hold.
const maxOrigins = 8

func originBit(o predict.Origin) origins {
	for i, k := range predict.Origins {
		if k == o.Or() {
			return 1 << i
		}
	}
	return 0 // an origin this engine does not know is counted nowhere
}

func (s origins) each(f func(predict.Origin)) {
	for i, o := range predict.Origins {
		if s&(1<<i) != 0 {
			f(o)
		}
	}
}

// String joins the origins with commas ("pattern,message"), as recorded.
func (s origins) String() string {
	var b []byte
	s.each(func(o predict.Origin) {
		if len(b) > 0 {
			b = append(b, ',')
		}
		b = append(b, o...)
	})
	return string(b)
}

// OriginStats counts what one origin of predictions led to. An execution
// predicted by several origins counts for each of them. Reports show it
// in milliseconds, as httpapi.NewOriginStats makes it (/v1/stats, ahead
// bench's modes).
type OriginStats struct {
	// Offered counts predictions that passed the policy and became a
	// speculative entry or joined one.
	Offered int64
	// Started counts speculative executions started.
	Started int64
	// Reused and Promoted count entries an authoritative call claimed.
	Reused, Promoted int64
	// Wasted counts executions that ran and were never claimed.
	Wasted int64
	// Saved is the tool time agents did not wait thanks to this origin's
	// entries; WastedTime the time its unclaimed executions took.
	Saved, WastedTime time.Duration
}

func (e *Engine) originLocked(o predict.Origin) *OriginStats {
	st := e.st.origins[o]
	if st == nil {
		st = &OriginStats{}
		e.st.origins[o] = st
	}
	return st
}
