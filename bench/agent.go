package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ahead-dev/ahead/backend/replay"
	"github.com/ahead-dev/ahead/callkey"
	"github.com/ahead-dev/ahead/engine"
	"github.com/ahead-dev/ahead/predict"
	"github.com/ahead-dev/ahead/trace"
)

// step is a run of calls the agent issues together, after thinking.
type step struct {
	start, end int // event indices [start, end)
	think      time.Duration
	// heard are the messages that became known since the previous step
	// was issued (trace.Known): they reach the engine as its think window
	// opens, before the model's think time runs.
	heard []trace.Event
	// declared are the tools declared to the session (trace.KindTools
	// lines) since the previous step: they reach the engine before the
	// step's messages, as a live agent's tools/list or model request
	// comes before what it says (evaluate replays them the same way).
	declared []trace.Event
	// streamed, with a modelled model (Options.ModelTPS), is when each
	// call of the step is complete in the model's stream, from the start
	// of the think window: the gateway offers it then (origin stream).
	streamed []time.Duration
}

// Model is a modelled model's speed, replacing recorded think times: the
// first token after TTFT, then TPS tokens a second.
type Model struct {
	TTFT time.Duration
	TPS  float64
}

// charsPerToken is the rough size of a token, for modelled streams.
const charsPerToken = 4

// stream replaces each step's think time by the model's: TTFT plus the
// step's output (its assistant text, then its calls' arguments) at TPS,
// and notes when each call is complete in the stream.
func (m Model) stream(s trace.Session, out []step) {
	if m.TPS <= 0 {
		return
	}
	text := map[int]int{} // step → characters of assistant text
	for _, msg := range s.Messages {
		if msg.Role == trace.RoleAssistant && msg.Step > 0 {
			text[msg.Step] += len(msg.Content)
		}
	}
	at := func(chars int) time.Duration {
		return m.TTFT + time.Duration(float64(chars)/charsPerToken/m.TPS*float64(time.Second))
	}
	for k := range out {
		st := &out[k]
		chars := text[s.Events[st.start].Step]
		st.streamed = make([]time.Duration, st.end-st.start)
		for i := st.start; i < st.end; i++ {
			chars += len(s.Events[i].Tool) + len(s.Events[i].Args)
			st.streamed[i-st.start] = at(chars)
		}
		st.think = at(chars)
	}
}

// steps splits a session into steps: consecutive events with the same step
// number form one step. A session that records no step numbers (all zero)
// has one call per step. A step's think time is its first call's llm_ms
// (calls issued together share the model turn), or def where missing.
func steps(s trace.Session, def time.Duration) []step {
	numbered := false
	for _, ev := range s.Events {
		if ev.Step != 0 {
			numbered = true
			break
		}
	}
	var out []step
	for i, ev := range s.Events {
		if numbered && i > 0 && ev.Step == s.Events[i-1].Step {
			out[len(out)-1].end = i + 1
			continue
		}
		think := def
		if ev.LLMMS != nil && *ev.LLMMS >= 0 {
			think = time.Duration(*ev.LLMMS * float64(time.Millisecond))
		}
		out = append(out, step{start: i, end: i + 1, think: think})
	}
	// Each step hears the messages Known yields before its first call,
	// and the tools declared up to its first call's seq.
	var heard []trace.Event
	ci, k, ti := 0, 0, 0
	for ev := range trace.Known(s) {
		if !ev.IsCall() {
			heard = append(heard, ev)
			continue
		}
		if k < len(out) && out[k].start == ci {
			out[k].heard, heard = heard, nil
			for ; ti < len(s.Tools) && s.Tools[ti].Seq <= ev.Seq; ti++ {
				out[k].declared = append(out[k].declared, s.Tools[ti])
			}
			k++
		}
		ci++
	}
	return out
}

// waves splits a step into the groups of calls issued together: a call
// recorded after a write (a call the policy does not declare read-only) in
// the same step is issued once that write has returned. The recording made
// the write first, and the engine applies a write's hazard when the write
// arrives; issuing both at once would let a read claim a speculative result
// from before the write — a legal order for parallel calls, but not the
// recorded one, so the comparison with the recording would be unfair. Few
// steps mix writes and later reads (10 of 2,778 in the shared tau2 traces).
func (a *agent) waves(st step) []step {
	if a.isWrite == nil {
		return []step{st}
	}
	var out []step
	cur := step{start: st.start, end: st.start}
	for i := st.start; i < st.end; i++ {
		cur.end = i + 1
		if a.isWrite(a.s.Events[i].Tool) && i+1 < st.end {
			out = append(out, cur)
			cur = step{start: i + 1, end: i + 1}
		}
	}
	return append(out, cur)
}

// agent is one replayed session in one mode: its recording, its steps, and
// where it is, which sets the replay backend's position for speculation.
type agent struct {
	s     trace.Session
	steps []step
	keys  []callkey.Key
	valid []bool // keys[i] is a valid key
	rb    *replay.Backend
	// isWrite reports the tools that may change state; nil means the
	// calls of a step are never ordered (see waves).
	isWrite func(tool string) bool

	mu          sync.Mutex // protects outstanding and next
	outstanding map[int]bool
	next        int // index of the first call not yet issued
}

func newAgent(s trace.Session, def time.Duration, model Model, rb *replay.Backend, isWrite func(string) bool) *agent {
	st := steps(s, def)
	model.stream(s, st)
	a := &agent{
		s:           s,
		isWrite:     isWrite,
		steps:       st,
		keys:        make([]callkey.Key, len(s.Events)),
		valid:       make([]bool, len(s.Events)),
		rb:          rb,
		outstanding: make(map[int]bool),
	}
	for i, ev := range s.Events {
		a.keys[i], a.valid[i] = keyOf(ev)
	}
	return a
}

