package bench

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/ahead-dev/ahead/predict"
)

// MarshalJSON flattens the session-time distribution into e2e_*_ms fields.
func (m *ModeResult) MarshalJSON() ([]byte, error) {
	type plain ModeResult
	return json.Marshal(struct {
		*plain
		E2EMean float64 `json:"e2e_mean_ms"`
		E2EP50  float64 `json:"e2e_p50_ms"`
		E2EP95  float64 `json:"e2e_p95_ms"`
		E2EP99  float64 `json:"e2e_p99_ms"`
		E2EMax  float64 `json:"e2e_max_ms"`
	}{(*plain)(m), m.E2E.Mean, m.E2E.P50, m.E2E.P95, m.E2E.P99, m.E2E.Max})
}

// MarshalJSON adds the modes, keyed by name, to the report's fields.
func (r *Report) MarshalJSON() ([]byte, error) {
	type plain Report
	modes := make(map[string]*ModeResult, len(r.Modes))
	var order []string
	for _, m := range r.Modes {
		modes[string(m.Mode)] = m
		order = append(order, string(m.Mode))
	}
	return json.Marshal(struct {
		*plain
		Modes     map[string]*ModeResult `json:"modes"`
		ModeOrder []string               `json:"mode_order"`
	}{(*plain)(r), modes, order})
}

// WriteJSON writes the report as one indented JSON object.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// noiseWarning is the A/A stall noise above which the table warns that
// the figures are not to be trusted.
const noiseWarning = 0.02

func secs(msv float64) string { return fmt.Sprintf("%.1fs", msv/1000) }

func pct(v *float64) string {
	if v == nil {
		return "n/a"
	}
	return fmt.Sprintf("%.1f%%", *v*100)
}

