package speculator

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"

	"github.com/ahead-dev/ahead/trace"
)

// charsPerToken is the estimate the context budget and token budget use.
const charsPerToken = 4

// withheld replaces the output of a private tool in prompts.
const withheld = "[output withheld: private tool]"

// instructions open the system message; %d is the number of guesses.
const instructions = `You predict what an AI agent will do next. Below is the agent's conversation and its recent tool calls with their results. ` +
	`Reply only with tool calls: the %d most likely next tool calls of the agent, as parallel tool calls, most likely first, each with the exact arguments the agent would use. ` +
	`Never call the same tool with the same arguments twice. Do not explain.`

// unit is a piece of the prompt that is kept or dropped whole: a message,
// or one step's calls with their results (a tool message must follow the
// call that produced it).
type unit struct {
	msgs  []openai.ChatCompletionMessageParamUnion
	chars int
}

// buildMessages assembles the prompt: one system message (the instructions
// and the agent's first system prompt), then the conversation and the recent
// calls in the order they happened, as many of the newest as budget
// characters hold (the newest is always kept, cut if it must be), then a
// last request for k guesses. Outputs of private tools are withheld.
func buildMessages(k int, conv, calls []trace.Event, private func(string) bool, budget int) []openai.ChatCompletionMessageParamUnion {
	sys := fmt.Sprintf(instructions, k)
	var units []unit
	type item struct {
		seq  int
		msg  bool
		ev   trace.Event
		step []trace.Event
	}
	var items []item
	first := true
	for _, m := range conv {
		if !m.IsMessage() || m.Content == "" {
			continue
		}
		if first && m.Role == trace.RoleSystem {
			// The agent's instructions are kept (cut to half the
			// budget if they alone would fill it).
			sys += "\n\nThe agent's own instructions follow.\n\n" + cutTail(m.Content, budget/2)
			first = false
			continue
		}
		first = false
		items = append(items, item{seq: m.Seq, msg: true, ev: m})
	}
	for i := 0; i < len(calls); {
		j := i + 1
		for j < len(calls) && calls[j].Step == calls[i].Step {
			j++
		}
		items = append(items, item{seq: calls[i].Seq, step: calls[i:j]})
		i = j
	}
	// A message with seq n came before call n.
	slices.SortStableFunc(items, func(a, b item) int {
		if c := cmp.Compare(a.seq, b.seq); c != 0 {
			return c
		}
		return cmp.Compare(b2f(!a.msg), b2f(!b.msg))
	})
	for _, it := range items {
		if it.msg {
			units = append(units, messageUnit(it.ev))
		} else {
			units = append(units, callUnit(it.step, private))
		}
	}

	left := budget - len(sys)
	start := len(units)
	for start > 0 && (units[start-1].chars <= left || start == len(units)) {
		left -= units[start-1].chars
		start--
	}
	if start == len(units)-1 && left < 0 && len(units[start].msgs) == 1 {
		// One message larger than the budget: keep its newest text.
		units[start] = messageUnit(trace.Event{Role: roleOf(units[start]), Content: cutHead(contentOf(units[start]), budget-len(sys))})
	}
	out := []openai.ChatCompletionMessageParamUnion{openai.SystemMessage(sys)}
	for _, u := range units[start:] {
		out = append(out, u.msgs...)
	}
	out = append(out, openai.UserMessage(fmt.Sprintf("Predict the agent's next tool calls now: up to %d, most likely first.", k)))
	return out
}

func messageUnit(m trace.Event) unit {
	var p openai.ChatCompletionMessageParamUnion
	switch m.Role {
	case trace.RoleAssistant:
		p = openai.AssistantMessage(m.Content)
	case trace.RoleSystem:
		p = openai.SystemMessage(m.Content)
	default:
		p = openai.UserMessage(m.Content)
	}
	return unit{msgs: []openai.ChatCompletionMessageParamUnion{p}, chars: len(m.Content)}
}

func roleOf(u unit) string {
	switch {
	case u.msgs[0].OfAssistant != nil:
		return trace.RoleAssistant
	case u.msgs[0].OfSystem != nil:
		return trace.RoleSystem
	}
	return trace.RoleUser
}

func contentOf(u unit) string {
	m := u.msgs[0]
	switch {
	case m.OfAssistant != nil:
		return m.OfAssistant.Content.OfString.Value
	case m.OfSystem != nil:
		return m.OfSystem.Content.OfString.Value
	case m.OfUser != nil:
		return m.OfUser.Content.OfString.Value
	}
	return ""
}

// callUnit is one step's calls, as the assistant message that made them
// and the tool messages that answered.
func callUnit(step []trace.Event, private func(string) bool) unit {
	u := unit{}
	calls := make([]openai.ChatCompletionMessageToolCallUnionParam, len(step))
	var results []openai.ChatCompletionMessageParamUnion
	for i, ev := range step {
		id := "call_" + strconv.Itoa(ev.Seq)
		args := string(ev.Args)
		if args == "" || args == "null" {
			args = "{}"
		}
		calls[i] = openai.ChatCompletionMessageToolCallUnionParam{OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
			ID: id, Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: ev.Tool, Arguments: args},
		}}
		out := ev.Output
		if private != nil && private(ev.Tool) {
			out = withheld
		}
		if ev.Status == trace.StatusError {
			out = "error: " + out
		}
		results = append(results, openai.ToolMessage(out, id))
		u.chars += len(ev.Tool) + len(args) + len(out)
	}
	u.msgs = append([]openai.ChatCompletionMessageParamUnion{{OfAssistant: &openai.ChatCompletionAssistantMessageParam{ToolCalls: calls}}}, results...)
	return u
}

// cutTail keeps the first n bytes of s (whole runes).
func cutTail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	n = max(n, 0)
	for n > 0 && !validCut(s, n) {
		n--
	}
	return s[:n] + " …"
}

// cutHead keeps the last n bytes of s (whole runes).
func cutHead(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := len(s) - max(n, 0)
	for i < len(s) && !validCut(s, i) {
		i++
	}
	return "… " + s[i:]
}

func validCut(s string, i int) bool { return i == len(s) || s[i]&0xC0 != 0x80 }

// toolParams turns tool definitions into the request's tools. A schema
// that is not a JSON object becomes the empty object schema.
func toolParams(tools []Tool) []openai.ChatCompletionToolUnionParam {
	out := make([]openai.ChatCompletionToolUnionParam, 0, len(tools))
	for _, t := range tools {
		var params map[string]any
		if len(t.Schema) == 0 || json.Unmarshal(t.Schema, &params) != nil || params == nil {
			params = map[string]any{"type": "object"}
		}
		def := shared.FunctionDefinitionParam{Name: t.Name, Parameters: params}
		if t.Description != "" {
			def.Description = openai.String(t.Description)
		}
		out = append(out, openai.ChatCompletionFunctionTool(def))
	}
	return out
}

// toolChars is the prompt size of the tools' definitions.
func toolChars(tools []Tool) int {
	n := 0
	for _, t := range tools {
		n += len(t.Name) + len(t.Description) + len(t.Schema) + 40
	}
	return n
}

// promptChars is the prompt size of messages (content only, roughly).
func promptChars(msgs []openai.ChatCompletionMessageParamUnion) int {
	b, err := json.Marshal(msgs)
	if err != nil {
		return 0
	}
	return len(b)
}
