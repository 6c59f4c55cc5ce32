package bench

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/ahead-dev/ahead/backend/replay"
	"github.com/ahead-dev/ahead/engine"
	"github.com/ahead-dev/ahead/httpapi"
	"github.com/ahead-dev/ahead/speculator"
	"github.com/ahead-dev/ahead/trace"
)

// Dist summarises a distribution of durations, in milliseconds of trace
// time. Percentiles interpolate linearly between order statistics.
type Dist struct {
	N    int     `json:"n"`
	Mean float64 `json:"mean_ms"`
	P50  float64 `json:"p50_ms"`
	P95  float64 `json:"p95_ms"`
	P99  float64 `json:"p99_ms"`
	Max  float64 `json:"max_ms"`
}

func newDist(ms []float64) Dist {
	if len(ms) == 0 {
		return Dist{}
	}
	s := slices.Clone(ms)
	slices.Sort(s)
	sum := 0.0
	for _, v := range s {
		sum += v
	}
	return Dist{
		N: len(s), Mean: sum / float64(len(s)),
		P50: quantile(s, 0.50), P95: quantile(s, 0.95), P99: quantile(s, 0.99), Max: s[len(s)-1],
	}
}

// quantile of sorted s, interpolating between order statistics.
func quantile(s []float64, q float64) float64 {
	if len(s) == 0 {
		return 0
	}
	h := q * float64(len(s)-1)
	lo := int(math.Floor(h))
	hi := min(lo+1, len(s)-1)
	return s[lo] + (h-float64(lo))*(s[hi]-s[lo])
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Mismatch is an authoritative result that differs from the recording.
type Mismatch struct {
	Session string `json:"session"`
	Index   int    `json:"index"`
	Tool    string `json:"tool"`
	Source  string `json:"source"`
	Want    string `json:"want"`
	Got     string `json:"got,omitempty"`
}

// ModeResult is what one mode did. Times are trace time.
type ModeResult struct {
	Mode     Mode `json:"-"`
	Sessions int  `json:"sessions"`
	// E2E is the distribution of session times (think + stall).
	E2E Dist `json:"e2e"`
	// SessionMS holds every session's time, in input order (for plots).
	SessionMS []float64 `json:"-"`
	ThinkMS   float64   `json:"think_ms_total"`
	StallMS   float64   `json:"stall_ms_total"`
	// StallBy splits the stall by how the call that ended each step was
	// served: executed, promoted, reused, failed.
	StallBy map[string]float64 `json:"stall_ms_by_source"`
	// ToolMS is the tool time the backend spent (authoritative and
	// speculative); SpecToolMS the speculative part.
	ToolMS     float64 `json:"tool_ms_total"`
	SpecToolMS float64 `json:"spec_tool_ms_total"`
	// WallMS is the run's duration (trace time).
	WallMS float64 `json:"wall_ms"`

	Calls       int64            `json:"calls"`
	Executed    int64            `json:"executed"`
	Reused      int64            `json:"reused"`
	Promoted    int64            `json:"promoted"`
	SpecStarted int64            `json:"spec_started"`
	Warmups     int64            `json:"warmups"`
	Outcomes    map[string]int64 `json:"outcomes"`
	// Wasted counts speculative executions that ran and served nobody.
	Wasted   int64   `json:"wasted"`
	WastedMS float64 `json:"wasted_ms"`
	SavedMS  float64 `json:"saved_ms"`
	// SpecPerCall is SpecStarted / Calls.
	SpecPerCall float64 `json:"speculative_executions_per_call"`
	// Stale and Unmatched count the backend's stale and unmatched answers.
	Stale     int64 `json:"stale_answers"`
	Unmatched int64 `json:"unmatched_answers"`

	// Auth is the latency of every authoritative call (issue to result);
	// AuthExecuted that of the calls this mode executed itself.
	Auth         Dist `json:"auth_latency"`
	AuthExecuted Dist `json:"auth_latency_executed"`

	// Lateness is how late agents woke up after thinking: the harness's
	// own timing error, in trace time. Large values (against the tool
	// latencies) mean the machine was too busy for the time scale.
	Lateness Dist `json:"timer_lateness"`

	Mismatches int        `json:"mismatches"`
	Examples   []Mismatch `json:"mismatch_examples,omitempty"`
	// CallErrors counts calls the engine could not serve at all.
	CallErrors int `json:"call_errors"`
	// Origins splits speculation by where its predictions came from
	// (pattern, message, stream, speculator); work several origins
	// predicted counts for each.
	Origins map[string]httpapi.OriginStats `json:"origins,omitempty"`
	// Speculator is what the mode's speculator did (requests, answers,
	// failures by reason, late answers, tokens), if it had one that
	// counts (both of SetSpeculator's do).
	Speculator *speculator.Stats `json:"speculator,omitempty"`

	// callMS is each call's latency by session and index (for pairing
	// modes call by call); executed marks the calls this mode executed.
	callMS   [][]float64
	executed [][]bool
	stallMS  []float64 // by session
}

const maxExamples = 5

// newModeResult gathers a mode's figures. The engine measures wall time at
// the time scale; its durations are turned into trace time here, like
// every other figure (the replay backend and the agents keep trace time).
func newModeResult(m Mode, sessions []trace.Session, rs []*sessionResult, st engine.Stats, bs replay.Stats, wall time.Duration, scale float64) *ModeResult {
	traceMS := func(d time.Duration) float64 { return ms(unscaled(d, scale)) }
	r := &ModeResult{
		Mode:       m,
		Sessions:   len(rs),
		StallBy:    make(map[string]float64),
		ToolMS:     ms(bs.Busy),
		SpecToolMS: ms(bs.SpecBusy),
		WallMS:     ms(wall),
		Calls:      st.Calls, Executed: st.Executed, Reused: st.Reused, Promoted: st.Promoted,
		SpecStarted: st.SpecStarted,
		Warmups:     st.Warmups,
		Outcomes:    make(map[string]int64),
		WastedMS:    traceMS(st.Wasted),
		SavedMS:     traceMS(st.Saved),
		Stale:       bs.Stale,
		Unmatched:   bs.Unmatched,
		callMS:      make([][]float64, len(rs)),
		executed:    make([][]bool, len(rs)),
	}
	for o, n := range st.Outcomes {
		r.Outcomes[string(o)] = n
	}
	for o, os := range st.Origins {
		if r.Origins == nil {
			r.Origins = make(map[string]httpapi.OriginStats)
		}
		r.Origins[string(o)] = httpapi.NewOriginStats(os, traceMS)
	}
	r.Wasted = max(0, st.SpecStarted-st.Outcomes[engine.OutcomeReused]-st.Outcomes[engine.OutcomePromoted]-st.Outcomes[engine.OutcomeWarmed])
	if st.Calls > 0 {
		r.SpecPerCall = float64(st.SpecStarted) / float64(st.Calls)
	}
	var all, exec, late []float64
	for i, sr := range rs {
		for _, d := range sr.late {
			late = append(late, ms(d))
		}
		r.SessionMS = append(r.SessionMS, ms(sr.think+sr.stall))
		r.ThinkMS += ms(sr.think)
		r.StallMS += ms(sr.stall)
		r.stallMS = append(r.stallMS, ms(sr.stall))
		for src, d := range sr.stallBy {
			r.StallBy[string(src)] += ms(d)
		}
		r.callMS[i] = make([]float64, len(sr.calls))
		r.executed[i] = make([]bool, len(sr.calls))
		for j, c := range sr.calls {
			ev := sessions[i].Events[j]
			r.callMS[i][j] = ms(c.latency)
			if c.err != nil {
				r.CallErrors++
				continue
			}
			all = append(all, ms(c.latency))
			if c.source == engine.Executed {
				exec = append(exec, ms(c.latency))
				r.executed[i][j] = true
			}
			if c.mismatch {
				r.Mismatches++
				if len(r.Examples) < maxExamples {
					r.Examples = append(r.Examples, Mismatch{
						Session: ev.Session, Index: j, Tool: ev.Tool, Source: string(c.source),
						Want: clip(string(ev.Status) + ": " + ev.Output), Got: clip(c.got),
					})
				}
			}
		}
	}
	r.E2E = newDist(r.SessionMS)
	r.Auth = newDist(all)
	r.AuthExecuted = newDist(exec)
	r.Lateness = newDist(late)
	return r
}

func clip(s string) string {
	const n = 120
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// Report is the outcome of a run.
type Report struct {
	Config ReportConfig `json:"config"`
	// Warnings say why figures may be meaningless: no policy, or a policy
	// that allows none of the tools replayed (nothing is speculated, and
	// every mode is serial).
	Warnings []string `json:"warnings,omitempty"`
	// Modes in the order they ran.
	Modes []*ModeResult `json:"-"`

	// The headline figures, about the ahead mode (nil or zero when a
	// mode they need did not run).
	HiddenStallRatio *float64 `json:"hidden_stall_ratio"`
	E2EReduction     *float64 `json:"e2e_reduction"`
	SpecPerCall      *float64 `json:"speculative_executions_per_call"`
	// Lossless reports that no authoritative result of any speculating
	// mode differed from the recording; Mismatches counts those of ahead
	// (all modes' are in Modes).
	Lossless   bool `json:"lossless"`
	Mismatches int  `json:"mismatches"`
	// AANoise is |mean session time of aa − of serial| / of serial.
	AANoise *float64 `json:"aa_noise"`
	// AAStallNoise is the same for the total stall.
	AAStallNoise *float64 `json:"aa_stall_noise"`
	// AllWrongSlowdown is mean session time of all_wrong / of serial − 1.
	AllWrongSlowdown *float64 `json:"all_wrong_slowdown"`
	// AllWrongStallRatio is the stall of all_wrong / of serial.
	AllWrongStallRatio *float64 `json:"all_wrong_stall_ratio"`
	// AuthP99Ratio is the p99 latency of the calls ahead executed itself
	// over the p99 of the same calls in serial: the cost speculation
	// imposes on the calls it did not help. AuthP99RatioAll compares all
	// authoritative calls.
	AuthP99Ratio    *float64 `json:"auth_p99_ratio"`
	AuthP99RatioAll *float64 `json:"auth_p99_ratio_all"`
	// AAAuthP99Ratio is the p99 authoritative latency of aa over serial:
	// the noise floor of the p99 ratios (at saturation, the order in which
	// simultaneous calls queue differs from run to run).
	AAAuthP99Ratio *float64 `json:"aa_auth_p99_ratio"`
	// OracleHiddenMS and AheadHiddenMS are the stall the oracle and ahead
	// hid compared with serial.
	OracleHiddenMS *float64 `json:"oracle_hidden_ms"`
	AheadHiddenMS  *float64 `json:"ahead_hidden_ms"`
	// With replicas (SetReplicas): the fleet mode's hidden stall ratio,
	// and the fleet's hidden stall over the ahead mode's (replicas that
	// learn alone).
	FleetHiddenStallRatio *float64 `json:"fleet_hidden_stall_ratio,omitempty"`
	FleetOverAlone        *float64 `json:"fleet_over_alone,omitempty"`
	// LearningCurves holds, for the modes that learn (Options.LearnEvery),
	// the hidden stall ratio in each fifth of the sessions in replay order.
	LearningCurves map[Mode][]float64 `json:"learning_curves,omitempty"`
	// HiddenStallHalves is the ahead mode's hidden stall ratio in the
	// first and the second half of the sessions in file order
	// (Options.Halves): a fresh install's first days, and after. A half
	// whose serial stall is no larger than the oracle's (a machine whose
	// timers are late by more than the calls last) has no ratio: null.
	HiddenStallHalves []*float64 `json:"hidden_stall_ratio_halves,omitempty"`
}

// ReportConfig records what was run.
type ReportConfig struct {
	Sessions     int     `json:"sessions"`
	Calls        int     `json:"calls"`
	Steps        int     `json:"steps"`
	Latency      string  `json:"tool_latency"`
	TimeScale    float64 `json:"time_scale"`
	ThinkDefault string  `json:"think_default"`
	Concurrency  int     `json:"concurrency"`
	Arrival      string  `json:"arrival"`
	Slots        int     `json:"slots"`
	SpecBudget   int     `json:"spec_budget"`
	ColdStart    string  `json:"cold_start"`
	Seed         uint64  `json:"seed"`
	MineSessions int     `json:"mine_sessions"`
	// Speculator names the ahead mode's speculator, if any ("(simulated)"
	// when it is sim:ACC:LAT).
	Speculator string `json:"speculator,omitempty"`
	// Model is the modelled model (--model-ttft, --model-tps), if any.
	Model string `json:"model,omitempty"`
	// Replicas and LearnEvery are Options'; 0 for one engine that does
	// not relearn.
	Replicas   int `json:"replicas,omitempty"`
	LearnEvery int `json:"learn_every,omitempty"`
	halves     bool
}

func newReport(sessions []trace.Session, o *Options) *Report {
	c := ReportConfig{
		Sessions:     len(sessions),
		Latency:      o.Latency.String(),
		TimeScale:    o.TimeScale,
		ThinkDefault: o.ThinkDefault.String(),
		Concurrency:  o.Concurrency,
		Arrival:      o.Arrival.String(),
		Slots:        o.Slots,
		SpecBudget:   o.SpecBudget,
		ColdStart:    o.ColdStart.String(),
		Seed:         o.Seed,
		MineSessions: len(o.Mine),
		Speculator:   o.SpeculatorName,
		LearnEvery:   o.LearnEvery,
		halves:       o.Halves,
	}
	if o.Replicas > 1 {
		c.Replicas = o.Replicas
	}
	if o.Model.TPS > 0 {
		c.Model = fmt.Sprintf("ttft %v, %g tokens/s", o.Model.TTFT, o.Model.TPS)
		if o.NoStream {
			c.Model += ", nothing speculated from the stream"
		} else {
			c.Model += ", calls speculated as they complete in the stream"
		}
	}
	for _, s := range sessions {
		c.Calls += len(s.Events)
		c.Steps += len(steps(s, 0))
	}
	return &Report{Config: c}
}

// Mode returns the result of mode m, or nil if it did not run.
func (r *Report) Mode(m Mode) *ModeResult {
	for _, mr := range r.Modes {
		if mr.Mode == m {
			return mr
		}
	}
	return nil
}

func ptr(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

func (r *Report) summarise() {
	serial, ahead, oracle := r.Mode(Serial), r.Mode(Ahead), r.Mode(Oracle)
	// A call the engine cannot serve (arguments that are not a JSON
	// object) fails in serial too; failing more often than serial is a
	// difference an agent would see.
	r.Lossless = true
	for _, mr := range r.Modes {
		if mr.Mismatches > 0 || (serial != nil && mr.CallErrors > serial.CallErrors) {
			r.Lossless = false
		}
	}
	if ahead != nil {
		r.Mismatches = ahead.Mismatches
		r.SpecPerCall = ptr(ahead.SpecPerCall)
	}
	if serial != nil && oracle != nil {
		r.OracleHiddenMS = ptr(serial.StallMS - oracle.StallMS)
	}
	if serial != nil && ahead != nil {
		r.AheadHiddenMS = ptr(serial.StallMS - ahead.StallMS)
		r.E2EReduction = ptr(1 - ahead.E2E.Mean/serial.E2E.Mean)
		r.AuthP99RatioAll = ptr(ahead.Auth.P99 / serial.Auth.P99)
		var a, s []float64
		for i := range ahead.callMS {
			for j, ex := range ahead.executed[i] {
				if ex {
					a = append(a, ahead.callMS[i][j])
					s = append(s, serial.callMS[i][j])
				}
			}
		}
		if len(a) > 0 {
			r.AuthP99Ratio = ptr(newDist(a).P99 / newDist(s).P99)
		}
	}
	if r.OracleHiddenMS != nil && r.AheadHiddenMS != nil && *r.OracleHiddenMS > 0 {
		r.HiddenStallRatio = ptr(*r.AheadHiddenMS / *r.OracleHiddenMS)
	}
	if f := r.Mode(Fleet); serial != nil && oracle != nil && f != nil && *r.OracleHiddenMS > 0 {
		r.FleetHiddenStallRatio = ptr((serial.StallMS - f.StallMS) / *r.OracleHiddenMS)
		if r.AheadHiddenMS != nil && *r.AheadHiddenMS > 0 {
			r.FleetOverAlone = ptr((serial.StallMS - f.StallMS) / *r.AheadHiddenMS)
		}
	}
	if r.Config.LearnEvery > 0 && serial != nil && oracle != nil {
		for _, m := range []*ModeResult{ahead, r.Mode(Fleet)} {
			if c := curve(serial, oracle, m); m != nil && c != nil {
				if r.LearningCurves == nil {
					r.LearningCurves = make(map[Mode][]float64)
				}
				r.LearningCurves[m.Mode] = c
			}
		}
	}
	if r.Config.halves && serial != nil && oracle != nil && ahead != nil {
		n := len(serial.stallMS)
		for _, h := range [][2]int{{0, n / 2}, {n / 2, n}} {
			var s, a, o float64
			for i := h[0]; i < h[1]; i++ {
				s, a, o = s+serial.stallMS[i], a+ahead.stallMS[i], o+oracle.stallMS[i]
			}
			var ratio *float64
			if s > o {
				ratio = ptr((s - a) / (s - o))
			}
			r.HiddenStallHalves = append(r.HiddenStallHalves, ratio)
		}
	}
	if aa := r.Mode(AA); serial != nil && aa != nil {
		r.AANoise = ptr(math.Abs(aa.E2E.Mean-serial.E2E.Mean) / serial.E2E.Mean)
		r.AAStallNoise = ptr(math.Abs(aa.StallMS-serial.StallMS) / serial.StallMS)
		r.AAAuthP99Ratio = ptr(aa.Auth.P99 / serial.Auth.P99)
	}
	if aw := r.Mode(AllWrong); serial != nil && aw != nil {
		r.AllWrongSlowdown = ptr(aw.E2E.Mean/serial.E2E.Mean - 1)
		r.AllWrongStallRatio = ptr(aw.StallMS / serial.StallMS)
	}
}

// sortedModes returns the modes in the canonical order (for stable output
// whatever order they ran in).
func (r *Report) sortedModes() []*ModeResult {
	out := slices.Clone(r.Modes)
	idx := func(m Mode) int { return slices.Index(allModes, m) }
	slices.SortStableFunc(out, func(a, b *ModeResult) int { return cmp.Compare(idx(a.Mode), idx(b.Mode)) })
	return out
}
