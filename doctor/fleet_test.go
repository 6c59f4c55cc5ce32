package doctor

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ahead-dev/ahead/config"
	"github.com/ahead-dev/ahead/fleet"
)

func TestCheckFleet(t *testing.T) {
	srv, err := fleet.Join(t.Context(), &fleet.Options{Name: "doc", Logger: slog.New(slog.DiscardHandler),
		Embedded: &fleet.Embedded{Listen: "127.0.0.1:0", Dir: t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close() // busy
	ln2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := ln2.Addr().String()
	ln2.Close() // nothing listens there now
	// A server whose store cannot hold the trace stream (256 MiB).
	small, err := fleet.Join(t.Context(), &fleet.Options{Name: "small", Logger: slog.New(slog.DiscardHandler),
		Embedded: &fleet.Embedded{Listen: "127.0.0.1:0", Dir: t.TempDir(), MaxStore: 128 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	defer small.Close()
	// A replica of fleet "held" mines.
	miner, err := fleet.Join(t.Context(), &fleet.Options{URL: srv.URL(), Name: "held", Replica: "miner-1", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer miner.Close()
	lrn, err := miner.Learning(t.Context(), &fleet.LearningOptions{LeaseTTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer lrn.Close()
	if !lrn.Lease(t.Context()) {
		t.Fatal("the only replica did not get the lease")
	}
	for _, tc := range []struct {
		name          string
		fc            *config.Fleet
		learn, create bool
		want          []string
	}{
		{"joined", &config.Fleet{URL: srv.URL(), Name: "doc"}, false, false, []string{"ok fleet joined " + srv.URL() + "; stream doc_invalidations holds 0 announcements"}},
		{"not created", &config.Fleet{URL: srv.URL(), Name: "fresh"}, true, false, []string{
			"warn fleet joined " + srv.URL() + "; fleet: stream fresh_invalidations: not created yet (the first replica creates it",
			"warn fleet learning: fleet: stream fresh_traces: not created yet (the first replica whose pool learns creates it",
		}},
		{"learning created", &config.Fleet{URL: srv.URL(), Name: "doc"}, true, true, []string{
			"ok fleet joined " + srv.URL(),
			"ok fleet trace stream doc_traces holds 0 lines (0 bytes; bounds 268435456 bytes, 24h0m0s)",
			"ok fleet pool store doc_pool holds 0 bytes (bound 135266304 bytes): no pool shared yet",
			"ok fleet mining lease doc_lease expires 2m0s after its holder's last renewal: no replica mines now",
		}},
		{"lease held", &config.Fleet{URL: srv.URL(), Name: "held", LeaseTTL: 5 * time.Second}, true, false, []string{
			"ok fleet mining lease held_lease expires 5s after its holder's last renewal: held by miner-1",
		}},
		{"other stream bounds", &config.Fleet{URL: srv.URL(), Name: "held", MaxBytes: 1 << 20, LeaseTTL: 5 * time.Second}, true, false, []string{
			"FAIL fleet fleet: stream held_invalidations is bounded by 67108864 bytes and 10m0s on the server, want 1048576 bytes and 10m0s",
		}},
		{"other lease TTL", &config.Fleet{URL: srv.URL(), Name: "held", LeaseTTL: time.Minute}, true, false, []string{
			"FAIL fleet learning: fleet: lease bucket held_lease expires a lease after 5s on the server, want 1m0s",
		}},
		{"learning refused", &config.Fleet{URL: small.URL(), Name: "small"}, true, true, []string{
			"ok fleet joined " + small.URL(),
			"FAIL fleet learning: fleet: creating stream small_traces",
		}},
		{"unreachable", &config.Fleet{URL: "nats://" + down}, false, false, []string{"FAIL fleet fleet: connecting to nats://" + down}},
		{"embedded", &config.Fleet{Embedded: &config.FleetEmbedded{Listen: "127.0.0.1:0", Dir: t.TempDir()}}, false, false, []string{"ok fleet embedded server's store"}},
		{"embedded learning", &config.Fleet{Embedded: &config.FleetEmbedded{Listen: "127.0.0.1:0", Dir: t.TempDir()}}, true, false, []string{
			fmt.Sprintf("ok fleet embedded server's max_store (%d bytes) holds the fleet's learning (%d bytes)", fleet.DefaultMaxStore, fleet.StoreBytes(nil)),
		}},
		{"embedded store too small", &config.Fleet{Embedded: &config.FleetEmbedded{Listen: "127.0.0.1:0", Dir: t.TempDir(), MaxStore: 256 << 20}}, true, false, []string{
			"ok fleet embedded server's store",
			"FAIL fleet embedded server's max_store (268435456 bytes) cannot hold the fleet's learning",
		}},
		{"embedded busy", &config.Fleet{Embedded: &config.FleetEmbedded{Listen: ln.Addr().String(), Dir: t.TempDir()}}, false, false, []string{"FAIL fleet embedded server cannot listen on " + ln.Addr().String()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			checkFleet(t.Context(), tc.fc, tc.learn, false, tc.create, 5*time.Second, func(s Severity, subject, format string, args ...any) {
				got = append(got, s.String()+" "+subject+" "+fmt.Sprintf(format, args...))
			})
			t.Logf("%q", got)
			for _, want := range tc.want {
				if !slices.ContainsFunc(got, func(g string) bool { return strings.HasPrefix(g, want) }) {
					t.Errorf("findings %q, want one starting %q", got, want)
				}
			}
			if !tc.learn && slices.ContainsFunc(got, func(g string) bool { return strings.Contains(g, "trace stream") }) {
				t.Errorf("findings %q: the trace stream checked for a pool that does not learn", got)
			}
		})
	}

	// Checking wrote nothing: the fleet never created is still not, and
	// the bounds of the one whose replica set others are still that
	// replica's (a check with other bounds used to set its own).
	look, err := fleet.Join(t.Context(), &fleet.Options{URL: srv.URL(), Name: "fresh", ReadOnly: true, MustConnect: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer look.Close()
	if _, err := look.Stream(t.Context()); !errors.Is(err, fleet.ErrNotCreated) {
		t.Errorf("fleet fresh's stream after the checks: %v, want %v", err, fleet.ErrNotCreated)
	}
	if _, err := look.LearningState(t.Context(), nil); !errors.Is(err, fleet.ErrNotCreated) {
		t.Errorf("fleet fresh's learning after the checks: %v, want %v", err, fleet.ErrNotCreated)
	}
	held, err := fleet.Join(t.Context(), &fleet.Options{URL: srv.URL(), Name: "held", ReadOnly: true, MustConnect: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if _, err := held.Stream(t.Context()); err != nil {
		t.Errorf("fleet held's stream after the checks: %v", err)
	}
	if _, err := held.LearningState(t.Context(), &fleet.LearningOptions{LeaseTTL: 5 * time.Second}); err != nil {
		t.Errorf("fleet held's learning after the checks: %v", err)
	}
}

// TestCheckFleetResults: the shared results' bucket is checked when the
// policy marks a tool shared, created only when asked, and a bucket with
// other bounds fails.
func TestCheckFleetResults(t *testing.T) {
	srv, err := fleet.Join(t.Context(), &fleet.Options{Name: "srv", Logger: slog.New(slog.DiscardHandler),
		Embedded: &fleet.Embedded{Listen: "127.0.0.1:0", Dir: t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	// A replica of fleet "other" made its bucket with other bounds.
	other, err := fleet.Join(t.Context(), &fleet.Options{URL: srv.URL(), Name: "other", MaxResultBytes: 1 << 20, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := other.CreateResults(t.Context()); err != nil {
		t.Fatal(err)
	}
	check := func(name string, shares, create bool) []string {
		var got []string
		checkFleet(t.Context(), &config.Fleet{URL: srv.URL(), Name: name}, false, shares, create, 5*time.Second, func(s Severity, subject, format string, args ...any) {
			got = append(got, s.String()+" "+subject+" "+fmt.Sprintf(format, args...))
		})
		t.Logf("%s shares=%v create=%v: %q", name, shares, create, got)
		return got
	}
	has := func(got []string, want string) bool {
		return slices.ContainsFunc(got, func(g string) bool { return strings.HasPrefix(g, want) })
	}
	if got := check("fresh", false, false); slices.ContainsFunc(got, func(g string) bool { return strings.Contains(g, "results bucket") }) {
		t.Errorf("findings %q: the results bucket checked for a policy that shares nothing", got)
	}
	if got, want := check("fresh", true, false), "warn fleet fleet: stream KV_fresh_results: not created yet (the first replica whose policy marks a tool shared creates it"; !has(got, want) {
		t.Errorf("findings %q, want one starting %q", got, want)
	}
	// The check before created nothing.
	if got, want := check("fresh", true, false), "warn fleet fleet: stream KV_fresh_results: not created yet"; !has(got, want) {
		t.Errorf("findings %q after a check, want one starting %q: the check created the bucket", got, want)
	}
	if got, want := check("fresh", true, true), "ok fleet results bucket holds 0 shared results (0 bytes; bounds 33554432 bytes, 10m0s)"; !has(got, want) {
		t.Errorf("findings %q with --create-fleet, want one starting %q", got, want)
	}
	if got, want := check("other", true, false), "FAIL fleet fleet: results bucket other_results is bounded by 1048576 bytes and 10m0s on the server, want 33554432 bytes and 10m0s"; !has(got, want) {
		t.Errorf("findings %q, want one starting %q", got, want)
	}
}
