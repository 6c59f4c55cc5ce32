package httpapi

import (
	"net/http"
	"time"

	"github.com/ahead-dev/ahead/engine"
)

// statsResponse is the body of GET /v1/stats. Durations are milliseconds.
type statsResponse struct {
	Calls              int64                   `json:"calls"`
	Executed           int64                   `json:"executed"`
	Reused             int64                   `json:"reused"`
	Promoted           int64                   `json:"promoted"`
	SpeculativeStarted int64                   `json:"speculative_started"`
	Warmups            int64                   `json:"warmups"`
	Outcomes           map[string]int64        `json:"outcomes"`
	SavedMS            float64                 `json:"saved_ms"`
	WastedMS           float64                 `json:"wasted_ms"`
	Sessions           int                     `json:"sessions"`
	Entries            int                     `json:"entries"`
	Bytes              int64                   `json:"bytes"`
	Tools              map[string]toolResponse `json:"tools"`
}

type toolResponse struct {
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

func statsJSON(st engine.Stats) statsResponse {
	out := statsResponse{
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
		Tools:              make(map[string]toolResponse, len(st.Tools)),
	}
	for o, n := range st.Outcomes {
		out.Outcomes[string(o)] = n
	}
	for name, t := range st.Tools {
		out.Tools[name] = toolResponse{
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
	writeJSON(w, http.StatusOK, statsJSON(h.eng.Stats()))
}
