package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/ahead-dev/ahead/engine"
)

// Stats is the body of GET /v1/stats, and what ahead stats prints (from a
// running server, or computed from recorded traces by StatsFromTraces).
// Durations are milliseconds, with fractions.
type Stats struct {
	Calls    int64 `json:"calls"`
	Executed int64 `json:"executed"`
	Reused   int64 `json:"reused"`
	Promoted int64 `json:"promoted"`
	// Joined counts calls re-issued after their requester left while they
	// ran (a broken stream) and served from that run; Orphaned the calls
	// whose requesters left while they ran.
	Joined             int64            `json:"joined,omitempty"`
	Orphaned           int64            `json:"orphaned,omitempty"`
	SpeculativeStarted int64            `json:"speculative_started"`
	Warmups            int64            `json:"warmups"`
	Outcomes           map[string]int64 `json:"outcomes"`
	SavedMS            float64          `json:"saved_ms"`
	WastedMS           float64          `json:"wasted_ms"`
	Sessions           int              `json:"sessions"`
	Entries            int              `json:"entries"`
	// Bytes is all that max_bytes bounds: the entries' results and what
	// the sessions keep (conversation windows, the predictor's state, the
	// calls kept for learning).
	Bytes int64 `json:"bytes"`
	// Ready is how many of the entries hold a finished result (the rest
	// are queued or running).
	Ready int                  `json:"ready"`
	Tools map[string]ToolStats `json:"tools"`
	// Origins splits speculation by what predicted it (pattern, message,
	// stream, speculator); work several origins predicted counts for each.
	Origins map[string]OriginStats `json:"origins,omitempty"`
	// Unfenced counts calls served without their speculative counterpart
	// because a fleet's fence failed.
	Unfenced int64 `json:"unfenced,omitempty"`
	// Fleet is the fleet's state; nil for a replica alone.
	Fleet *FleetStats `json:"fleet,omitempty"`
	// Upstreams are the MCP upstreams ahead fronts, in configuration
	// order: the revision each is reached with, and how.
	Upstreams []UpstreamStats `json:"mcp_upstreams,omitempty"`
	// Answers is what ahead serve holds for answers; nil elsewhere.
	Answers *AnswerStats `json:"answers,omitempty"`
}

// UpstreamStats is one MCP upstream's state (package mcpproxy).
type UpstreamStats struct {
	Name string `json:"name"`
	// Revision is the MCP revision it was last reached with; "" until it
	// was.
	Revision string `json:"revision"`
	// Shared: one connection serves every session (a stateless upstream,
	// 2026-07-28 over HTTP); otherwise each session has its own.
	Shared bool `json:"shared"`
	// Connections counts the connections made to it, restarts included.
	Connections int64 `json:"connections"`
}

// AnswerStats is ahead serve's budget of bytes held for answers
// (max_answer_bytes): the tool outputs being read for HTTP requests and
// the answers being written to clients, all together.
type AnswerStats struct {
	Bytes  int64 `json:"bytes"`  // held now
	Budget int64 `json:"budget"` // max_answer_bytes
	Cut    int64 `json:"cut"`    // answers cut so far: their clients took their bytes the least recently when over the budget
}

// FleetStats is a fleet replica's state (package fleet): whether fences can
// succeed, how far it has applied the invalidation stream, and its counts.
type FleetStats struct {
	Name       string `json:"name"`
	Replica    string `json:"replica"`
	URL        string `json:"url"`
	Connected  bool   `json:"connected"`
	AppliedSeq uint64 `json:"applied_seq"`
	Announced  int64  `json:"announced"`
	Late       int64  `json:"late"`
	LateSent   int64  `json:"late_sent"`
	Applied    int64  `json:"applied"`
	Fences     int64  `json:"fences"`
	// FencesRefused are the fences that failed, so that a call ran (fail
	// closed): down (not connected or not caught up), absent (another
	// replica missing), timeout.
	FencesRefused map[string]int64 `json:"fences_refused"`
	Resyncs       int64            `json:"resyncs"`
	// SharedResults counts results of shared tools through the fleet's
	// bucket: hits (reused from it), refused (found but not vouched for:
	// SharedRefused), puts, purges, dropped (not sent), too_big (kept
	// local), superseded (not sent: a later put of the same result, or a
	// write since its mark, came first).
	SharedResults map[string]int64 `json:"shared_results"`
	// SharedRefused splits shared_results.refused by reason: write (a
	// write applied since the result's mark may change it), resync (valid
	// only before this replica's last resync), epoch (of a stream the
	// server lost), expired, down (this replica not caught up).
	SharedRefused map[string]int64 `json:"shared_refused"`
	// Learning is the replica's part in the fleet's learning; nil when
	// its pool does not learn.
	Learning *FleetLearningStats `json:"learning,omitempty"`
}

