package bench

import (
	"fmt"
	"testing"
	"time"

	"github.com/ahead-dev/ahead/trace"
)

// findThenGet is a session in which get_item reads the id get_find
// returned: a pattern the miner needs 3 sessions to see (MinSupport).
func findThenGet(i int) trace.Session {
	id := fmt.Sprintf("s%d", i)
	q := string(rune('a' + i))
	return trace.Session{ID: id, Events: []trace.Event{
		call(id, 0, 0, "get_find", fmt.Sprintf(`{"q":"q%s"}`, q), fmt.Sprintf(`{"id":"k-%s"}`, q), 2000),
		call(id, 1, 1, "get_item", fmt.Sprintf(`{"id":"k-%s"}`, q), "item "+q, 2000),
	}}
}

// TestReplicasFleetLearnsSooner is `ahead bench --replicas` on a small
// replay: 2 replicas, each relearning after every 2 sessions it completes,
// 8 sessions in 2 waves. After the first wave a replica alone has seen the
// pattern twice (too few to mine it), the fleet 4 times: in the second
// wave the fleet's replicas speculate get_item and the lone ones cannot.
// Real time (the fleet's NATS server does not run in a synctest bubble),
// at a scale that leaves each think window 100 ms.
func TestReplicasFleetLearnsSooner(t *testing.T) {
	var sessions []trace.Session
	for i := range 8 {
		sessions = append(sessions, findThenGet(i))
	}
	o := &Options{Latency: latencies(map[string]time.Duration{"get_find": 500 * time.Millisecond, "get_item": 500 * time.Millisecond}),
		Policy: readPolicy(), TimeScale: 0.05, Concurrency: 4}
	if err := o.SetReplicas(2, 2); err != nil {
		t.Fatal(err)
	}
	rep, err := Run(t.Context(), sessions, o)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Lossless {
		t.Fatalf("not lossless: %d mismatches", rep.Mismatches)
	}
	alone, fleet := rep.Mode(Ahead), rep.Mode(Fleet)
	if got := alone.Reused + alone.Promoted; got != 0 {
		t.Errorf("replicas alone served %d calls from speculation, want 0 (each saw the pattern twice before the second wave)", got)
	}
	if got := fleet.Reused + fleet.Promoted; got < 4 {
		t.Errorf("the fleet's replicas served %d calls from speculation, want the 4 get_item of the second wave", got)
	}
	// The ratio itself is wall-clock timing (a few ms of scheduling at
	// this scale move it by tenths): reported, not pinned here.
	if rep.FleetHiddenStallRatio == nil {
		t.Error("no fleet hidden stall ratio in the report")
	}
	if c := rep.LearningCurves[Fleet]; len(c) != curveParts {
		t.Errorf("fleet learning curve %v, want %d parts", c, curveParts)
	}
}
