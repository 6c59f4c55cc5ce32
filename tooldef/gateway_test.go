package tooldef_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/ahead-dev/ahead/backend"
	"github.com/ahead-dev/ahead/engine"
	"github.com/ahead-dev/ahead/gateway"
	"github.com/ahead-dev/ahead/policy"
	"github.com/ahead-dev/ahead/predict"
	"github.com/ahead-dev/ahead/tooldef"
	"github.com/ahead-dev/ahead/trace"
)

// deaf is the predictor without its definitions: what ahead predicts when
// it ignores them.
type deaf struct{ p *tooldef.Predictor }

func (d deaf) Observe(ev trace.Event) []predict.Prediction { return d.p.Observe(ev) }
func (d deaf) Hear(msg trace.Event) []predict.Prediction   { return d.p.Hear(msg) }
func (d deaf) Forget(s string)                             { d.p.Forget(s) }

type recorder struct {
	mu  sync.Mutex
	evs []trace.Event
}

func (r *recorder) Record(ev trace.Event) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.evs = append(r.evs, ev)
	return nil
}

const orderSchema = `{"type":"object","properties":{"order_id":{"type":"string","pattern":"^#W[0-9]{7}$","description":"The order's id, such as #W0000000."}},"required":["order_id"]}`

// TestGatewayRequestToolsPredictTheFirstCall: an agent asks its model
// through the gateway, its request declaring a tool never called before
// (OpenAI and Anthropic shapes) and the user naming an order. The
// definitions are recorded, and the tool's call, with the value its
// schema's pattern picks out of the message, runs ahead: the agent's call
// is served by it. Without the definitions it is not.
func TestGatewayRequestToolsPredictTheFirstCall(t *testing.T) {
	model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		if strings.HasSuffix(r.URL.Path, "/messages") {
			io.WriteString(w, `{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"Let me look."}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}`)
			return
		}
		io.WriteString(w, `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"Let me look."}}]}`)
	}))
	defer model.Close()
	said := "Hi, where is my order #W1234567? It was due yesterday."
	bodies := map[string]struct{ path, body string }{
		trace.FromOpenAI: {"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":` + quote(said) + `}],` +
			`"tools":[{"type":"function","function":{"name":"get_order_details","description":"Get the status and items of an order.","parameters":` + orderSchema + `}}]}`},
		trace.FromAnthropic: {"/v1/messages", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":` + quote(said) + `}],` +
			`"tools":[{"name":"get_order_details","description":"Get the status and items of an order.","input_schema":` + orderSchema + `}]}`},
	}
	for _, from := range []string{trace.FromOpenAI, trace.FromAnthropic} {
		for _, ignored := range []bool{false, true} {
			name := from
			if ignored {
				name += " definitions ignored"
			}
			t.Run(name, func(t *testing.T) {
				pred := predict.Predictor(tooldef.New(nil))
				want := engine.Reused
				if ignored {
					pred, want = deaf{tooldef.New(nil)}, engine.Executed
				}
				var runs int
				var mu sync.Mutex
				rec := &recorder{}
				eng := engine.New(&engine.Options{
					Backends: map[string]engine.Backend{"shop": {Backend: backend.Funcs{
						"get_order_details": func(_ context.Context, args json.RawMessage) (string, error) {
							mu.Lock()
							runs++
							mu.Unlock()
							return `{"status":"delivered"}`, nil
						},
					}}},
					Policy:    &policy.Policy{Tools: map[string]policy.Tool{"get_order_details": {Allow: true, Reads: policy.Refs("order_id")}}},
					Predictor: pred,
					Recorder:  rec,
				})
				defer eng.Close()
				gw, err := gateway.New(&gateway.Options{
					OpenAI:    &gateway.Upstream{BaseURL: model.URL + "/v1"},
					Anthropic: &gateway.Upstream{BaseURL: model.URL},
					Engine:    eng,
				})
				if err != nil {
					t.Fatal(err)
				}
				srv := httptest.NewServer(gw.Handler())
				defer srv.Close()
				b := bodies[from]
				req, _ := http.NewRequest("POST", srv.URL+b.path, strings.NewReader(b.body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("anthropic-version", "2023-06-01")
				req.Header.Set(gateway.SessionHeader, "s1")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("model request: %s", resp.Status)
				}
				gw.Close() // every request heard
				res, err := eng.Call(t.Context(), "s1", "get_order_details", json.RawMessage(`{"order_id":"#W1234567"}`))
				if err != nil {
					t.Fatal(err)
				}
				if res.Source != want && !(want == engine.Reused && res.Source == engine.Promoted) {
					t.Errorf("the first call of a tool never called before was %s, want %s", res.Source, want)
				}
				eng.Close()
				mu.Lock()
				if runs != 1 {
					t.Errorf("the tool ran %d times, want 1", runs)
				}
				mu.Unlock()
				rec.mu.Lock()
				defer rec.mu.Unlock()
				var lines []trace.Event
				for _, ev := range rec.evs {
					if ev.Kind == trace.KindTools {
						lines = append(lines, ev)
					}
				}
				if len(lines) != 1 || lines[0].From != from || len(lines[0].Tools) != 1 || lines[0].Tools[0].Name != "get_order_details" ||
					string(lines[0].Tools[0].InputSchema) != orderSchema {
					t.Errorf("recorded tools lines %+v, want the request's one tool, from %s", lines, from)
				}
			})
		}
	}
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
