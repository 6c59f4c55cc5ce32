package trace

import "regexp"

// Transcript formats, as Sniff names them (and ahead traces import --from
// takes them).
const (
	FormatOpenAI    = "openai"    // chat completions: tool_calls, role "tool"
	FormatResponses = "responses" // Responses items: function_call, function_call_output
	FormatAnthropic = "anthropic" // messages: tool_use and tool_result blocks
)

// The marks of each format's tool calls, whatever the whitespace.
var (
	markAnthropic = regexp.MustCompile(`"type"\s*:\s*"(tool_use|tool_result)"`)
	markResponses = regexp.MustCompile(`"type"\s*:\s*"function_call(_output)?"`)
	markOpenAI    = regexp.MustCompile(`"tool_calls"\s*:|"role"\s*:\s*"tool"`)
)

// Sniff names the transcript format whose tool calls data holds, by their
// marks (issue 27: an import in the wrong format found no calls and said
// nothing): "anthropic", "responses" or "openai", the one with the most
// marks; "" when it holds none. It does not parse: an importer is the
// judge of whether a file is valid.
func Sniff(data []byte) string {
	best, n := "", 0
	for _, f := range []struct {
		name string
		re   *regexp.Regexp
	}{{FormatAnthropic, markAnthropic}, {FormatResponses, markResponses}, {FormatOpenAI, markOpenAI}} {
		if c := len(f.re.FindAllIndex(data, -1)); c > n {
			best, n = f.name, c
		}
	}
	return best
}
