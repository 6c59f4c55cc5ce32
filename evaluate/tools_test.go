package evaluate

import (
	"encoding/json"
	"testing"

	"github.com/ahead-dev/ahead/predict"
	"github.com/ahead-dev/ahead/tooldef"
	"github.com/ahead-dev/ahead/trace"
)

// TestDeclaredToolsReplayed: a recorded session's declared tools reach a
// predictor that reads them before the call they precede, so ahead eval
// measures what the definitions add on recordings that have them.
func TestDeclaredToolsReplayed(t *testing.T) {
	schema := json.RawMessage(`{"type":"object","properties":{"order_id":{"type":"string","pattern":"^#W[0-9]{7}$"}},"required":["order_id"]}`)
	session := func(id string, declared bool) trace.Session {
		s := trace.Session{ID: id,
			Messages: []trace.Event{{Kind: trace.KindMessage, Session: id, Role: trace.RoleUser, Content: "Where is my order #W123456" + id[1:] + "?"}},
			Events:   []trace.Event{{Session: id, Tool: "get_order_details", Args: json.RawMessage(`{"order_id":"#W123456` + id[1:] + `"}`), Status: trace.StatusOK, Step: 1}},
		}
		if declared {
			s.Tools = []trace.Event{{Kind: trace.KindTools, Session: id, From: trace.FromOpenAI, Tools: []trace.ToolDef{{Name: "get_order_details", Description: "Get an order's status.", InputSchema: schema}}}}
		}
		return s
	}
	for _, declared := range []bool{true, false} {
		sessions := []trace.Session{session("s1", declared), session("s2", declared)}
		res, err := Run(t.Context(), sessions, tooldef.New(nil), predict.Nop, nil)
		if err != nil {
			t.Fatal(err)
		}
		want := 0.0
		if declared {
			want = 1
		}
		if got := res.AheadFirst.ExactAt1; got != want {
			t.Errorf("declared %v: first calls' exact_at_1 = %v, want %v", declared, got, want)
		}
	}
}
