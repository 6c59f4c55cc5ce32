package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ahead-dev/ahead/httpapi"
)

// TestStats: ahead stats reads recorded traces (a directory) and a
// running server's /v1/stats, as a table or JSON.
func TestStats(t *testing.T) {
	dir := t.TempDir()
	lines := `{"session":"a","seq":0,"tool":"read","args":{},"status":"ok","output":"x","source":"executed","duration_ms":100}
{"kind":"speculative","session":"a","seq":1,"tool":"read","args":{"p":1},"status":"ok","output":"y","speculative":true,"outcome":"reused","duration_ms":90}
{"session":"a","seq":1,"tool":"read","args":{"p":1},"status":"ok","output":"y","source":"reused","duration_ms":0}
`
	if err := os.WriteFile(filepath.Join(dir, "ahead-1.jsonl"), []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, "stats", dir)
	if code != 0 || !strings.Contains(out, "   read      2         1       1") || !strings.Contains(out, "speculative outcomes: reused 1") {
		t.Errorf("ahead stats DIR: exit %d\n%s%s", code, out, errOut)
	}

	code, out, errOut = runCLI(t, "stats", "--json", dir)
	var st httpapi.Stats
	if err := json.Unmarshal([]byte(out), &st); code != 0 || err != nil || st.Tools["read"].SavedMS != 90 {
		t.Errorf("ahead stats --json: exit %d, %v\n%s%s", code, err, out, errOut)
	}

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/stats" {
			http.NotFound(w, r)
			return
		}
		json.NewEncoder(w).Encode(httpapi.Stats{Calls: 4, Executed: 4, Tools: map[string]httpapi.ToolStats{"search": {Calls: 4, Executed: 4}}})
	}))
	defer srv.Close()
	code, out, errOut = runCLI(t, "stats", srv.URL)
	if code != 0 || !strings.Contains(out, "search      4         4") {
		t.Errorf("ahead stats URL: exit %d\n%s%s", code, out, errOut)
	}
	if code, _, _ := runCLI(t, "stats"); code != 2 {
		t.Errorf("ahead stats without arguments: exit %d, want 2", code)
	}
}
