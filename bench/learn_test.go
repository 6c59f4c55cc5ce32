package bench

import (
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ahead-dev/ahead/trace"
)

// TestLearnHalves is ahead bench --learn (issue 24 item 6): from an empty
// pool, the ahead mode learns as it replays the sessions in file order,
// and the report gives the hidden stall of each half: nothing of the
// second call is hidden before a relearning found its pattern, and half
// of each session's stall (the second call) after.
func TestLearnHalves(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var sessions []trace.Session
		for i := range 10 {
			id := fmt.Sprintf("s%02d", i)
			item := fmt.Sprintf("it%dx", i*7919%1000)
			sessions = append(sessions, trace.Session{ID: id, Events: []trace.Event{
				call(id, 0, 1, "get_list", fmt.Sprintf(`{"q":"q%d"}`, i), fmt.Sprintf(`{"id":%q}`, item), 2000),
				call(id, 1, 2, "get_item", fmt.Sprintf(`{"id":%q}`, item), "ok", 2000),
			}})
		}
		o := &Options{
			Latency:     latencies(map[string]time.Duration{"get_list": time.Second, "get_item": time.Second}),
			Policy:      readPolicy(),
			Concurrency: 1,
		}
		if err := o.SetLearning(2); err != nil {
			t.Fatal(err)
		}
		rep, err := Run(t.Context(), sessions, o)
		if err != nil {
			t.Fatal(err)
		}
		h := rep.HiddenStallHalves
		if len(h) != 2 {
			t.Fatalf("hidden stall by half %v, want two figures", h)
		}
		if h[0] == nil || h[1] == nil {
			t.Fatalf("hidden stall by half %v: a half undefined in a synthetic clock", h)
		}
		if *h[0] >= *h[1] || *h[1] < 0.45 {
			t.Errorf("hidden stall by half %.2f, %.2f: want the second half about 0.5 (every second call hidden), above the first", *h[0], *h[1])
		}
		var b strings.Builder
		if err := rep.WriteTable(&b); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.String(), "by half (ahead)") {
			t.Errorf("the table does not say what each half hid:\n%s", b.String())
		}
	})
}
