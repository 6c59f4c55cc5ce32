package speculator

import (
	"errors"
	"maps"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Reasons a request failed or was not made, the label values of
// ahead_speculator_failures_total and ahead_speculator_skipped_total.
const (
	// Failures: the request was made and yielded nothing usable (or less).
	ReasonDown        = "down"         // no connection, or a 5xx
	ReasonTimeout     = "timeout"      // no answer within Options.Timeout
	ReasonRateLimited = "rate_limited" // 429
	ReasonStatus      = "status"       // another HTTP error
	ReasonBadJSON     = "bad_json"     // the answer was not a chat completion
	ReasonNoGuesses   = "no_guesses"   // the answer held no tool call
	ReasonUnknownTool = "unknown_tool" // a guess named a tool the agent does not have
	ReasonBadArgs     = "bad_args"     // a guess's arguments were not a JSON object
	ReasonSchema      = "schema"       // a guess's arguments failed the tool's schema

	// Skips: admission declined to ask.
	ReasonSlow    = "slow"    // the answer would come after the agent's own call
	ReasonBudget  = "budget"  // the tokens per minute are spent
	ReasonNoGain  = "no_gain" // the expected saving does not pay the cost
	ReasonBackoff = "backoff" // the server failed or limited us recently
	ReasonNoTools = "no_tools"
	ReasonClosed  = "closed" // the window closed before a slot was free
)

// metrics are a speculator's Prometheus collectors, registered on
// Options.Registerer (never a global registry), and the same counts as
// plain numbers for Stats. The const label "speculator" says whether they
// count a model ("model") or the simulation ("simulation").
type metrics struct {
	requests, answers, guesses, hits, late, tokens prometheus.Counter
	failures, skipped                              *prometheus.CounterVec
	latency                                        prometheus.Histogram

	n struct {
		requests, answers, failures, skipped, guesses, hits, late, tokens atomic.Int64
	}
	mu                  sync.Mutex // protects the counts by reason
	failedBy, skippedBy map[string]int64
}

func newMetrics(reg prometheus.Registerer, kind string) (*metrics, error) {
	cl := prometheus.Labels{"speculator": kind}
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: cl})
	}
	m := &metrics{
		requests: counter("ahead_speculator_requests_total", "Requests made to the speculator (one per admitted think window)."),
		answers:  counter("ahead_speculator_answers_total", "Requests answered with a completion (in time or late; guesses valid or not)."),
		guesses:  counter("ahead_speculator_guesses_total", "Valid guesses offered to the engine."),
		hits:     counter("ahead_speculator_hits_total", "Guesses that matched one of the session's next calls."),
		late:     counter("ahead_speculator_late_total", "Answers dropped because the session's next call came first."),
		tokens:   counter("ahead_speculator_tokens_total", "Tokens the speculator's requests used (as reported, else estimated)."),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ahead_speculator_failures_total", ConstLabels: cl,
			Help: "Requests or guesses that yielded nothing, by reason (down, timeout, rate_limited, status, bad_json, no_guesses, unknown_tool, bad_args, schema).",
		}, []string{"reason"}),
		skipped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ahead_speculator_skipped_total", ConstLabels: cl,
			Help: "Think windows admission did not ask about, by reason (slow, budget, no_gain, backoff, no_tools, closed).",
		}, []string{"reason"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "ahead_speculator_latency_seconds", ConstLabels: cl,
			Help:    "Time from a request to its answer.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 12),
		}),
		failedBy: map[string]int64{}, skippedBy: map[string]int64{},
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.requests, m.answers, m.guesses, m.hits, m.late, m.tokens, m.failures, m.skipped, m.latency} {
			if err := reg.Register(c); err != nil {
				return nil, errors.Join(errors.New("speculator: registering metrics"), err)
			}
		}
	}
	return m, nil
}

func (m *metrics) request()        { m.requests.Inc(); m.n.requests.Add(1) }
func (m *metrics) guessed(n int)   { m.guesses.Add(float64(n)); m.n.guesses.Add(int64(n)) }
func (m *metrics) hit()            { m.hits.Inc(); m.n.hits.Add(1) }
func (m *metrics) lateAnswer()     { m.late.Inc(); m.n.late.Add(1) }
func (m *metrics) used(tokens int) { m.tokens.Add(float64(tokens)); m.n.tokens.Add(int64(tokens)) }
func (m *metrics) answered()       { m.answers.Inc(); m.n.answers.Add(1) }
func (m *metrics) failed(reason string) {
	m.failures.WithLabelValues(reason).Inc()
	m.n.failures.Add(1)
	m.mu.Lock()
	m.failedBy[reason]++
	m.mu.Unlock()
}
func (m *metrics) skip(reason string) {
	m.skipped.WithLabelValues(reason).Inc()
	m.n.skipped.Add(1)
	m.mu.Lock()
	m.skippedBy[reason]++
	m.mu.Unlock()
}

// Stats counts what a speculator (or the simulation) did, as its metrics
// do.
type Stats struct {
	// Requests made; Answers, those answered with a completion (in time
	// or late, its guesses valid or not).
	Requests int64 `json:"requests"`
	Answers  int64 `json:"answers"`
	// Failures are requests or guesses that yielded nothing (FailedBy
	// splits them by reason: ReasonDown, ReasonTimeout, ...); Skipped,
	// think windows admission did not ask about (SkippedBy: ReasonSlow,
	// ReasonBudget, ...).
	Failures  int64            `json:"failures"`
	FailedBy  map[string]int64 `json:"failures_by_reason,omitempty"`
	Skipped   int64            `json:"skipped"`
	SkippedBy map[string]int64 `json:"skipped_by_reason,omitempty"`
	// Guesses offered to the engine in time, Hits among them that matched
	// a next call, Late answers the session's call came before.
	Guesses int64 `json:"guesses"`
	Hits    int64 `json:"hits"`
	Late    int64 `json:"late"`
	// Tokens the requests used (as reported, else estimated).
	Tokens int64 `json:"tokens"`
}

func (m *metrics) stats() Stats {
	st := Stats{
		Requests: m.n.requests.Load(), Answers: m.n.answers.Load(), Failures: m.n.failures.Load(), Skipped: m.n.skipped.Load(),
		Guesses: m.n.guesses.Load(), Hits: m.n.hits.Load(), Late: m.n.late.Load(), Tokens: m.n.tokens.Load(),
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.failedBy) > 0 {
		st.FailedBy = maps.Clone(m.failedBy)
	}
	if len(m.skippedBy) > 0 {
		st.SkippedBy = maps.Clone(m.skippedBy)
	}
	return st
}
