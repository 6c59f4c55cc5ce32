package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ahead-dev/ahead/httpapi"
)

var fleetServing = regexp.MustCompile(`msg="fleet serving" fleet=\S+ url=(nats://[0-9.:]+)`)

// TestServeFleet runs two `ahead serve` on loopback as one fleet: the first
// runs the NATS server (fleet: {embedded: ...}), the second joins it with
// --fleet. A write through either is announced and applied by the other,
// and /v1/stats says so.
func TestServeFleet(t *testing.T) {
	tools := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		fmt.Fprint(w, "ok")
	}))
	t.Cleanup(tools.Close)
	dir := t.TempDir()
	cfg := func(fleet string) string {
		path := filepath.Join(dir, fmt.Sprintf("ahead%d.yaml", len(fleet)))
		body := fmt.Sprintf(`listen: 127.0.0.1:0
backends:
  store:
    http: {url: "%s/tools/{tool}"}
speculation_policy:
  tools:
    get: {allow: true, reads: key}
    put: {writes: key}
%s`, tools.URL, fleet)
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	a := startAheadServe(t, "--config", cfg("fleet: {embedded: {listen: '127.0.0.1:0', dir: nats}, name: e2e}\n"))
	m := fleetServing.FindStringSubmatch(a.logText())
	if m == nil {
		t.Fatalf("no start-up line names the fleet served:\n%s", a.logText())
	}
	b := startAheadServe(t, "--config", cfg("fleet: {url: 'nats://127.0.0.1:1', name: e2e}\n"), "--fleet", m[1])
	if !strings.Contains(b.logText(), `msg="fleet joined" fleet=e2e url=`+m[1]) {
		t.Errorf("b's start-up does not say which fleet it joined:\n%s", b.logText())
	}
	stats := func(s *served) *httpapi.FleetStats {
		var st httpapi.Stats
		if err := json.Unmarshal([]byte(getText(t, s.url+"/v1/stats")), &st); err != nil {
			t.Fatal(err)
		}
		if st.Fleet == nil {
			t.Fatal("/v1/stats has no fleet")
		}
		return st.Fleet
	}
	waitFor(t, "both replicas caught up", func() bool { return stats(a).Connected && stats(b).Connected })
	for i, s := range []*served{a, b, a} {
		if got := call(t, s.url, "s", `{"tool":"put","args":{"key":"k"}}`); got.Code != 200 {
			t.Fatalf("put %d: %+v", i, got)
		}
	}
	// Each write is announced twice (before it is forwarded, once it
	// completed), and applied by the other replica only.
	waitFor(t, "the writes applied", func() bool { return stats(a).Applied == 2 && stats(b).Applied == 4 })
	if sa, sb := stats(a), stats(b); sa.Announced != 4 || sb.Announced != 2 || sa.Late+sb.Late != 0 {
		t.Errorf("announced %d and %d (late %d, %d), want 4 and 2", sa.Announced, sb.Announced, sa.Late, sb.Late)
	}
	if metrics := getText(t, a.url+"/metrics"); !strings.Contains(metrics, "ahead_fleet_connected 1") {
		t.Errorf("/metrics has no ahead_fleet_connected 1")
	}
}
