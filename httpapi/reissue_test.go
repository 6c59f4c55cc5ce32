package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ahead-dev/ahead/backend"
	"github.com/ahead-dev/ahead/engine"
	"github.com/ahead-dev/ahead/httpapi"
)

// TestClientGoneReissued (issue 26 item 4): a client whose connection
// breaks while its call runs, and that posts the same call again, gets the
// first run's result (source joined): the tool runs once.
func TestClientGoneReissued(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var runs atomic.Int32
		eng := engine.New(&engine.Options{Backends: map[string]engine.Backend{"b": {Backend: backend.Funcs{
			"pay": func(ctx context.Context, args json.RawMessage) (string, error) {
				n := runs.Add(1)
				select {
				case <-time.After(time.Second):
				case <-ctx.Done():
					return "", ctx.Err()
				}
				return "paid, run " + string(rune('0'+n)), nil
			},
		}}}})
		defer eng.Close()
		h := newHandler(eng, httpapi.Options{})
		body := `{"tool": "pay", "args": {"amount": 42}}`

		ctx, cancel := context.WithCancel(t.Context())
		go func() {
			time.Sleep(300 * time.Millisecond)
			cancel() // the connection breaks
		}()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequestWithContext(ctx, "POST", "/v1/sessions/s/calls", strings.NewReader(body)))
		if rec.Code != 499 {
			t.Fatalf("cut request: code %d, want 499; body %s", rec.Code, rec.Body)
		}

		rec = httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequestWithContext(t.Context(), "POST", "/v1/sessions/s/calls", strings.NewReader(body)))
		var got struct {
			Output string `json:"output"`
			Source string `json:"source"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || rec.Code != 200 {
			t.Fatalf("re-posted: code %d, body %s (%v)", rec.Code, rec.Body, err)
		}
		if got.Source != string(engine.Joined) || got.Output != "paid, run 1" || runs.Load() != 1 {
			t.Errorf("re-posted: %s %q after %d runs, want joined %q after 1", got.Source, got.Output, runs.Load(), "paid, run 1")
		}
		var st httpapi.Stats
		rec = httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequestWithContext(t.Context(), "GET", "/v1/stats", nil))
		if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil {
			t.Fatal(err)
		}
		if st.Joined != 1 || st.Orphaned != 1 || st.Tools["pay"].Joined != 1 {
			t.Errorf("/v1/stats: joined %d (pay %d), orphaned %d; want 1 (1), 1", st.Joined, st.Tools["pay"].Joined, st.Orphaned)
		}
	})
}
