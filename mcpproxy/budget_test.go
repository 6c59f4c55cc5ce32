package mcpproxy

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/ahead-dev/ahead/backend"
)

// countBudget counts what is grown in it.
type countBudget struct {
	mu sync.Mutex
	n  int64
}

func (c *countBudget) Grow(_ context.Context, n int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n += n
	return nil
}

// Issue 23: an HTTP upstream's answers were read whole by the SDK, outside
// max_answer_bytes and with no bound. They count in the call's budget as
// they are read, and a JSON answer is bounded like a stdio message.
func TestUpstreamAnswersCounted(t *testing.T) {
	const size = 1 << 20
	body := strings.Repeat("x", size)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", r.URL.Query().Get("type"))
		io.WriteString(w, body)
	}))
	defer srv.Close()
	get := func(tr budgetTransport, b backend.Budget, typ string) (int, error) {
		ctx := t.Context()
		if b != nil {
			ctx = backend.WithBudget(ctx, b)
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"?type="+typ, nil)
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		got, err := io.ReadAll(resp.Body)
		return len(got), err
	}
	for _, typ := range []string{"application/json", "text/event-stream"} {
		var b countBudget
		n, err := get(budgetTransport{base: http.DefaultTransport}, &b, typ)
		if err != nil || n != size || b.n != size {
			t.Errorf("%s: read %d bytes (%v), %d counted; want %d and %d", typ, n, err, b.n, size, size)
		}
	}
	small := budgetTransport{base: http.DefaultTransport, limit: size - 1}
	if _, err := get(small, nil, "application/json"); err == nil || !strings.Contains(err.Error(), "over") {
		t.Errorf("a JSON answer over the limit: %v, want an error", err)
	}
	if n, err := get(small, nil, "text/event-stream"); err != nil || n != size {
		t.Errorf("a stream (its events bounded by the SDK): %d bytes, %v; want all %d", n, err, size)
	}
}