// FleetLearningStats is what a replica shares for learning and the fleet's
// pool it serves (package fleet, Learning).
type FleetLearningStats struct {
	// PoolVersion is the version of the fleet's pool served (0: none yet),
	// PoolMiner the replica that mined it, PoolMark the last trace stream
	// sequence it was mined from.
	PoolVersion uint64 `json:"pool_version"`
	PoolMiner   string `json:"pool_miner,omitempty"`
	PoolMark    uint64 `json:"pool_mark"`
	PoolMined   string `json:"pool_mined,omitempty"`
	// Lag is how many trace lines the fleet had published beyond the pool
	// served, as of this replica's last checkpoint.
	Lag       uint64 `json:"lag"`
	Published int64  `json:"lines_published"`
	Dropped   int64  `json:"lines_dropped"`
	Trimmed   int64  `json:"lines_trimmed"`
	Queued    int    `json:"lines_queued"`
	Mined     int64  `json:"pools_mined"`
	Loaded    int64  `json:"pools_loaded"`
}

// OriginStats is what the predictions of one origin led to, as reports
// show it (/v1/stats, and each mode of ahead bench): engine.OriginStats,
// the engine's counter, in milliseconds. It is only ever made from one by
// NewOriginStats, so that the two cannot drift apart.
type OriginStats struct {
	Offered  int64   `json:"offered"`
	Started  int64   `json:"started"`
	Reused   int64   `json:"reused"`
	Promoted int64   `json:"promoted"`
	Wasted   int64   `json:"wasted"`
	SavedMS  float64 `json:"saved_ms"`
	WastedMS float64 `json:"wasted_ms"`
}

// NewOriginStats is the report form of the engine's counter, its durations
// in milliseconds as ms converts them (ahead bench: of trace time).
func NewOriginStats(st engine.OriginStats, ms func(time.Duration) float64) OriginStats {
	return OriginStats{Offered: st.Offered, Started: st.Started, Reused: st.Reused, Promoted: st.Promoted,
		Wasted: st.Wasted, SavedMS: ms(st.Saved), WastedMS: ms(st.WastedTime)}
}

// ToolStats are one tool's figures in Stats.
type ToolStats struct {
	Calls              int64   `json:"calls"`
	Executed           int64   `json:"executed"`
	Reused             int64   `json:"reused"`
	Promoted           int64   `json:"promoted"`
	Joined             int64   `json:"joined,omitempty"`
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
		Joined:             st.Joined,
		Orphaned:           st.Orphaned,
		SpeculativeStarted: st.SpecStarted,
		Warmups:            st.Warmups,
		Outcomes:           make(map[string]int64, len(st.Outcomes)),
		SavedMS:            ms(st.Saved),
		WastedMS:           ms(st.Wasted),
		Sessions:           st.Sessions,
		Entries:            st.Entries,
		Bytes:              st.Bytes + st.SessionBytes,
		Ready:              st.Ready,
		Tools:              make(map[string]ToolStats, len(st.Tools)),
		Unfenced:           st.Unfenced,
	}
	for o, n := range st.Outcomes {
		out.Outcomes[string(o)] = n
	}
	for o, os := range st.Origins {
		if out.Origins == nil {
			out.Origins = make(map[string]OriginStats, len(st.Origins))
		}
		out.Origins[string(o)] = NewOriginStats(os, ms)
	}
	for name, t := range st.Tools {
		out.Tools[name] = ToolStats{
			Calls:              t.Calls,
			Executed:           t.Executed,
			Reused:             t.Reused,
			Promoted:           t.Promoted,
			Joined:             t.Joined,
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
	st := NewStats(h.eng.Stats())
	if h.opts.Fleet != nil {
		st.Fleet = h.opts.Fleet()
	}
	if h.opts.Upstreams != nil {
		st.Upstreams = h.opts.Upstreams()
	}
	if h.opts.Answers != nil {
		st.Answers = h.opts.Answers()
	}
	writeJSON(w, http.StatusOK, st)
}

// FetchStats reads a running server's /v1/stats (the path is added to a
// bare server URL), within 10 seconds. c may be nil: http.DefaultClient.
func FetchStats(ctx context.Context, c *http.Client, raw string) (Stats, error) {
	if c == nil {
		c = http.DefaultClient
	}
	u, err := url.Parse(raw)
	if err != nil {
		return Stats{}, err
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/v1/stats"
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return Stats{}, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return Stats{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return Stats{}, fmt.Errorf("%s: %s: %s", u, resp.Status, strings.TrimSpace(string(b)))
	}
	var st Stats
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return Stats{}, fmt.Errorf("%s: %w", u, err)
	}
	return st, nil
}
