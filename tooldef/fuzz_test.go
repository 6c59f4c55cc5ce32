package tooldef

import (
	"encoding/json"
	"testing"

	"github.com/ahead-dev/ahead/callkey"
	"github.com/ahead-dev/ahead/predict"
	"github.com/ahead-dev/ahead/trace"
)

// FuzzDeclare: declarations come from upstreams and model requests, which
// ahead does not control. No schema and no message makes the predictor
// fail, and every prediction is a call the engine can key: a tool that was
// declared, arguments that are a JSON object.
func FuzzDeclare(f *testing.F) {
	f.Add(`{"type":"object","properties":{"id":{"type":"string","pattern":"^#W[0-9]+$"}},"required":["id"]}`, "order #W123 please")
	f.Add(`{"properties":{"n":{"type":["integer","null"],"minimum":1,"maximum":3},"l":{"type":"array","items":{"type":"string","enum":["a b","c"]}}},"required":["n","l"]}`, "take 2 of a b")
	f.Add(`{"properties":{"when":{"format":"date","examples":[1,"2024-01-01"]},"e":{"const":true}},"required":["e","when"]}`, "on 2024-05-01, true")
	f.Add(`{"properties":{"p":{"pattern":"(?<=x)","description":"the path"}},"required":["p"]}`, "the path /a/b.c")
	f.Add(`{"properties":{"x":{"items":null,"enum":[null,{},""]}},"required":"x"}`, "")
	f.Fuzz(func(t *testing.T, schema, said string) {
		p := New(nil)
		defs := []trace.ToolDef{{Name: "t", Description: said, InputSchema: json.RawMessage(schema)}, {Name: "u_" + said}}
		ev := trace.Event{Kind: trace.KindTools, Session: "s", From: trace.FromMCP, Tools: defs}
		for _, preds := range [][]predict.Prediction{p.Declare(ev), p.Hear(user("s", said)), p.Hear(user("s", schema))} {
			for _, pr := range preds {
				if pr.Tool != "t" && pr.Tool != "u_"+said {
					t.Fatalf("predicted undeclared tool %q", pr.Tool)
				}
				if _, err := callkey.Make(pr.Tool, pr.Args); err != nil {
					t.Fatalf("prediction %s%s: %v", pr.Tool, pr.Args, err)
				}
				if pr.P <= 0 || pr.P > maxP {
					t.Fatalf("P %v", pr.P)
				}
			}
		}
	})
}
