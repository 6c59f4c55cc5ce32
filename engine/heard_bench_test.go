package engine_test

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ahead-dev/ahead/engine"
	"github.com/ahead-dev/ahead/learn"
	"github.com/ahead-dev/ahead/mine"
	"github.com/ahead-dev/ahead/policy"
	"github.com/ahead-dev/ahead/trace"
)

// heardPool is a pool mined with its conversation model from the shared
// tau2 -conv trace when it is here (a real vocabulary and tool set), else
// from convo's testdata; with the first call of a session that heard a
// conversation, for the benchmarks to make. Mined once per process.
var heardPool = sync.OnceValues(func() (heard, error) {
	sessions, err := trace.Collect(trace.NewReader(nil).Events("/work/shared/traces/tau2-airline-retail-train-conv.jsonl.gz"))
	if err != nil {
		sessions, err = trace.Collect(trace.NewReader(nil).Events("../convo/testdata/library.jsonl"))
		if err != nil {
			return heard{}, err
		}
	}
	pool, err := mine.Mine(sessions, nil)
	if err != nil {
		return heard{}, err
	}
	if ok, err := learn.MineInto(pool, sessions); err != nil || !ok {
		return heard{}, fmt.Errorf("no conversation model: %v", err)
	}
	h := heard{serve: func() (*learn.Predictor, error) { return learn.New(pool, nil) }}
	for _, s := range sessions {
		if len(s.Messages) > 0 && len(s.Events) > 0 {
			h.first = s.Events[0]
			return h, nil
		}
	}
	return heard{}, fmt.Errorf("no session with messages and calls")
})

type heard struct {
	serve func() (*learn.Predictor, error)
	first trace.Event
}

// heardEngine is an engine serving the heard pool, every tool allowed,
// with 64 sessions that each heard a system prompt of ~8 KB and a 4 KB
// user message.
func heardEngine(b *testing.B) (*engine.Engine, heard, []string) {
	h, err := heardPool()
	if err != nil {
		b.Skip(err)
	}
	pred, err := h.serve()
	if err != nil {
		b.Fatal(err)
	}
	eng := engine.New(&engine.Options{
		Backends:  map[string]engine.Backend{"b": {Backend: anyTool{}}},
		Policy:    &policy.Policy{Default: policy.Tool{Allow: true}},
		Predictor: pred,
	})
	b.Cleanup(eng.Close)
	sessions := make([]string, 64)
	for i := range sessions {
		sessions[i] = fmt.Sprintf("s%d", i)
		if err := eng.Message(b.Context(), sessions[i], trace.RoleSystem, systemPrompt()); err != nil {
			b.Fatal(err)
		}
		if err := eng.Message(b.Context(), sessions[i], trace.RoleUser, message4K()); err != nil {
			b.Fatal(err)
		}
	}
	eng.Predicted(b.Context())
	return eng, h, sessions
}

func systemPrompt() string {
	return strings.Repeat("The agent must first obtain the user id from the user. ", 140)
}

// message4K is a 4 KB user message with a few ids in it (as convo's
// benchmark has it).
func message4K() string {
	var sb strings.Builder
	for i := 0; sb.Len() < 4096; i++ {
		fmt.Fprintf(&sb, "I would like to change reservation %06X for user ola_nordmann_%d, order #W%07d please. ", i*7919, 1000+i, 4000000+i)
	}
	return sb.String()[:4096]
}

// loopP99 times op in each iteration of a b.Loop and reports the 99th
// percentile and the median. The predictor catches up after each op,
// outside those times, as it does while a model thinks: ns/op counts its
// work, the percentiles what the caller of op waited.
func loopP99(b *testing.B, eng *engine.Engine, op func(i int)) {
	var ds []time.Duration
	for i := 0; b.Loop(); i++ {
		t0 := time.Now()
		op(i)
		ds = append(ds, time.Since(t0))
		eng.Predicted(b.Context())
	}
	slices.Sort(ds)
	b.ReportMetric(float64(ds[len(ds)/2].Nanoseconds())/1e3, "p50-µs")
	b.ReportMetric(float64(ds[len(ds)*99/100].Nanoseconds())/1e3, "p99-µs")
}

// BenchmarkMessageHeard is Engine.Message with a 4 KB user message in a
// session that heard a conversation, the conversation model listening
// (issue 10: ≤ 50 µs p99): what the sender of the message waits.
func BenchmarkMessageHeard(b *testing.B) {
	eng, _, sessions := heardEngine(b)
	text := message4K()
	loopP99(b, eng, func(i int) {
		if err := eng.Message(b.Context(), sessions[i%len(sessions)], trace.RoleUser, text); err != nil {
			b.Fatal(err)
		}
	})
}

// BenchmarkCallHeard is an authoritative call in a session that heard a
// conversation, on an instant backend, patterns and the conversation
// model predicting: what the agent waits for its result (issue 10:
// Observe+Predict ≤ 50 µs p99 with conversation state).
func BenchmarkCallHeard(b *testing.B) {
	eng, h, sessions := heardEngine(b)
	loopP99(b, eng, func(i int) {
		if _, err := eng.Call(b.Context(), sessions[i%len(sessions)], h.first.Tool, h.first.Args); err != nil {
			b.Fatal(err)
		}
	})
}
