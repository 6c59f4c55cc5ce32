package convo

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ahead-dev/ahead/trace"
)

// benchModel mines the shared tau2 traces when they are here (a real
// vocabulary and tool set), else the testdata.
func benchModel(b *testing.B) *Model {
	path := sharedDir + "tau2-airline-retail-train-conv.jsonl.gz"
	sessions, err := trace.Collect(trace.NewReader(nil).Events(path))
	if err != nil {
		sessions = readTestdata(b)
	}
	m, err := Mine(sessions, nil)
	if err != nil {
		b.Fatal(err)
	}
	return m
}

// message4K is a 4 KB user message with a few ids in it.
func message4K() string {
	var sb strings.Builder
	for i := 0; sb.Len() < 4096; i++ {
		fmt.Fprintf(&sb, "I would like to change reservation %06X for user ola_nordmann_%d, order #W%07d please. ", i*7919, 1000+i, 4000000+i)
	}
	return sb.String()[:4096]
}

// reportP99 times each iteration and reports the median and the 99th
// percentile.
func reportP99(b *testing.B, op func(i int)) {
	var ds []time.Duration
	for i := 0; b.Loop(); i++ {
		t0 := time.Now()
		op(i)
		ds = append(ds, time.Since(t0))
	}
	slices.Sort(ds)
	b.ReportMetric(float64(ds[len(ds)/2].Nanoseconds())/1e3, "p50-µs")
	b.ReportMetric(float64(ds[len(ds)*99/100].Nanoseconds())/1e3, "p99-µs")
}

// heardSessions makes p hear, in each of 64 sessions, a system prompt of
// ~8 KB and a 4 KB user message.
func heardSessions(p *Predictor) []string {
	sys := strings.Repeat("The agent must first obtain the user id from the user. ", 140)
	text := message4K()
	ids := make([]string, 64)
	for i := range ids {
		ids[i] = fmt.Sprintf("s%d", i)
		p.Hear(msg(ids[i], "system", sys))
		p.Hear(msg(ids[i], "user", text))
	}
	return ids
}

// BenchmarkHear: a 4 KB user message heard in a session whose window
// already holds a system prompt and a conversation (issue 10: ≤ 50 µs
// p99).
func BenchmarkHear(b *testing.B) {
	p := New(benchModel(b), nil)
	ids := heardSessions(p)
	ev := msg("", "user", message4K())
	reportP99(b, func(i int) {
		ev.Session = ids[i%len(ids)]
		p.Hear(ev)
	})
}

// BenchmarkTokenize: tokenising and indexing a 4 KB user message alone,
// the part of Hear that grows with the message.
func BenchmarkTokenize(b *testing.B) {
	c := compile(benchModel(b))
	st := newState(c, DefaultMaxBytes, false)
	st.codes = newShapeCodes(c.shapeID) // as a Predictor's sessions
	text := message4K()
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			st.newSegment(roleUser, text)
		}
	})
	// The reference tokeniser (tokenize_test.go), for the ratio.
	b.Run("ref", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			seg := &segment{role: roleUser, size: len(text), text: text, toks: make([]token, 0, len(text)/6+1)}
			st.refTokenize(seg, 0, len(text), "")
		}
	})
}

// BenchmarkObserve: a call's result in such a session (≤ 50 µs p99).
func BenchmarkObserve(b *testing.B) {
	p := New(benchModel(b), nil)
	ids := heardSessions(p)
	ev := call("", "get_user_details", `{"user_id":"ola_nordmann_1001"}`)
	reportP99(b, func(i int) {
		ev.Session = ids[i%len(ids)]
		p.Observe(ev)
	})
}

// BenchmarkMineShared mines the conversation model of both shared -conv
// files (calls and messages), as a checkpoint and ahead mine do (issue 24:
// relearning at a checkpoint). Skipped when the traces are not here.
func BenchmarkMineShared(b *testing.B) {
	var sessions []trace.Session
	for _, name := range []string{"tau2-airline-retail-train-conv", "minisweagent-train-conv"} {
		ss, err := trace.Collect(trace.NewReader(nil).Events(sharedDir + name + ".jsonl.gz"))
		if err != nil {
			b.Skipf("shared traces not here: %v", err)
		}
		sessions = append(sessions, ss...)
	}
	calls := 0
	for _, s := range sessions {
		calls += len(s.Events)
	}
	cpu := cpuTime()
	for b.Loop() {
		if _, err := Mine(sessions, nil); err != nil {
			b.Fatal(err)
		}
	}
	reportCPU(b, cpu)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*calls), "ns/call")
}

// BenchmarkFits: tool choice's regression and the value scorer's fit on
// the tables of both shared -conv files (the full fit of
// BenchmarkMineShared), with what their passes compute alike shared
// (fast) and without (ref: one sum per set, one softmax per call; one
// score per candidate, one softmax per instance), side by side. The
// value scorer's runs include a copy of its instances (about 20 MB),
// which it drops as it reads them.
func BenchmarkFits(b *testing.B) {
	var sessions []trace.Session
	for _, name := range []string{"tau2-airline-retail-train-conv", "minisweagent-train-conv"} {
		ss, err := trace.Collect(trace.NewReader(nil).Events(sharedDir + name + ".jsonl.gz"))
		if err != nil {
			b.Skipf("shared traces not here: %v", err)
		}
		sessions = append(sessions, ss...)
	}
	o := (&MineOptions{}).withDefaults()
	lex := newLexicon(sessions)
	m, tm := fitTables(sessions, &o, lex, vocabulary(sessions, o.MinSessions, lex))
	c := compile(m)
	fits := map[string]func(){
		"toolwords/fast": func() { toolWordWeights(c, tm.wordSets, tm.samples) },
		"toolwords/ref":  func() { toolWordWeightsRef(c, tm.wordSets, tm.samples) },
	}
	setToolWords(m, c, toolWordWeights(c, tm.wordSets, tm.samples))
	ins := instances(compile(m), sessions, o.MaxBytes, lex)
	copyIns := func() []instance {
		out := slices.Clone(ins)
		for i := range out {
			out[i].x = slices.Clone(out[i].x)
		}
		return out
	}
	fits["weights/fast"] = func() { fitWeights(copyIns()) }
	fits["weights/ref"] = func() { fitWeightsRef(copyIns()) }
	for _, name := range []string{"toolwords/fast", "toolwords/ref", "weights/fast", "weights/ref"} {
		b.Run(name, func(b *testing.B) {
			cpu := cpuTime()
			for b.Loop() {
				fits[name]()
			}
			reportCPU(b, cpu)
		})
	}
}