// WriteTable writes the report as a table per mode followed by the
// headline figures.
func (r *Report) WriteTable(w io.Writer) error {
	c := r.Config
	slots := "unlimited"
	if c.Slots > 0 {
		slots = fmt.Sprint(c.Slots)
	}
	load := fmt.Sprintf("closed loop, %d at once", c.Concurrency)
	if c.Arrival != "closed" {
		load = "arrivals " + c.Arrival
	}
	budget := "engine default"
	if c.SpecBudget > 0 {
		budget = fmt.Sprint(c.SpecBudget)
	}
	var b strings.Builder
	for _, w := range r.Warnings {
		fmt.Fprintf(&b, "warning: %s\n\n", w)
	}
	fmt.Fprintf(&b, "%d sessions, %d calls in %d steps; tool latency %s; think default %s; %s; slots %s; speculation budget %s; time scale %g\n",
		c.Sessions, c.Calls, c.Steps, c.Latency, c.ThinkDefault, load, slots, budget, c.TimeScale)
	if c.Model != "" {
		fmt.Fprintf(&b, "think times modelled: %s\n", c.Model)
	}
	if c.Speculator != "" {
		fmt.Fprintf(&b, "ahead mode with a speculator: %s\n", c.Speculator)
	}
	if c.Replicas > 0 {
		fmt.Fprintf(&b, "%d replicas per mode, sessions round-robin; ahead (replicas alone) and fleet (replicas sharing) learn from an empty pool, relearning every %d sessions a replica completes\n",
			c.Replicas, c.LearnEvery)
	}
	fmt.Fprintf(&b, "session and stall times in trace time (seconds)\n\n")

	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "mode\tmean\tp50\tp95\tp99\tstall\ttool\tspec/call\treused\tpromoted\twasted\tpreempted\tinvalidated\tmismatches\t")
	for _, m := range r.sortedModes() {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.2f\t%d\t%d\t%d\t%d\t%d\t%d\t\n",
			m.Mode, secs(m.E2E.Mean), secs(m.E2E.P50), secs(m.E2E.P95), secs(m.E2E.P99),
			secs(m.StallMS), secs(m.ToolMS), m.SpecPerCall,
			m.Reused, m.Promoted, m.Wasted, m.Outcomes["preempted"], m.Outcomes["invalidated"], m.Mismatches)
	}
	tw.Flush()
	b.WriteString("\n")

	if r.HiddenStallRatio != nil {
		fmt.Fprintf(&b, "hidden stall ratio  %.2f  (ahead hid %s of tool stall, the oracle %s)\n",
			*r.HiddenStallRatio, secs(*r.AheadHiddenMS), secs(*r.OracleHiddenMS))
	}
	if r.FleetHiddenStallRatio != nil {
		fmt.Fprintf(&b, "fleet hidden stall  %.2f", *r.FleetHiddenStallRatio)
		if r.FleetOverAlone != nil {
			fmt.Fprintf(&b, "  (×%.2f the hidden stall of the replicas learning alone)", *r.FleetOverAlone)
		}
		b.WriteString("\n")
	}
	if h := r.HiddenStallHalves; len(h) == 2 {
		n := r.Config.Sessions
		fmt.Fprintf(&b, "by half (ahead)     hidden stall ratio %s in sessions 1–%d, %s in sessions %d–%d\n", orDash(h[0]), n/2, orDash(h[1]), n/2+1, n)
	}
	if len(r.LearningCurves) > 0 {
		b.WriteString("learning curve      hidden stall ratio by fifth of the sessions:")
		for _, m := range []Mode{Ahead, Fleet} {
			if c, ok := r.LearningCurves[m]; ok {
				fmt.Fprintf(&b, " %s", m)
				for _, v := range c {
					fmt.Fprintf(&b, " %.2f", v)
				}
				b.WriteString(";")
			}
		}
		b.WriteString("\n")
	}
	if r.E2EReduction != nil {
		s, a := r.Mode(Serial), r.Mode(Ahead)
		fmt.Fprintf(&b, "e2e reduction       %s  (mean session %s serial, %s ahead)\n", pct(r.E2EReduction), secs(s.E2E.Mean), secs(a.E2E.Mean))
	}
	if r.SpecPerCall != nil {
		fmt.Fprintf(&b, "spec. executions    %.2f per authoritative call (ahead)\n", *r.SpecPerCall)
	}
	if a := r.Mode(Ahead); a != nil && len(a.Origins) > 0 {
		b.WriteString("by origin (ahead)  ")
		for _, o := range predict.Origins {
			if os, ok := a.Origins[string(o)]; ok {
				fmt.Fprintf(&b, " %s: %d started, %d reused, %d promoted, %d wasted;",
					o, os.Started, os.Reused, os.Promoted, os.Wasted)
			}
		}
		b.WriteString("\n")
	}
	if a := r.Mode(Ahead); a != nil && a.Speculator != nil {
		st := a.Speculator
		fmt.Fprintf(&b, "speculator (ahead)  %d requests, %d answers (%d late), %d guesses offered, %d hits; %d failures%s; %d windows skipped%s; %d tokens\n",
			st.Requests, st.Answers, st.Late, st.Guesses, st.Hits, st.Failures, byReason(st.FailedBy), st.Skipped, byReason(st.SkippedBy), st.Tokens)
	}
	calls := 0
	if len(r.Modes) > 0 {
		calls = int(r.Modes[0].Calls)
	}
	if r.Lossless {
		fmt.Fprintf(&b, "lossless            yes: every authoritative result of every mode equals the recording (%d calls per mode)\n", calls)
	} else {
		fmt.Fprintf(&b, "lossless            NO:")
		for _, m := range r.sortedModes() {
			if m.Mismatches > 0 || m.CallErrors > 0 {
				fmt.Fprintf(&b, " %s %d mismatches, %d errors;", m.Mode, m.Mismatches, m.CallErrors)
			}
		}
		b.WriteString("\n")
		for _, m := range r.sortedModes() {
			for _, x := range m.Examples {
				fmt.Fprintf(&b, "  %s: %s #%d %s (%s): recorded %q, got %q\n", m.Mode, x.Session, x.Index, x.Tool, x.Source, x.Want, x.Got)
			}
		}
	}
	if r.AANoise != nil {
		fmt.Fprintf(&b, "A/A noise           %s session time, %s stall (serial twice)\n", pct(r.AANoise), pct(r.AAStallNoise))
	}
	late := 0.0
	for _, m := range r.Modes {
		late = max(late, m.Lateness.P99)
	}
	fmt.Fprintf(&b, "timing              agents woke up at most %.0fms late (p99, trace time)\n", late)
	if r.AAStallNoise != nil && *r.AAStallNoise > noiseWarning {
		fmt.Fprintf(&b, "WARNING             A/A stall noise above %.0f%%: the machine was too busy for time scale %g; rerun with a larger --time-scale\n", noiseWarning*100, c.TimeScale)
	}
	if r.AllWrongSlowdown != nil {
		fmt.Fprintf(&b, "all-wrong control   %+.1f%% session time, stall ×%.3f vs serial\n", *r.AllWrongSlowdown*100, *r.AllWrongStallRatio)
	}
	if s, a := r.Mode(Serial), r.Mode(Ahead); s != nil && a != nil {
		fmt.Fprintf(&b, "authoritative calls p50 %.0fms / p99 %.0fms ahead, %.0fms / %.0fms serial",
			a.Auth.P50, a.Auth.P99, s.Auth.P50, s.Auth.P99)
		if r.AuthP99Ratio != nil {
			fmt.Fprintf(&b, "; calls ahead executed itself: p99 ×%.3f of serial", *r.AuthP99Ratio)
		}
		if r.AAAuthP99Ratio != nil {
			fmt.Fprintf(&b, " (A/A: p99 ×%.3f)", *r.AAAuthP99Ratio)
		}
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Verdict is a one-line summary: how much of the stall an oracle hides
// ahead hid, how much faster sessions were, and whether it was lossless.
func (r *Report) Verdict() string {
	var parts []string
	if r.HiddenStallRatio != nil {
		parts = append(parts, fmt.Sprintf("tool stall hidden: %.0f%% of what an oracle hides", *r.HiddenStallRatio*100))
	}
	if r.E2EReduction != nil {
		word := "faster"
		v := *r.E2EReduction * 100
		if v < 0 {
			word, v = "slower", -v
		}
		parts = append(parts, fmt.Sprintf("sessions %.0f%% %s", v, word))
	}
	if r.Lossless {
		parts = append(parts, fmt.Sprintf("lossless (%d mismatches)", r.Mismatches))
	} else {
		n := 0
		for _, m := range r.Modes {
			n += m.Mismatches
		}
		parts = append(parts, fmt.Sprintf("NOT lossless (%d mismatches)", n))
	}
	return strings.Join(parts, "; ")
}

// byReason formats counts by reason, most first: " (down 3, timeout 1)".
func byReason(n map[string]int64) string {
	if len(n) == 0 {
		return ""
	}
	reasons := slices.SortedFunc(maps.Keys(n), func(a, b string) int {
		return cmp.Or(cmp.Compare(n[b], n[a]), cmp.Compare(a, b))
	})
	parts := make([]string, len(reasons))
	for i, r := range reasons {
		parts[i] = fmt.Sprintf("%s %d", r, n[r])
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

// legendModes explains each mode, in the table's order (see the package
// doc).
var legendModes = []struct {
	mode Mode
	text string
}{
	{Serial, "no speculation: the agent waits for every tool (the baseline)"},
	{Ahead, "the real predictor (patterns and the conversation) under the policy, through the real engine"},
	{Oracle, "knows every call exactly at the start of its think time, unlimited capacity (the ceiling)"},
	{Orion, "baseline after ORION: warms up the likely next tools, never runs them"},
	{SpecFaaS, "baseline after SpecFaaS: runs the likely next tool with its previous arguments"},
	{AllWrong, "control: predictions that never match (speculation must not slow anyone down)"},
	{AA, "serial run again (A/A): the noise between two identical runs"},
	{Fleet, "replicas that learn together through a fleet: one mines the traffic of all, every replica serves its pool"},
}

// WriteLegend explains the table's modes and columns (issue 27: the demo
// printed modes and a tool column nothing on screen explained).
func (r *Report) WriteLegend(w io.Writer) error {
	var b strings.Builder
	b.WriteString("modes\n")
	for _, l := range legendModes {
		if r.Mode(l.mode) != nil {
			fmt.Fprintf(&b, "  %-10s %s\n", l.mode, l.text)
		}
	}
	b.WriteString(`columns
  mean p50 p95 p99  session time: the agent's think time plus its tool stall
  stall             total time the agents waited for tools after issuing calls
  tool              total tool time spent, real and speculative calls (above serial: the cost of speculation)
  spec/call         speculative executions per real call
  reused promoted   real calls served by a finished (reused) or running (promoted) speculative execution
  wasted            speculative executions no call claimed
  preempted         speculative executions cancelled to free a slot for a real call
  invalidated       speculative results dropped because a write may have changed them
  mismatches        results that differ from the recording (must be 0: lossless)
`)
	_, err := io.WriteString(w, b.String())
	return err
}

// orDash formats a ratio that may be undefined (nil) as "—".
func orDash(v *float64) string {
	if v == nil {
		return "—"
	}
	return fmt.Sprintf("%.2f", *v)
}
