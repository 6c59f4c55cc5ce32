package engine

import "github.com/ahead-dev/ahead/predict"

// Honest probabilities under the amplification budget (issue 10).
//
// An origin's p is fitted on other data than the sessions it serves: a
// pattern's p is its hit rate in the traces it was mined from, where it was
// chosen because it hit. Measured on held-out tau2 sessions, pattern guesses
// of p 0.3–0.6 were claimed one time in ten, conversation guesses of the
// same p one time in two, and whole tools' guesses of some origin never.
// The budget's price compares p with p, so an optimistic origin or tool
// takes executions an honest one would have used better.
//
// The engine therefore learns, per tool and origin, how many of the
// speculative executions it started were claimed against how many their p
// promised, and scales each new prediction's p by that ratio before the
// floor, the budget's price and the utility see it. The ratio starts at 1
// (calPrior pseudo-hits on each side) and follows the recent past (counts
// halved past calWindow promised hits).

// calPrior is the pseudo-count, in promised hits, that holds the ratio at 1
// until the evidence outweighs it.
const calPrior = 2

// calWindow is how many promised hits the counts keep before halving.
const calWindow = 100

// calibration counts one tool's executions predicted by one origin.
type calibration struct {
	hits     float64 // claimed
	expected float64 // the sum of their p
}

// scale is the factor between what p promised and what was claimed.
func (c *calibration) scale() float64 {
	return (c.hits + calPrior) / (c.expected + calPrior)
}

func (c *calibration) observe(p float64, hit bool) {
	c.expected += p
	if hit {
		c.hits++
	}
	if c.expected > calWindow {
		c.hits /= 2
		c.expected /= 2
	}
}

// honest scales p by what the origin's executions of the tool were worth
// so far, at most 1.
func (ts *toolStats) honest(o predict.Origin, p float64) float64 {
	i := originIndex(o)
	if i < 0 {
		return p
	}
	return min(p*ts.cal[i].scale(), 1)
}

// calibrateLocked counts a settled execution of en for each origin that
// predicted it, with the p that origin gave. Only outcomes that tell
// whether the guess was right count: a claim is a hit; a run that failed or
// whose result was never claimed (expired, evicted, ended with its session)
// is a miss; work invalidated by a write, preempted or never started says
// nothing about the guess.
func (e *Engine) calibrateLocked(en *entry, why Outcome) {
	var hit bool
	switch why {
	case OutcomeReused, OutcomePromoted:
		hit = true
	case OutcomeFailed, OutcomeExpired, OutcomeEvicted, OutcomeCancelled:
		if !en.ran || !en.done || en.refreshing {
			// A refreshed result's fate is its fresh run's.
			return
		}
	default:
		return
	}
	ts := e.toolLocked(en.key.Tool)
	for i := range en.raw {
		if en.origins&(1<<i) != 0 {
			ts.cal[i].observe(float64(en.raw[i]), hit)
		}
	}
}

// originIndex is o's position in predict.Origins (its bit in origins), or
// -1 for an origin this engine does not know.
func originIndex(o predict.Origin) int {
	for i, k := range predict.Origins {
		if k == o.Or() && i < maxOrigins {
			return i
		}
	}
	return -1
}
