package bench

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
)

// ErrBadArrival is wrapped by errors about an arrival process spec.
var ErrBadArrival = errors.New("bench: bad arrival process")

// Arrival is how sessions start. The zero value is a closed loop: at most
// Options.Concurrency sessions at once, the next starting when one ends.
type Arrival struct {
	// Kind is "" (closed loop), "poisson" or "bursty".
	Kind string
	// Rate is the mean number of sessions starting per second of trace
	// time (open loop: sessions start regardless of how many are running).
	Rate float64
	// Burst is how many sessions arrive together in a bursty process:
	// bursts arrive as a Poisson process of rate Rate/Burst.
	Burst int
}

// ParseArrival parses "closed", "poisson:RATE" or "bursty:RATE:SIZE", RATE
// in sessions per second of trace time.
func ParseArrival(s string) (Arrival, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w %q: %s", ErrBadArrival, s, fmt.Sprintf(format, args...))
	}
	parts := strings.Split(s, ":")
	rate := func(v string) (float64, error) {
		r, err := strconv.ParseFloat(v, 64)
		if err != nil || !(r > 0) || math.IsInf(r, 0) {
			return 0, bad("rate %q must be a positive number of sessions per second", v)
		}
		return r, nil
	}
	switch parts[0] {
	case "closed", "":
		if len(parts) != 1 {
			return Arrival{}, bad("closed takes no parameters (use --concurrency)")
		}
		return Arrival{}, nil
	case "poisson":
		if len(parts) != 2 {
			return Arrival{}, bad("want poisson:RATE")
		}
		r, err := rate(parts[1])
		if err != nil {
			return Arrival{}, err
		}
		return Arrival{Kind: "poisson", Rate: r, Burst: 1}, nil
	case "bursty":
		if len(parts) != 3 {
			return Arrival{}, bad("want bursty:RATE:SIZE")
		}
		r, err := rate(parts[1])
		if err != nil {
			return Arrival{}, err
		}
		n, err := strconv.Atoi(parts[2])
		if err != nil || n < 1 {
			return Arrival{}, bad("burst size %q must be a positive integer", parts[2])
		}
		return Arrival{Kind: "bursty", Rate: r, Burst: n}, nil
	}
	return Arrival{}, bad("want closed, poisson:RATE or bursty:RATE:SIZE")
}

func (a Arrival) String() string {
	switch a.Kind {
	case "poisson":
		return "poisson:" + strconv.FormatFloat(a.Rate, 'g', -1, 64)
	case "bursty":
		return "bursty:" + strconv.FormatFloat(a.Rate, 'g', -1, 64) + ":" + strconv.Itoa(a.Burst)
	}
	return "closed"
}

func (a Arrival) open() bool { return a.Kind != "" }

// offsets returns the start time (trace time) of n sessions, the same for
// every mode: exponential gaps between bursts, drawn from seed.
func (a Arrival) offsets(n int, seed uint64) []time.Duration {
	out := make([]time.Duration, n)
	if !a.open() {
		return out
	}
	burst := max(a.Burst, 1)
	rng := rand.New(rand.NewPCG(seed, 0x6172726976616c)) // "arrival"
	burstRate := a.Rate / float64(burst)
	var t float64 // seconds
	for i := range out {
		if i > 0 && i%burst == 0 {
			t += rng.ExpFloat64() / burstRate
		}
		out[i] = time.Duration(t * float64(time.Second))
	}
	return out
}
