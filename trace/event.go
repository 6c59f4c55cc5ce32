// Package trace owns ahead's record of tool calls: the Event type, the JSONL
// trace format of ../shared/traces/README.md (read and written, plain or
// gzipped), and importers from other log formats.
//
// An Event is one finished tool call. Readers keep going past unknown fields
// and report malformed lines with file:line; writers append one line per
// event and rotate files, so a crash leaves at most one torn last line, which
// readers skip with a warning.
package trace

import "encoding/json"

// Status is the outcome of a call: StatusOK or StatusError.
type Status string

const (
	StatusOK    Status = "ok"
	StatusError Status = "error"
)

// Event is one finished tool call, authoritative or speculative.
type Event struct {
	Session string          `json:"session"`
	Seq     int             `json:"seq"`
	Step    int             `json:"step"`
	Tool    string          `json:"tool"`
	Args    json.RawMessage `json:"args"`
	Status  Status          `json:"status"`
	// Output is the tool's result as returned (often a JSON document inside
	// a string, sometimes plain text). A null output reads as "".
	Output    string `json:"output"`
	Requestor string `json:"requestor,omitempty"`
	CallID    string `json:"call_id,omitempty"`
	TS        string `json:"ts,omitempty"`
	ResultTS  string `json:"result_ts,omitempty"`
	// DurationMS is the tool's execution time; LLMMS the agent's think time
	// before the call. Both are nil when unknown.
	DurationMS *float64 `json:"duration_ms,omitempty"`
	LLMMS      *float64 `json:"llm_ms,omitempty"`

	// Speculative marks an execution ahead made on a prediction; Outcome
	// says what became of it (reused, promoted, wasted, preempted, ...).
	// Source says how an authoritative call was served (executed, reused,
	// promoted). These fields are ahead's own; other recorders omit them.
	Speculative bool   `json:"speculative,omitempty"`
	Outcome     string `json:"outcome,omitempty"`
	Source      string `json:"source,omitempty"`
}
