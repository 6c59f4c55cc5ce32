package gateway

import (
	"container/list"
	"context"
	"encoding/json"
	"hash/maphash"
	"slices"
	"strings"
	"sync"

	"github.com/ahead-dev/ahead/trace"
)

// message is one entry of a request's history as the gateway hears it.
// role is "" for entries that are not messages (tool results, calls
// without text, reasoning): they take part in the prefix comparison but
// are never heard.
type message struct {
	role   string
	text   string
	digest uint64
	// dedupe marks an entry resent with every request even when the API
	// keeps the history (Responses instructions): heard only if new.
	dedupe bool
	// results are the call ids of the tool results the entry returns:
	// evidence of the conversation whose model emitted those calls.
	results []string
}

// hear sends the request's new messages to the engine. session names the
// conversation (the digests of its history); the engine hears them in the
// session it is linked to (Engine.Resolve).
func (g *Gateway) hear(ctx context.Context, session string, msgs []message, appendOnly bool) {
	for _, i := range g.hist.update(session, msgs, appendOnly) {
		m := msgs[i]
		if m.role == "" || m.text == "" {
			continue
		}
		if err := g.opts.Engine.Message(ctx, g.engineSession(session), m.role, m.text); err != nil {
			g.log.Debug("gateway: engine refused a message", "session", session, "err", err)
			return
		}
	}
}

// Forget drops what the gateway keeps about a session (its history digests
// and, if a Linker is set, its calls).
func (g *Gateway) Forget(session string) {
	g.hist.forget(session)
	if g.opts.Linker != nil {
		g.opts.Linker.Forget(session)
	}
}

// maxDigests bounds one session's history digests (append-only sessions,
// whose history the API keeps, would otherwise grow without end).
const maxDigests = 1 << 14

// histories keeps the digests of each session's history, least recently
// used first out.
type histories struct {
	mu    sync.Mutex // protects the fields below
	max   int
	byID  map[string]*list.Element // of *history
	order *list.List               // most recent first
}

type history struct {
	session string
	seen    []uint64
}

func newHistories(max int) *histories {
	return &histories{max: max, byID: map[string]*list.Element{}, order: list.New()}
}

func (h *histories) forget(session string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if e, ok := h.byID[session]; ok {
		h.order.Remove(e)
		delete(h.byID, session)
	}
}

// update records a request's history and returns the indices of its new
// messages: those after the longest prefix already seen. When the history
// was edited (the prefix is shorter than what was seen), the messages after
// it are new only as far as the old history did not hold them, so that
// dropping or changing one message does not make its successors heard
// twice. appendOnly requests carry only what is new (the API keeps the
// rest).
func (h *histories) update(session string, msgs []message, appendOnly bool) []int {
	h.mu.Lock()
	defer h.mu.Unlock()
	e, ok := h.byID[session]
	if ok {
		h.order.MoveToFront(e)
	} else {
		e = h.order.PushFront(&history{session: session})
		h.byID[session] = e
		if h.order.Len() > h.max {
			last := h.order.Back()
			h.order.Remove(last)
			delete(h.byID, last.Value.(*history).session)
		}
	}
	hs := e.Value.(*history)
	old := hs.seen
	var fresh []int
	if appendOnly {
		for i, m := range msgs {
			if m.dedupe && slices.Contains(old, m.digest) {
				continue
			}
			fresh = append(fresh, i)
			hs.seen = append(hs.seen, m.digest)
		}
		if over := len(hs.seen) - maxDigests; over > 0 {
			hs.seen = slices.Delete(hs.seen, 0, over)
		}
		return fresh
	}
	k := 0
	for k < len(old) && k < len(msgs) && old[k] == msgs[k].digest {
		k++
	}
	var left map[uint64]int // the old history past the prefix
	if k < len(old) {
		left = map[uint64]int{}
		for _, d := range old[k:] {
			left[d]++
		}
	}
	for i := k; i < len(msgs); i++ {
		if left[msgs[i].digest] > 0 {
			left[msgs[i].digest]--
			continue
		}
		fresh = append(fresh, i)
	}
	seen := hs.seen[:0]
	if len(msgs) > cap(hs.seen) {
		seen = make([]uint64, 0, len(msgs))
	}
	for _, m := range msgs {
		seen = append(seen, m.digest)
	}
	hs.seen = seen
	if over := len(hs.seen) - maxDigests; over > 0 {
		hs.seen = slices.Delete(hs.seen, 0, over)
	}
	return fresh
}

