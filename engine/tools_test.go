package engine_test

import (
	"encoding/json"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ahead-dev/ahead/engine"
	"github.com/ahead-dev/ahead/predict"
	"github.com/ahead-dev/ahead/trace"
)

// declarer predicts read{"path": X} for each tool "read" declared with
// an example X in its description.
type declarer struct {
	predict.Func
	heard *[]trace.Event
}

func (d declarer) Declare(ev trace.Event) []predict.Prediction {
	*d.heard = append(*d.heard, ev)
	for _, def := range ev.Tools {
		if def.Name == "read" {
			args, _ := json.Marshal(map[string]string{"path": def.Description})
			return []predict.Prediction{{Tool: "read", Args: args, P: 0.8, Origin: predict.OriginMessage}}
		}
	}
	return nil
}

func TestToolsRecordedOncePerChangeAndDeclared(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		runs := map[string]int{}
		rec := &memRecorder{}
		var heard []trace.Event
		eng := engine.New(&engine.Options{
			Backends:  map[string]engine.Backend{"b": {Backend: slowTools(time.Second, runs)}},
			Policy:    readsPolicy(),
			Predictor: declarer{next, &heard},
			Recorder:  rec,
		})
		defer eng.Close()
		ctx := t.Context()
		defs := []trace.ToolDef{{Name: "read", Description: "b.txt", InputSchema: json.RawMessage(`{ "type": "object" }`)}}
		for range 3 { // agents declare their tools with every request
			if err := eng.Tools(ctx, "s1", trace.FromOpenAI, defs); err != nil {
				t.Fatal(err)
			}
		}
		if err := eng.Tools(ctx, "s1", trace.FromMCP, defs); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second)
		res, err := eng.Call(ctx, "s1", "read", json.RawMessage(`{"path":"b.txt"}`))
		if err != nil {
			t.Fatal(err)
		}
		if res.Source != engine.Reused {
			t.Errorf("declared tool's call served by %s, want reused", res.Source)
		}
		defs[0].Description = "c.txt"
		if err := eng.Tools(ctx, "s1", trace.FromOpenAI, defs); err != nil {
			t.Fatal(err)
		}
		if err := eng.Tools(ctx, "s1", "elsewhere", defs); err == nil {
			t.Error("tools from an unknown source accepted")
		}
		eng.Close()
		rec.mu.Lock()
		defer rec.mu.Unlock()
		var got []string
		for _, ev := range rec.evs {
			if ev.Kind == trace.KindTools {
				got = append(got, ev.From+":"+ev.Tools[0].Description+":"+string(ev.Tools[0].InputSchema))
			}
		}
		want := []string{`openai:b.txt:{"type":"object"}`, `mcp:b.txt:{"type":"object"}`, `openai:c.txt:{"type":"object"}`}
		if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
			t.Errorf("recorded tools lines %q, want %q", got, want)
		}
		if len(heard) != 3 || heard[2].Seq != 1 {
			t.Errorf("predictor declared %d times (last %+v), want 3, the last at seq 1", len(heard), heard)
		}
	})
}
