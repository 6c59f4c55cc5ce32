package engine

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ahead-dev/ahead/predict"
	"github.com/ahead-dev/ahead/sched"
)

// metrics are the engine's Prometheus collectors. They are registered on
// the Registerer given in Options (never a global registry), so two engines
// can run in one process.
type metrics struct {
	calls         *prometheus.CounterVec   // tool, source
	callErrors    *prometheus.CounterVec   // tool
	latency       *prometheus.HistogramVec // source
	saved         *prometheus.CounterVec   // tool
	specStarted   *prometheus.CounterVec   // tool
	declined      *prometheus.CounterVec   // tool
	outcomes      *prometheus.CounterVec   // tool, outcome
	wastedSeconds *prometheus.CounterVec   // tool
	byOrigin      *prometheus.CounterVec   // origin, outcome
	reg           prometheus.Registerer

	mu    sync.Mutex      // protects tools
	tools map[string]bool // tool labels in use
}

// maxToolLabels caps the distinct tool labels (and the tools with
// statistics of their own: toolLocked): tool names come from clients, and a
// client naming a new tool in every call must not grow the metrics without
// bound. Tools beyond the cap are counted as otherTools.
const maxToolLabels = 256

// maxToolName is the longest tool name with a label of its own (MCP's
// limit on tool names): 256 names of a request body's size each would be
// gigabytes.
const maxToolName = 128

// otherTools is the label of the tools beyond the caps.
const otherTools = "other"

// tool returns the label for a tool name.
func (m *metrics) tool(name string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.tools[name] {
		return name
	}
	if len(m.tools) >= maxToolLabels || len(name) > maxToolName {
		return otherTools
	}
	m.tools[name] = true
	return name
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ahead_calls_total", Help: "Authoritative calls served, by tool and source (executed, reused, promoted).",
		}, []string{"tool", "source"}),
		callErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ahead_call_failures_total", Help: "Authoritative calls that could not be served (backend unreachable, cancelled).",
		}, []string{"tool"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "ahead_call_duration_seconds",
			Help:    "Time an authoritative call spent in ahead, from arrival to result, by source.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2.5, 14),
		}, []string{"source"}),
		saved: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ahead_saved_seconds_total", Help: "Tool time agents did not wait thanks to speculation.",
		}, []string{"tool"}),
		specStarted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ahead_speculative_started_total", Help: "Speculative executions started.",
		}, []string{"tool"}),
		declined: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ahead_speculative_declined_total", Help: "Predictions not run for want of amplification budget.",
		}, []string{"tool"}),
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ahead_speculative_outcomes_total",
			Help: "Fates of speculative work: reused, promoted, expired, invalidated, evicted, preempted, dropped, failed, cancelled, warmed.",
		}, []string{"tool", "outcome"}),
		wastedSeconds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ahead_wasted_seconds_total", Help: "Time spent on speculative executions nobody claimed.",
		}, []string{"tool"}),
		byOrigin: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ahead_speculative_origin_outcomes_total",
			Help: "Fates of speculative work by the origin of its prediction (pattern, message, stream, speculator); work several origins predicted counts for each.",
		}, []string{"origin", "outcome"}),
		reg:   reg,
		tools: make(map[string]bool),
	}
	if reg != nil {
		reg.MustRegister(m.calls, m.callErrors, m.latency, m.saved, m.specStarted, m.declined, m.outcomes, m.wastedSeconds, m.byOrigin)
	}
	return m
}

// collectQueues exports the scheduler's load as gauges read at scrape time.
func (m *metrics) collectQueues(s *sched.Scheduler) {
	if m.reg == nil {
		return
	}
	m.reg.MustRegister(&loadCollector{s: s, desc: prometheus.NewDesc(
		"ahead_backend_load", "Backend slots in use and queue depths, by kind (slots, 0 when real calls are not limited; auth_running, spec_running, auth_queued, spec_queued).",
		[]string{"backend", "kind"}, nil),
		refused: prometheus.NewDesc("ahead_backend_refused_total", "Authoritative calls refused because the backend's queue was full (HTTP 503).",
			[]string{"backend"}, nil)})
}

func (m *metrics) observeCall(tool string, src Source, d, saved time.Duration, err error) {
	if err != nil {
		m.callErrors.WithLabelValues(m.tool(tool)).Inc()
		return
	}
	m.calls.WithLabelValues(m.tool(tool), string(src)).Inc()
	m.latency.WithLabelValues(string(src)).Observe(d.Seconds())
	if saved > 0 {
		m.saved.WithLabelValues(m.tool(tool)).Add(saved.Seconds())
	}
}

func (m *metrics) specOutcome(tool string, o Outcome) {
	m.outcomes.WithLabelValues(m.tool(tool), string(o)).Inc()
}

func (m *metrics) originOutcome(os origins, o Outcome) {
	os.each(func(or predict.Origin) { m.byOrigin.WithLabelValues(string(or), string(o)).Inc() })
}

type loadCollector struct {
	s             *sched.Scheduler
	desc, refused *prometheus.Desc
}

func (c *loadCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc; ch <- c.refused }

func (c *loadCollector) Collect(ch chan<- prometheus.Metric) {
	for name, l := range c.s.Load() {
		for kind, v := range map[string]int{
			"slots": l.Slots, "auth_running": l.AuthRunning, "spec_running": l.SpecRunning,
			"auth_queued": l.AuthQueued, "spec_queued": l.SpecQueued,
		} {
			ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(v), name, kind)
		}
		ch <- prometheus.MustNewConstMetric(c.refused, prometheus.CounterValue, float64(l.Refused), name)
	}
}
