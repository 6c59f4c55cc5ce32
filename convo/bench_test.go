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

// reportP99 times each iteration and reports the 99th percentile.
func reportP99(b *testing.B, op func(i int)) {
	var ds []time.Duration
	i := 0
	for b.Loop() {
		t0 := time.Now()
		op(i)
		ds = append(ds, time.Since(t0))
		i++
	}
	slices.Sort(ds)
	b.ReportMetric(float64(ds[len(ds)*99/100].Microseconds()), "p99-µs")
}

// BenchmarkHear: a 4 KB user message heard in a session whose window
// already holds a system prompt and a conversation (issue 10: ≤ 50 µs
// p99).
func BenchmarkHear(b *testing.B) {
	p := New(benchModel(b), nil)
	text := message4K()
	sys := strings.Repeat("The agent must first obtain the user id from the user. ", 140) // ~8 KB
	b.ResetTimer()
	reportP99(b, func(i int) {
		s := fmt.Sprintf("s%d", i%64)
		if i < 64 {
			p.Hear(msg(s, "system", sys))
		}
		p.Hear(msg(s, "user", text))
	})
}

// BenchmarkObserve: a call's result in such a session (≤ 50 µs p99).
func BenchmarkObserve(b *testing.B) {
	p := New(benchModel(b), nil)
	text := message4K()
	for i := 0; i < 64; i++ {
		s := fmt.Sprintf("s%d", i)
		p.Hear(msg(s, "system", strings.Repeat("The agent must first obtain the user id from the user. ", 140)))
		p.Hear(msg(s, "user", text))
	}
	ev := call("", "get_user_details", `{"user_id":"ola_nordmann_1001"}`)
	b.ResetTimer()
	reportP99(b, func(i int) {
		ev.Session = fmt.Sprintf("s%d", i%64)
		p.Observe(ev)
	})
}