var digestSeed = maphash.MakeSeed()

// digester hashes what identifies a message: its role, its text, and the
// ids of calls and results, never markers that move from turn to turn
// (Anthropic's cache_control).
type digester struct {
	h       maphash.Hash
	results []string // call ids of the tool results seen
}

func newDigester(role string) *digester {
	d := &digester{}
	d.h.SetSeed(digestSeed)
	d.add(role)
	return d
}

func (d *digester) add(s string) {
	d.h.WriteString(s)
	d.h.WriteByte(0)
}

func (d *digester) sum() uint64 { return d.h.Sum64() }

// part is a content part or block of either API.
type part struct {
	Type      string          `json:"type"`
	Text      *string         `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	Thinking  string          `json:"thinking"`
	Signature string          `json:"signature"`
}

// content digests a message's content (a string, or an array of parts)
// and returns its text: the text parts joined by newlines.
func (d *digester) content(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		d.add("text")
		d.add(s)
		return s
	}
	var parts []json.RawMessage
	if json.Unmarshal(raw, &parts) != nil {
		d.add(string(raw))
		return ""
	}
	var text []string
	for _, pr := range parts {
		var p part
		if json.Unmarshal(pr, &p) != nil {
			d.add(string(pr))
			continue
		}
		d.add(p.Type)
		switch {
		case p.Text != nil && (p.Type == "text" || p.Type == "input_text" || p.Type == "output_text" || p.Type == ""):
			d.add(*p.Text)
			text = append(text, *p.Text)
		case p.Type == "tool_use" || p.Type == "server_tool_use":
			d.add(p.ID)
			d.add(p.Name)
			d.add(string(p.Input))
		case p.Type == "tool_result" || p.Type == "web_search_tool_result":
			d.add(p.ToolUseID)
			if p.Type == "tool_result" && p.ToolUseID != "" {
				d.results = append(d.results, p.ToolUseID)
			}
			d.content(p.Content)
		case p.Type == "thinking":
			d.add(p.Signature)
		default:
			d.add(string(pr))
		}
	}
	return strings.Join(text, "\n")
}

// requestMessages returns the history of a request body. appendOnly is
// true when the API keeps the history and the request holds only what is
// new (Responses with previous_response_id).
func requestMessages(a api, body []byte) (msgs []message, appendOnly, ok bool) {
	switch a {
	case apiChat:
		return chatMessages(body)
	case apiResponses:
		return responsesMessages(body)
	case apiMessages:
		return anthropicMessages(body)
	}
	return nil, false, false
}

func chatMessages(body []byte) ([]message, bool, bool) {
	var req struct {
		Messages []struct {
			Role       string          `json:"role"`
			Content    json.RawMessage `json:"content"`
			ToolCalls  []chatCall      `json:"tool_calls"`
			ToolCallID string          `json:"tool_call_id"`
			Name       string          `json:"name"`
		} `json:"messages"`
	}
	if json.Unmarshal(body, &req) != nil {
		return nil, false, false
	}
	msgs := make([]message, 0, len(req.Messages))
	for _, m := range req.Messages {
		d := newDigester(m.Role)
		text := d.content(m.Content)
		for _, c := range m.ToolCalls {
			d.add(c.ID)
			d.add(c.Function.Name)
			d.add(c.Function.Arguments)
		}
		d.add(m.ToolCallID)
		d.add(m.Name)
		role := ""
		switch m.Role {
		case "system", "developer":
			role = trace.RoleSystem
		case "user":
			role = trace.RoleUser
		case "assistant":
			role = trace.RoleAssistant
		}
		if m.Role == "tool" && m.ToolCallID != "" {
			d.results = append(d.results, m.ToolCallID)
		}
		msgs = append(msgs, message{role: role, text: text, digest: d.sum(), results: d.results})
	}
	return msgs, false, true
}

func responsesMessages(body []byte) ([]message, bool, bool) {
	var req struct {
		Instructions       *string         `json:"instructions"`
		Input              json.RawMessage `json:"input"`
		PreviousResponseID string          `json:"previous_response_id"`
	}
	if json.Unmarshal(body, &req) != nil {
		return nil, false, false
	}
	var msgs []message
	if req.Instructions != nil && *req.Instructions != "" {
		d := newDigester("instructions")
		d.add(*req.Instructions)
		msgs = append(msgs, message{role: trace.RoleSystem, text: *req.Instructions, digest: d.sum(), dedupe: true})
	}
	var s string
	if json.Unmarshal(req.Input, &s) == nil {
		d := newDigester("user")
		d.add("text")
		d.add(s)
		msgs = append(msgs, message{role: trace.RoleUser, text: s, digest: d.sum()})
		return msgs, req.PreviousResponseID != "", true
	}
	var items []json.RawMessage
	if len(req.Input) > 0 && json.Unmarshal(req.Input, &items) != nil {
		return nil, false, false
	}
	for _, raw := range items {
		var it struct {
			Type    string          `json:"type"`
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
			ID      string          `json:"id"`
			CallID  string          `json:"call_id"`
			Name    string          `json:"name"`
			Args    string          `json:"arguments"`
		}
		if json.Unmarshal(raw, &it) != nil {
			return nil, false, false
		}
		var m message
		switch {
		case it.Type == "" || it.Type == "message":
			d := newDigester(it.Role)
			m.text = d.content(it.Content)
			m.digest = d.sum()
			switch it.Role {
			case "system", "developer":
				m.role = trace.RoleSystem
			case "user":
				m.role = trace.RoleUser
			case "assistant":
				m.role = trace.RoleAssistant
			}
		case it.Type == "function_call":
			d := newDigester(it.Type)
			d.add(it.CallID)
			d.add(it.Name)
			d.add(it.Args)
			m.digest = d.sum()
		case it.Type == "function_call_output":
			d := newDigester(it.Type)
			d.add(it.CallID)
			m.digest = d.sum()
			if it.CallID != "" {
				m.results = []string{it.CallID}
			}
		default:
			d := newDigester(it.Type)
			if it.ID != "" {
				d.add(it.ID)
			} else {
				d.add(string(raw))
			}
			m.digest = d.sum()
		}
		msgs = append(msgs, m)
	}
	return msgs, req.PreviousResponseID != "", true
}

func anthropicMessages(body []byte) ([]message, bool, bool) {
	var req struct {
		System   json.RawMessage `json:"system"`
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if json.Unmarshal(body, &req) != nil {
		return nil, false, false
	}
	msgs := make([]message, 0, len(req.Messages)+1)
	if len(req.System) > 0 && string(req.System) != "null" {
		d := newDigester("system")
		text := d.content(req.System)
		msgs = append(msgs, message{role: trace.RoleSystem, text: text, digest: d.sum()})
	}
	for _, m := range req.Messages {
		d := newDigester(m.Role)
		text := d.content(m.Content)
		role := ""
		switch m.Role {
		case "user":
			role = trace.RoleUser
		case "assistant":
			role = trace.RoleAssistant
		}
		msgs = append(msgs, message{role: role, text: text, digest: d.sum(), results: d.results})
	}
	return msgs, false, true
}