// positionLocked moves the backend to the first call the agent has not
// finished: speculation serves the calls still to come, and a call issued
// but not finished may still be promoted.
func (a *agent) positionLocked() {
	pos := a.next
	for i := range a.outstanding {
		pos = min(pos, i)
	}
	a.rb.SetPosition(a.s.ID, pos)
}

func (a *agent) issue(st step) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for i := st.start; i < st.end; i++ {
		a.outstanding[i] = true
	}
	a.next = st.end
	a.positionLocked()
}

// finished marks call i finished (idempotent).
func (a *agent) finished(i int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.outstanding[i] {
		delete(a.outstanding, i)
		a.positionLocked()
	}
}

// observed marks finished the outstanding call the engine observed: the
// lowest outstanding one with its key (the engine's seq numbers follow
// arrival order, which need not be the recorded order within a step).
func (a *agent) observed(ev trace.Event) {
	k, ok := keyOf(ev)
	if !ok {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	best := -1
	for i := range a.outstanding {
		if a.valid[i] && a.keys[i] == k && (best < 0 || i < best) {
			best = i
		}
	}
	if best >= 0 {
		delete(a.outstanding, best)
		a.positionLocked()
	}
}

// nextStepIfIdle returns the calls of the next step if every issued call
// has finished (the agent is thinking), else nil.
func (a *agent) nextStepIfIdle() []trace.Event {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.outstanding) > 0 || a.next >= len(a.s.Events) {
		return nil
	}
	for _, st := range a.steps {
		if st.start == a.next {
			return a.s.Events[st.start:st.end]
		}
	}
	return nil
}

// callResult is what happened to one authoritative call.
type callResult struct {
	latency  time.Duration // trace time, issue to result
	source   engine.Source
	mismatch bool
	got      string // the result's output, kept when it mismatches
	err      error
}

// sessionResult is what happened to one session.
type sessionResult struct {
	think, stall time.Duration // trace time
	// stallBy splits the stall by how the call that ended each step was
	// served.
	stallBy map[engine.Source]time.Duration
	calls   []callResult // by event index
	// late holds how late the agent woke up after each think (trace
	// time): the machine's scheduling delay, magnified by 1/scale.
	late []time.Duration
}

// replay runs the session as an agent against eng. It begins the session
// in the engine first, as the fronts do when a session starts (an MCP
// initialize), so that the first step's think window can be used too: the
// oracle knows the first step there, and ahead may predict it. (Without a
// predictor, as in serial and A/A, Begin does nothing.) It does not end the
// session in the engine: an agent's last call is followed by a last answer
// the traces do not time, and a real engine would not know the session
// ended either, so what it speculates after the last call runs, is wasted
// and counted (see drain).
func (a *agent) replay(ctx context.Context, eng *engine.Engine, scale float64, stream bool) (*sessionResult, error) {
	res := &sessionResult{
		stallBy: make(map[engine.Source]time.Duration),
		calls:   make([]callResult, len(a.s.Events)),
	}
	eng.Begin(a.s.ID)
	for _, st := range a.steps {
		for _, d := range st.declared {
			if err := eng.Tools(ctx, a.s.ID, d.From, d.Tools); err != nil {
				return nil, fmt.Errorf("session %s: tools declared before call %d: %w", a.s.ID, d.Seq, err)
			}
		}
		for _, m := range st.heard {
			if err := eng.Message(ctx, a.s.ID, m.Role, m.Content); err != nil && !errors.Is(err, engine.ErrInvalidMessage) {
				return nil, err
			}
		}
		open := time.Now()
		wake := open.Add(scaled(st.think, scale))
		if stream {
			// The gateway sees each call complete in the model's stream
			// and offers it at once, ahead of the turn's end.
			for j, d := range st.streamed {
				if err := sleep(ctx, time.Until(open.Add(scaled(d, scale)))); err != nil {
					return nil, err
				}
				ev := a.s.Events[st.start+j]
				eng.Offer(a.s.ID, engine.NextCall, []predict.Prediction{{Tool: ev.Tool, Args: ev.Args, P: 1, Origin: predict.OriginStream}})
			}
		}
		if err := sleep(ctx, time.Until(wake)); err != nil {
			return nil, err
		}
		res.late = append(res.late, unscaled(time.Since(wake), scale))
		res.think += st.think
		a.issue(st)
		t0 := time.Now()
		for _, w := range a.waves(st) {
			var wg sync.WaitGroup
			for i := w.start; i < w.end; i++ {
				wg.Go(func() {
					ev := a.s.Events[i]
					r, err := eng.Call(replay.At(ctx, i), a.s.ID, ev.Tool, ev.Args)
					cr := callResult{latency: unscaled(time.Since(t0), scale), source: r.Source, err: err}
					if err == nil {
						cr.mismatch = r.Output != ev.Output || r.Status != ev.Status
						if cr.mismatch {
							cr.got = string(r.Status) + ": " + r.Output
						}
					}
					res.calls[i] = cr
					a.finished(i)
				})
			}
			wg.Wait()
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		stall := unscaled(time.Since(t0), scale)
		res.stall += stall
		last := st.start
		for i := st.start; i < st.end; i++ {
			if res.calls[i].latency > res.calls[last].latency {
				last = i
			}
		}
		src := res.calls[last].source
		if res.calls[last].err != nil {
			src = "failed"
		}
		if stall > 0 {
			res.stallBy[src] += stall
		}
	}
	return res, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func scaled(d time.Duration, scale float64) time.Duration {
	return time.Duration(float64(d) * scale)
}

func unscaled(d time.Duration, scale float64) time.Duration {
	return time.Duration(float64(d) / scale)
}
