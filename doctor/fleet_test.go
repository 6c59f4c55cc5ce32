package doctor

import (
	"fmt"
	"log/slog"
	"net"
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
	for _, tc := range []struct {
		name string
		fc   *config.Fleet
		want string
	}{
		{"joined", &config.Fleet{URL: srv.URL(), Name: "doc"}, "ok fleet joined " + srv.URL() + "; stream doc_invalidations holds 0 announcements"},
		{"unreachable", &config.Fleet{URL: "nats://" + down}, "FAIL fleet fleet: connecting to nats://" + down},
		{"embedded", &config.Fleet{Embedded: &config.FleetEmbedded{Listen: "127.0.0.1:0", Dir: t.TempDir()}}, "ok fleet embedded server's store"},
		{"embedded busy", &config.Fleet{Embedded: &config.FleetEmbedded{Listen: ln.Addr().String(), Dir: t.TempDir()}}, "FAIL fleet embedded server cannot listen on " + ln.Addr().String()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			checkFleet(t.Context(), tc.fc, 5*time.Second, func(s Severity, subject, format string, args ...any) {
				got = append(got, s.String()+" "+subject+" "+fmt.Sprintf(format, args...))
			})
			found := false
			for _, g := range got {
				found = found || strings.HasPrefix(g, tc.want)
			}
			if !found {
				t.Errorf("findings %q, want one starting %q", got, tc.want)
			}
		})
	}
}
