package bench

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/ahead-dev/ahead/trace"
)

func TestSetSpeculator(t *testing.T) {
	for _, tc := range []struct {
		spec, model string
		name, err   string // want: a prefix of SpeculatorName, or a part of the error
	}{
		{"sim:0.55:300ms", "", "sim:0.55:300ms (a simulation, not a model)", ""},
		{"sim:1.5:300ms", "", "", "from 0 to 1"},
		{"sim:0.5", "", "", "sim:ACC:LAT"},
		{"http://127.0.0.1:9/v1", "small", "http://127.0.0.1:9/v1 (model small)", ""},
		{"http://127.0.0.1:9/v1", "", "", "needs a model"},
	} {
		o := &Options{TimeScale: 0.01, Seed: 1}
		err := o.SetSpeculator(tc.spec, tc.model, "")
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: err %v, want one saying %q", tc.spec, err, tc.err)
			}
			if o.Speculator != nil {
				t.Errorf("%s: a speculator was set despite the error", tc.spec)
			}
		case err != nil:
			t.Errorf("%s: %v", tc.spec, err)
		case o.SpeculatorName != tc.name || o.Speculator == nil:
			t.Errorf("%s: name %q (speculator set: %v), want %q", tc.spec, o.SpeculatorName, o.Speculator != nil, tc.name)
		}
	}
}

// searchThenFetch returns n sessions in which every search is followed by
// a fetch of its first result.
func searchThenFetch(n int) []trace.Session {
	var sessions []trace.Session
	for i := range n {
		q := fmt.Sprintf("topic%d", i)
		sessions = append(sessions, trace.Session{ID: q, Events: []trace.Event{
			{Session: q, Seq: 0, Tool: "search", Args: json.RawMessage(`{"q":"` + q + `"}`), Status: trace.StatusOK,
				Output: `{"results": [{"url": "https://` + q + `.example/1"}]}`},
			{Session: q, Seq: 1, Tool: "fetch", Args: json.RawMessage(`{"url":"https://` + q + `.example/1"}`), Status: trace.StatusOK,
				Output: "page"},
		}})
	}
	return sessions
}

func TestMinePool(t *testing.T) {
	var o Options
	if _, _, err := o.MinePool(nil); err == nil {
		t.Error("mining no sessions: no error")
	}
	sessions := searchThenFetch(8)
	pool, heard, err := o.MinePool(sessions)
	if err != nil {
		t.Fatal(err)
	}
	if heard {
		t.Error("heard a conversation in sessions without messages")
	}
	if len(o.Mine) != len(sessions) || o.Predictor == nil {
		t.Fatalf("after MinePool: %d mining sessions, predictor set %v; want %d and set", len(o.Mine), o.Predictor != nil, len(sessions))
	}
	if len(pool.Patterns) == 0 {
		t.Fatal("no patterns mined")
	}
	p, err := o.Predictor()
	if err != nil {
		t.Fatal(err)
	}
	s := searchThenFetch(1)[0]
	got := p.Observe(s.Events[0])
	found := false
	for _, pr := range got {
		found = found || (pr.Tool == "fetch" && string(pr.Args) == string(s.Events[1].Args))
	}
	if !found {
		t.Errorf("after a search the served pool predicts %+v, want the fetch of its first result", got)
	}
}

func TestOverlap(t *testing.T) {
	all := searchThenFetch(4)
	if n := Overlap(all[:2], all[2:]); n != 0 {
		t.Errorf("disjoint: overlap %d, want 0", n)
	}
	if n := Overlap(all[:3], all[1:]); n != 2 {
		t.Errorf("overlap %d, want 2", n)
	}
}

func TestSetAhead(t *testing.T) {
	all := searchThenFetch(8)
	replayed, mined := all[:4], all[4:]

	var o Options
	note, err := o.SetAhead(replayed, Source{Mine: mined, Mining: true})
	if err != nil || o.Predictor == nil || !strings.HasPrefix(note, "mined ") || !strings.Contains(note, "from 4 sessions") {
		t.Errorf("mining: note %q, predictor set %v, %v; want mined from 4 sessions", note, o.Predictor != nil, err)
	}
	o = Options{}
	if _, err := o.SetAhead(replayed, Source{Mine: all[2:], Mining: true}); !errors.Is(err, ErrOverlap) || !strings.Contains(err.Error(), "2 of them") {
		t.Errorf("mining on 2 replayed sessions: %v; want ErrOverlap naming 2", err)
	}
	if _, err := o.SetAhead(replayed, Source{Mine: all[2:], Mining: true, AllowOverlap: true}); err != nil {
		t.Errorf("overlap allowed: %v", err)
	}
	if _, err := o.SetAhead(replayed, Source{Pool: "p.json", Mining: true}); err == nil {
		t.Error("a pool file and sessions to mine: no error")
	}

	// Without patterns, the ahead mode is skipped unless asked for.
	o = Options{}
	if note, err := o.SetAhead(replayed, Source{}); err != nil || slices.Contains(o.Modes, Ahead) || len(o.Modes) != len(Modes)-1 || !strings.Contains(note, "skipped") {
		t.Errorf("no patterns: modes %v, note %q, %v; want every mode but ahead", o.Modes, note, err)
	}
	o = Options{Modes: []Mode{Serial, Ahead}}
	if _, err := o.SetAhead(replayed, Source{}); !errors.Is(err, ErrNoPatterns) {
		t.Errorf("the ahead mode without patterns: %v; want ErrNoPatterns", err)
	}
}
