package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ahead-dev/ahead/backend"
	"github.com/ahead-dev/ahead/engine"
	"github.com/ahead-dev/ahead/httpapi"
	"github.com/ahead-dev/ahead/sched"
)

// A backend with slots holds a bounded queue; a call beyond it is answered
// 503 with Retry-After, and did not run.
func TestQueueFull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		reg := prometheus.NewRegistry()
		ran := 0
		eng := engine.New(&engine.Options{Backends: map[string]engine.Backend{"b": {
			Backend: backend.Funcs{"wait": func(ctx context.Context, _ json.RawMessage) (string, error) {
				ran++
				<-release
				return "ok", nil
			}},
			Limits: sched.Limits{Slots: 1, Queue: 1},
		}}, Registerer: reg})
		defer eng.Close()
		h := httpapi.New(eng, &httpapi.Options{Logger: quiet})
		post := func(i string) *httptest.ResponseRecorder {
			req := httptest.NewRequestWithContext(t.Context(), "POST", "/v1/sessions/s/calls", strings.NewReader(`{"tool": "wait", "args": {"i": `+i+`}}`))
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			return rec
		}
		codes := make(chan int, 2)
		for _, i := range []string{"1", "2"} {
			go func() { codes <- post(i).Code }()
			synctest.Wait() // the first runs, the second waits
		}
		rec := post("3")
		if rec.Code != 503 || rec.Header().Get("Retry-After") != "1" || !strings.Contains(rec.Body.String(), "busy") {
			t.Errorf("call beyond the queue: %d, Retry-After %q, %s; want 503, 1, a busy backend", rec.Code, rec.Header().Get("Retry-After"), rec.Body)
		}
		close(release)
		for range 2 {
			if c := <-codes; c != 200 {
				t.Errorf("queued call: %d, want 200", c)
			}
		}
		if ran != 2 {
			t.Errorf("the tool ran %d times, want 2 (the refused call never runs)", ran)
		}
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		refused := -1.0
		for _, mf := range mfs {
			if mf.GetName() == "ahead_backend_refused_total" {
				refused = mf.GetMetric()[0].GetCounter().GetValue()
			}
		}
		if refused != 1 {
			t.Errorf("ahead_backend_refused_total = %v, want 1", refused)
		}
	})
}
