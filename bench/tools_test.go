package bench

import (
	"encoding/json"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ahead-dev/ahead/learn"
	"github.com/ahead-dev/ahead/predict"
	"github.com/ahead-dev/ahead/trace"
)

// TestDeclaredToolsReplayed: ahead bench gives the engine the tools a
// recording declared (its trace.KindTools lines) as a live agent's
// tools/list or model request would, before the messages of their seq.
// The session's only call is to a tool never called before, whose order
// id the user said and whose schema's pattern picks it out: with the
// declaration replayed it runs ahead while the agent thinks, and without
// it (the same session, its tools line left out) it is executed.
func TestDeclaredToolsReplayed(t *testing.T) {
	const schema = `{"type":"object","properties":{"order_id":{"type":"string","pattern":"^#W[0-9]{7}$","description":"The order's id, such as #W0000000."}},"required":["order_id"]}`
	session := trace.Session{ID: "s",
		Tools: []trace.Event{{Kind: trace.KindTools, Session: "s", Seq: 0, From: trace.FromOpenAI,
			Tools: []trace.ToolDef{{Name: "get_order_details", Description: "Get the status and details of an order.", InputSchema: json.RawMessage(schema)}}}},
		Messages: []trace.Event{{Kind: trace.KindMessage, Session: "s", Seq: 0, Role: trace.RoleUser, Content: "Hi! Could you check the status of my order #W7135204 please?"}},
		Events:   []trace.Event{call("s", 0, 1, "get_order_details", `{"order_id":"#W7135204"}`, `{"status":"delivered"}`, 2000)},
	}
	deaf := session
	deaf.Tools = nil
	for _, tc := range []struct {
		name    string
		session trace.Session
		served  bool
	}{{"declared", session, true}, {"not declared", deaf, false}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rep, err := Run(t.Context(), []trace.Session{tc.session}, &Options{
					Predictor: func() (predict.Predictor, error) {
						return learn.New(learn.EmptyPool(), &learn.Options{NoDefault: true})
					},
					Latency: latencies(map[string]time.Duration{"get_order_details": time.Second}),
					Policy:  readPolicy(),
					Modes:   []Mode{Ahead},
				})
				if err != nil {
					t.Fatal(err)
				}
				a := rep.Mode(Ahead)
				served := a.Reused+a.Promoted == 1
				if served != tc.served || a.Calls != 1 {
					t.Errorf("calls %d, reused %d, promoted %d, executed %d: want the call served ahead %v", a.Calls, a.Reused, a.Promoted, a.Executed, tc.served)
				}
				if tc.served && a.StallMS != 0 {
					t.Errorf("stall %v ms, want 0: the call ran during the 2 s the agent thought", a.StallMS)
				}
			})
		})
	}
}
