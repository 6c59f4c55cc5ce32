package httpapi

import (
	"net/http"
	"time"

	"github.com/ahead-dev/ahead/engine"
)

// Stats is the body of GET /v1/stats, and what ahead stats prints (from a
// running server, or computed from recorded traces by StatsFromTraces).
// Durations are milliseconds, with fractions.
type Stats struct {
	Calls              int64                `json:"calls"`
	Executed           int64                `json:"executed"`
	Reused             int64                `json:"reused"`
	Promoted           int64                `json:"promoted"`
	SpeculativeStarted int64                `json:"speculative_started"`
	Warmups            int64                `json:"warmups"`
	Outcomes           map[string]int64     `json:"outcomes"`
	SavedMS            float64              `json:"saved_ms"`
	WastedMS           float64              `json:"wasted_ms"`
	Sessions           int                  `json:"sessions"`
	Entries            int                  `json:"entries"`
	Bytes              int64                `json:"bytes"`
	Tools              map[string]ToolStats `json:"tools"`
}

// ToolStats are one tool's figures in Stats.
type ToolStats struct {
	Calls              int64   `json:"calls"`
	Executed           int64   `json:"executed"`
	Reused             int64   `json:"reused"`
	Promoted           int64   `json:"promoted"`
	SpeculativeStarted int64   `json:"speculative_started"`
	Wasted             int64   `json:"wasted"`
	SavedMS            float64 `json:"saved_ms"`
	WastedMS           float64 `json:"wasted_ms"`
	MeanDurationMS     float64 `json:"mean_duration_ms"`
	MeanThinkMS        float64 `json:"mean_think_ms"`
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// NewStats returns the engine's figures as /v1/stats serves them.
func NewStats(st engine.Stats) Stats {
	out := Stats{
		Calls:              st.Calls,
		Executed:           st.Executed,
		Reused:             st.Reused,
		Promoted:           st.Promoted,
		SpeculativeStarted: st.SpecStarted,
		Warmups:            st.Warmups,
		Outcomes:           make(map[string]int64, len(st.Outcomes)),
		SavedMS:            ms(st.Saved),
		WastedMS:           ms(st.Wasted),
		Sessions:           st.Sessions,
		Entries:            st.Entries,
		Bytes:              st.Bytes,
		Tools:              make(map[string]ToolStats, len(st.Tools)),
	}
	for o, n := range st.Outcomes {
		out.Outcomes[string(o)] = n
	}
	for name, t := range st.Tools {
		out.Tools[name] = ToolStats{
			Calls:              t.Calls,
			Executed:           t.Executed,
			Reused:             t.Reused,
			Promoted:           t.Promoted,
			SpeculativeStarted: t.SpecStarted,
			Wasted:             t.Wasted,
			SavedMS:            ms(t.Saved),
			WastedMS:           ms(t.WastedTime),
			MeanDurationMS:     ms(t.MeanDuration),
			MeanThinkMS:        ms(t.MeanThink),
		}
	}
	return out
}

func (h *Handler) stats(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, NewStats(h.eng.Stats()))
}
