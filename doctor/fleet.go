package doctor

import (
	"context"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/ahead-dev/ahead/config"
	"github.com/ahead-dev/ahead/fleet"
)

// checkFleet joins the fleet of fc as a replica would (creating its stream
// if need be) and reports the stream, or, for an embedded server, checks
// that its address is free and its store directory usable.
func checkFleet(ctx context.Context, fc *config.Fleet, timeout time.Duration, add func(Severity, string, string, ...any)) {
	if e := fc.Embedded; e != nil {
		ln, err := net.Listen("tcp", e.Listen)
		if err != nil {
			add(Fail, "fleet", "embedded server cannot listen on %s: %v", e.Listen, err)
		} else {
			ln.Close()
			add(OK, "fleet", "embedded server can listen on %s (other replicas join nats://%s)", e.Listen, e.Listen)
		}
		if err := os.MkdirAll(e.Dir, 0o700); err != nil {
			add(Fail, "fleet", "embedded server's store: %v", err)
		} else if f, err := os.CreateTemp(e.Dir, ".doctor-*"); err != nil {
			add(Fail, "fleet", "embedded server's store %s is not writable: %v", e.Dir, err)
		} else {
			f.Close()
			os.Remove(f.Name())
			add(OK, "fleet", "embedded server's store %s is writable", e.Dir)
		}
		return
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	f, err := fleet.Join(ctx, &fleet.Options{URL: fc.URL, Name: fc.Name, MaxBytes: fc.MaxBytes, MaxAge: fc.MaxAge,
		Replica: "doctor", MustConnect: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		add(Fail, "fleet", "%v", err)
		return
	}
	defer f.Close()
	st, err := f.Stream(ctx)
	if err != nil {
		add(Fail, "fleet", "%v", err)
		return
	}
	add(OK, "fleet", "joined %s; stream %s holds %d announcements (%d bytes; bounds %d bytes, %s)",
		f.URL(), st.Name, st.Msgs, st.Bytes, st.MaxBytes, st.MaxAge)
}
