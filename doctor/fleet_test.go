package doctor

import (
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
		name  string
		fc    *config.Fleet
		learn bool
		want  []string
	}{
		{"joined", &config.Fleet{URL: srv.URL(), Name: "doc"}, false, []string{"ok fleet joined " + srv.URL() + "; stream doc_invalidations holds 0 announcements"}},
		{"learning", &config.Fleet{URL: srv.URL(), Name: "doc"}, true, []string{
			"ok fleet joined " + srv.URL(),
			"ok fleet trace stream doc_traces holds 0 lines (0 bytes; bounds 268435456 bytes, 24h0m0s)",
			"ok fleet pool store doc_pool holds 0 bytes (bound 135266304 bytes): no pool shared yet",
			"ok fleet mining lease doc_lease expires 2m0s after its holder's last renewal: no replica mines now",
		}},
		{"lease held", &config.Fleet{URL: srv.URL(), Name: "held", LeaseTTL: 5 * time.Second}, true, []string{
			"ok fleet mining lease held_lease expires 5s after its holder's last renewal: held by miner-1",
		}},
		{"learning refused", &config.Fleet{URL: small.URL(), Name: "small"}, true, []string{
			"ok fleet joined " + small.URL(),
			"FAIL fleet learning: fleet: creating stream small_traces",
		}},
		{"unreachable", &config.Fleet{URL: "nats://" + down}, false, []string{"FAIL fleet fleet: connecting to nats://" + down}},
		{"embedded", &config.Fleet{Embedded: &config.FleetEmbedded{Listen: "127.0.0.1:0", Dir: t.TempDir()}}, false, []string{"ok fleet embedded server's store"}},
		{"embedded learning", &config.Fleet{Embedded: &config.FleetEmbedded{Listen: "127.0.0.1:0", Dir: t.TempDir()}}, true, []string{
			fmt.Sprintf("ok fleet embedded server's max_store (%d bytes) holds the fleet's learning (%d bytes)", fleet.DefaultMaxStore, fleet.StoreBytes(nil)),
		}},
		{"embedded store too small", &config.Fleet{Embedded: &config.FleetEmbedded{Listen: "127.0.0.1:0", Dir: t.TempDir(), MaxStore: 256 << 20}}, true, []string{
			"ok fleet embedded server's store",
			"FAIL fleet embedded server's max_store (268435456 bytes) cannot hold the fleet's learning",
		}},
		{"embedded busy", &config.Fleet{Embedded: &config.FleetEmbedded{Listen: ln.Addr().String(), Dir: t.TempDir()}}, false, []string{"FAIL fleet embedded server cannot listen on " + ln.Addr().String()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			checkFleet(t.Context(), tc.fc, tc.learn, 5*time.Second, func(s Severity, subject, format string, args ...any) {
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
}
