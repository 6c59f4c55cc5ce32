package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ahead-dev/ahead/config"
)

// TestLearnerWithinMaxBytes checks issue 23's first memory bound: one
// session of 100 calls with 128 KiB outputs, learning on, under max_bytes
// 8MiB.
// The calls the Learner keeps for mining are bounded (a quarter of
// max_bytes, the session's share of that), and /v1/stats's bytes counts
// them, within max_bytes; the old Learner kept every call of the only
// session in progress while the stats showed 0 bytes.
func TestLearnerWithinMaxBytes(t *testing.T) {
	const maxBytes = 8 << 20
	big := strings.Repeat("x", 128<<10)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, big)
	}))
	defer backend.Close()
	dir := t.TempDir()
	cfg, err := (&config.Loader{Dir: dir}).Parse("a.yaml", []byte(`
patterns: ./pool.json
engine: {max_bytes: 8MiB}
backends: {files: {http: {url: "`+backend.URL+`/tools/{tool}"}}}
speculation_policy: {tools: {read: {allow: true}}}
`))
	if err != nil {
		t.Fatal(err)
	}
	st, err := Open(t.Context(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	stats := st.statsEngine()
	var peak int64
	for i := range 100 {
		if _, err := st.Engine().Call(t.Context(), "s", "read", json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))); err != nil {
			t.Fatal(err)
		}
		if err := st.Engine().Predicted(t.Context()); err != nil {
			t.Fatal(err)
		}
		es := stats.Stats()
		peak = max(peak, es.Bytes+es.SessionBytes)
	}
	if peak < 128<<10 {
		t.Errorf("the stats counted at most %d bytes, want the calls kept for learning counted", peak)
	}
	if peak > maxBytes {
		t.Errorf("the stats counted up to %d bytes, want at most max_bytes %d", peak, maxBytes)
	}
	if kept := st.predictor.EndedBytes(); kept != 0 {
		t.Errorf("EndedBytes = %d with the only session live, want 0", kept)
	}
	st.Engine().EndSession("s")
	if err := st.Engine().Predicted(t.Context()); err != nil {
		t.Fatal(err)
	}
	es := stats.Stats()
	if n := es.Bytes + es.SessionBytes; n < 128<<10 || n > maxBytes/4 {
		t.Errorf("after the session ended the stats count %d bytes, want its kept calls, within a quarter of max_bytes (%d)", n, maxBytes/4)
	}
}
