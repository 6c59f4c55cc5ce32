// Package trace owns ahead's record of tool calls: the Event type, the JSONL
// trace format of ../shared/traces/README.md (read and written, plain or
// gzipped), and importers from other log formats.
//
// An Event is one finished tool call, or a message of the conversation.
// Readers keep the fields a line's kind does not define in Event.Extra, which
// writers put back, and report malformed lines with file:line; writers append one line per
// event and rotate files, so a crash leaves at most one torn last line, which
// readers skip with a warning.
package trace

import (
	"encoding/json"
	"strings"
)

// Status is the outcome of a call: StatusOK or StatusError.
type Status string

const (
	StatusOK    Status = "ok"
	StatusError Status = "error"
)

// Kinds of trace lines. A call line has no kind (Kind ""); other kinds are
// lines that mining, evaluation and replay skip unless they ask for them.
const (
	// KindMessage is a message of the conversation: Role and Content are
	// set, Seq is the number of calls before it in its session and Step,
	// on an assistant message, the step of the calls its turn issued.
	KindMessage = "message"
	// KindSpeculative is a speculative execution ahead made on a
	// prediction (Speculative is set too): a call line in shape, but not
	// the agent's, so mining and evaluation must never learn from it.
	// Lines written before kinds existed, with "speculative": true and no
	// kind, read as this kind.
	KindSpeculative = "speculative"
	// KindFailed is an authoritative call that could not be served (its
	// backend unreachable, cut off at shutdown): Output holds the error.
	// A call line in shape, kept for the record; mining and evaluation
	// skip it.
	KindFailed = "failed"
	// KindEmitted is a tool call the model emitted, as ahead's model
	// gateway saw it complete in the model's response: Tool and Args (an
	// object), CallID when the API gave one. It is what the model asked
	// for, not a call anyone made: the agent's call, if it reaches ahead's
	// tool side, is recorded there as a call line, once. Mining and
	// evaluation skip it.
	KindEmitted = "emitted"
)

// Roles of messages.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
)

// Event is one line of a trace: a finished tool call, authoritative or
// speculative (Kind ""), or a message of the conversation (Kind
// KindMessage). Lines of kinds a reader does not know are kept with their
// Kind, so that tools can pass them on.
type Event struct {
	Kind    string          `json:"kind,omitempty"`
	Session string          `json:"session"`
	Seq     int             `json:"seq"`
	Step    int             `json:"step"`
	Tool    string          `json:"tool"`
	Args    json.RawMessage `json:"args"`
	Status  Status          `json:"status"`
	// Role and Content are a message's (Kind KindMessage).
	Role    string `json:"role,omitempty"`
	Content string `json:"content,omitempty"`
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
	// Origin, on a speculative execution, says what predicted it
	// ("pattern", "message", "stream", "speculator"; comma-separated when
	// several did).
	Origin string `json:"origin,omitempty"`
	Source string `json:"source,omitempty"`

	// Tools and From are a KindTools line's: the tools declared to the
	// session's agent, and where (FromMCP, FromOpenAI, FromAnthropic).
	Tools []ToolDef `json:"tools,omitempty"`
	From  string    `json:"from,omitempty"`

	// Extra holds the fields of the line that its kind does not define
	// (see fieldsOf), as read; EncodeLine writes them after the defined
	// ones, so that a tool that passes a trace on loses nothing. A key
	// that names a defined field (in any case, as encoding/json matches)
	// is ignored when written. Nil for almost every line.
	Extra map[string]json.RawMessage `json:"-"`
}

// Fields each kind of line defines; all others go to Event.Extra. A
// message line defines no call fields, and a line of an unknown kind only
// the fields every line has.
var (
	callFields    = []string{"kind", "session", "seq", "step", "tool", "args", "status", "output", "requestor", "call_id", "ts", "result_ts", "duration_ms", "llm_ms", "speculative", "outcome", "source", "origin"}
	messageFields = []string{"kind", "session", "seq", "step", "role", "content", "ts"}
	emittedFields = []string{"kind", "session", "seq", "step", "tool", "args", "call_id", "ts"}
	toolsFields   = []string{"kind", "session", "seq", "step", "from", "tools", "ts"}
	commonFields  = []string{"kind", "session", "seq", "step", "ts"}
)

// fieldsOf returns the fields that a line of ev's kind defines.
func fieldsOf(ev *Event) []string {
	switch {
	case ev.IsCall(), ev.Kind == KindSpeculative, ev.Kind == KindFailed:
		return callFields
	case ev.IsMessage():
		return messageFields
	case ev.Kind == KindEmitted:
		return emittedFields
	case ev.Kind == KindTools:
		return toolsFields
	}
	return commonFields
}

// defines reports whether key names one of fields, matched as
// encoding/json matches keys to struct fields (case-insensitively).
func defines(fields []string, key string) bool {
	for _, f := range fields {
		if strings.EqualFold(f, key) {
			return true
		}
	}
	return false
}

// IsCall reports whether ev is a tool call line (authoritative or
// speculative), not a message or a line of another kind.
func (ev *Event) IsCall() bool { return ev.Kind == "" }

// IsMessage reports whether ev is a message of the conversation.
func (ev *Event) IsMessage() bool { return ev.Kind == KindMessage }
