// Package fleet joins ahead replicas through a NATS JetStream server or
// cluster, so that a write made through any replica is seen by all of them
// before anyone reuses a result it may have changed.
//
// A replica announces every write on a backend whose state is shared before
// it forwards the write (and again when the write completes, as the engine
// invalidates twice for its own sessions), on that backend's subject of the
// fleet's invalidation stream. Every replica consumes the subjects of its
// own backends, in stream order, and applies each announcement to its engine
// (Applier). Before an engine hands over a speculative result of a backend
// whose state is shared, it fences: the replica reads the stream's last
// sequence for its backends' subjects from the stream's leader and waits
// until it has applied every announcement up to it. The invariant is:
//
//	a result handed over was not started before a write that was announced
//	before the agent's call arrived, unless that write's announcement (and,
//	for a write that completed before the call, its completion's) has been
//	applied, which discards the result.
//
// Fences are shared: one is in flight per replica at a time, and every call
// that arrives while it runs joins the next one (whose sequence is read after
// the call arrived). A fence that cannot complete within FenceTimeout, or
// any fence while the replica is disconnected or has not caught up since it
// reconnected, fails: the engine then serves the call as a miss (it
// executes), never as an error. After any reconnection the replica drops all
// of its shared-state speculation and restarts its consumer at the stream's
// current end, so a server that restarted with or without its store is safe.
//
// A write that could not be announced within AnnounceTimeout is forwarded
// anyway, counted, and announced as soon as the fleet is back: between the
// two, other replicas may hand over results that write made stale, bounded
// by the results' lifetimes (the same bound as writes ahead does not see).
//
// Every NATS resource is created with explicit limits (stream bytes, age and
// message size; an embedded server's store and memory), never the server's
// host-sized defaults, and every request carries a deadline.
package fleet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ahead-dev/ahead/policy"
)

// Errors returned by Fence (wrapped, test with errors.Is).
var (
	// ErrDown: the replica is not connected to the fleet, or has not caught
	// up with the stream since it (re)connected. Shared-state results are
	// not reused (fail closed).
	ErrDown = errors.New("fleet: not connected")
	// ErrAbsent: another replica has gone quiet and may have made writes
	// it could not announce (presence.go).
	ErrAbsent = errors.New("fleet: a replica is missing")
	// ErrFenceTimeout: the fence did not complete within FenceTimeout.
	ErrFenceTimeout = errors.New("fleet: fence timed out")
	// ErrClosed: the fleet connection is closed.
	ErrClosed = errors.New("fleet: closed")
)

// Applier applies writes announced by other replicas. engine.Engine is one.
// Invalidate must not block for long: it runs on the consumer's path, and
// fences wait for it.
type Applier interface {
	Invalidate(backend string, ef policy.Effect)
}

// Embedded runs a NATS server with JetStream inside this process.
type Embedded struct {
	// Listen is the HOST:PORT other replicas join; port 0 picks a free
	// one. Empty means 127.0.0.1:4222.
	Listen string
	// Dir holds JetStream's store (it survives restarts). Required.
	Dir string
	// MaxStore bounds JetStream's file store; 0 means DefaultMaxStore
	// (1 GiB).
	MaxStore int64
	// MaxMemory bounds JetStream's memory store (the invalidation
	// stream, the results bucket); 0 means 256 MiB.
	MaxMemory int64
}

// Options configure a Fleet. The zero value of each field other than URL
// and Embedded is valid and documented.
type Options struct {
	// URL is the NATS server or cluster to join (nats:// or tls://,
	// several separated by commas). Credentials come from the URL
	// (user:pass@, token@) or the environment: NATS_CREDS names a creds
	// file, NATS_TOKEN holds a token. Ignored when Embedded is set.
	URL string
	// MustConnect makes Join fail when the server cannot be reached (a
	// check: ahead doctor). False means a replica that cannot reach it yet
	// serves without it (fail closed) and joins when it comes up.
	MustConnect bool
	// ReadOnly joins only to read (a check: ahead doctor): Join creates
	// and updates nothing on the server, and Start does nothing.
	ReadOnly bool
	// Embedded, if set, runs the server in this process (and joins it).
	Embedded *Embedded
	// Name prefixes the fleet's stream and subjects; it must match
	// [A-Za-z0-9_-]+. Empty means "ahead".
	Name string
	// Replica names this replica in announcements (its own are not applied
	// again); empty means a random id.
	Replica string
	// Backends lists this replica's backends whose state is shared: the
	// announcements it applies and fences on. Backends match across
	// replicas by name.
	Backends []string
	// FenceTimeout bounds a fence; 0 means 5 ms.
	FenceTimeout time.Duration
	// AnnounceTimeout bounds an announcement before the write is forwarded
	// anyway (and announced late); 0 means 50 ms.
	AnnounceTimeout time.Duration
	// MaxBytes bounds the invalidation stream; 0 means 64 MiB.
	MaxBytes int64
	// MaxAge bounds how long an announcement is kept; 0 means 10 min
	// (a replica only ever needs those after its last fence).
	MaxAge time.Duration
	// MaxLate bounds the writes waiting to be announced late; beyond it a
	// backend's late writes collapse into one "anything may have changed"
	// announcement. 0 means 1024.
	MaxLate int
	// HeartbeatInterval is how often the replica says it is up; a replica
	// unheard for three intervals makes the others fail closed until it is
	// heard again or PresenceTTL has passed (presence.go). 0 means 200 ms.
	HeartbeatInterval time.Duration
	// PresenceTTL is how long a replica unheard is waited for before it is
	// taken for gone; 0 means 5 s.
	PresenceTTL time.Duration
	// PingInterval is how often the connection is checked; two missed
	// pings mark it down. 0 means 500 ms (nats.go's default of 2 min
	// would leave a frozen server unnoticed for minutes).
	PingInterval time.Duration
	// ShareResults shares the results of tools marked shared (results.go):
	// false means no results bucket, no lookups and no purges (a policy
	// with no shared tool needs none).
	ShareResults bool
	// MaxResultBytes bounds the bucket of shared results (results.go),
	// held in the server's memory; 0 means 32 MiB.
	MaxResultBytes int64
	// MaxResultSize bounds one shared result (larger ones are not
	// shared); 0 means 256 KiB.
	MaxResultSize int
	// MaxResultAge bounds how long a shared result is kept, whatever its
	// TTL; 0 means 10 min.
	MaxResultAge time.Duration
	// Logger logs connection changes; nil means slog.Default().
	Logger *slog.Logger
	// Registerer receives the fleet's metrics (ahead_fleet_*); nil means
	// none.
	Registerer prometheus.Registerer
}

// maxMsgSize bounds one announcement; a write naming more resources than
// fit is announced as a write of anything.
const maxMsgSize = 64 << 10

var validName = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

func (o Options) withDefaults() Options {
	if o.Name == "" {
		o.Name = "ahead"
	}
	if o.Replica == "" {
		var b [6]byte
		_, _ = rand.Read(b[:])
		o.Replica = hex.EncodeToString(b[:])
	}
	if o.FenceTimeout <= 0 {
		o.FenceTimeout = 5 * time.Millisecond
	}
	if o.AnnounceTimeout <= 0 {
		o.AnnounceTimeout = 50 * time.Millisecond
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = 64 << 20
	}
	if o.MaxAge <= 0 {
		o.MaxAge = 10 * time.Minute
	}
	if o.MaxLate <= 0 {
		o.MaxLate = 1024
	}
	if o.HeartbeatInterval <= 0 {
		o.HeartbeatInterval = 200 * time.Millisecond
	}
	if o.PresenceTTL <= 0 {
		o.PresenceTTL = 5 * time.Second
	}
	if o.PingInterval <= 0 {
		o.PingInterval = 500 * time.Millisecond
	}
	if o.MaxResultBytes <= 0 {
		o.MaxResultBytes = 32 << 20
	}
	if o.MaxResultSize <= 0 {
		o.MaxResultSize = 256 << 10
	}
	if o.MaxResultAge <= 0 {
		o.MaxResultAge = 10 * time.Minute
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// Stats counts what the fleet did. All fields only grow.
type Stats struct {
	Announced   int64 // announcements acknowledged in time
	Late        int64 // writes forwarded before they could be announced
	LateSent    int64 // of those, announced since
	Applied     int64 // announcements of other replicas applied
	Fences      int64 // fences that completed
	FenceDown   int64 // fences refused: not connected or not caught up
	FenceMissed int64 // fences that did not complete within FenceTimeout
	FenceAbsent int64 // fences refused while another replica was missing
	Resyncs     int64 // times the consumer was (re)started at the stream's end

	// Shared results (results.go).
	SharedHits    int64 // results of other replicas (or this one's) reused from the bucket
	SharedRefused int64 // found in the bucket but refused, for any of the reasons below
	// SharedRefusedBy splits SharedRefused by reason: "write" (a write
	// applied since the result's mark may change it), "resync" (valid
	// only before this replica's last resync), "epoch" (of another
	// stream: the server lost its store), "expired", "down" (this replica
	// not caught up).
	SharedRefusedBy map[string]int64
	SharedPuts      int64 // results put in the bucket
	SharedPurges    int64 // writes whose results were purged from the bucket
	ShareDropped    int64 // puts and purges dropped: queue full, fleet down, bucket full
	// ShareSuperseded counts puts not sent: a later put of the same
	// result, or a write since its mark (which every reader would refuse
	// it for), came before they could be.
	ShareSuperseded int64
	ShareTooBig     int64 // results larger than MaxResultSize, kept local
	SharedErrors    int64 // lookups that failed (other than not found)
}

// Fleet is this replica's membership of a fleet. Create it with Join, give
// it its engine with Start, stop it with Close.
type Fleet struct {
	opts Options
	srv  *server.Server // embedded server, or nil
	nc   *nats.Conn
	js   jetstream.JetStream
	// sharejs publishes shared results, pipelined (results.go): its
	// futures end after AnnounceTimeout, at most shareQueue at once.
	sharejs  jetstream.JetStream
	stream   string
	subjects []string          // of this replica's backends, sorted
	backend  map[string]string // subject → backend

	fenceTime prometheus.Histogram // nil without a Registerer

	stats struct {
		announced, late, lateSent, applied, fences, fenceDown, fenceMissed, fenceAbsent, resyncs atomic.Int64

		sharedRefused [refusedReasons]atomic.Int64

		sharedHits, sharedPuts, sharedPurges, shareDropped, shareSuperseded, shareTooBig, sharedErrors atomic.Int64
	}
	res results // shared results (results.go)

	// Mutations for tests (export_test.go): each removes one rule.
	noPurge, noResultCheck, noPresence bool

	mu      sync.Mutex // protects everything below
	app     Applier
	applied uint64        // last stream sequence applied (valid while synced)
	synced  bool          // consumer running from a known point
	changed chan struct{} // closed and replaced when applied or synced change
	gen     int           // consumer generation
	cc      jetstream.ConsumeContext
	str     jetstream.Stream // the stream, as of the last restart
	next    *flight          // the fence callers wait for
	late    []lateWrite
	lateAll map[string]bool      // backends whose late writes collapsed
	heard   map[string]time.Time // other replicas → when last heard (presence.go)
	closed  bool

	wakeFence chan struct{} // a fence is wanted
	wakeKeep  chan struct{} // resync or late announcements are wanted
	resync    atomic.Bool
	// up follows the connection (its handlers): nc.IsConnected and every
	// other call of the connection wait while nats.go holds its lock to
	// dial a server, up to the connect timeout (2 s), so calls that bound
	// their wait ask up instead, and publish (wait.go).
	up atomic.Bool
	// unreached: Join could not reach the server (it joins when it can).
	unreached atomic.Bool
	stop      chan struct{}
	wg        sync.WaitGroup
}

type flight struct {
	done chan struct{}
	err  error
}

type lateWrite struct {
	backend string
	ef      policy.Effect
}

// announcement is what travels on the stream: the writing replica and what
// its write may change (not the write's arguments).
type announcement struct {
	Replica   string   `json:"r"`
	Backend   string   `json:"b"`
	All       bool     `json:"all,omitempty"`
	Resources []string `json:"res,omitempty"`
	// Paths are the resources declared as paths, by name: applied as
	// paths not resolved on the receiving machine (which conflict more
	// widely, by their last element; policy.Path).
	Paths []string `json:"paths,omitempty"`
}

func newAnnouncement(replica, backend string, ef policy.Effect) announcement {
	a := announcement{Replica: replica, Backend: backend, All: ef.All, Resources: ef.Resources}
	for _, p := range ef.Paths {
		a.Paths = append(a.Paths, p.Name)
	}
	return a
}

func (a announcement) effect() policy.Effect {
	ef := policy.Effect{All: a.All, Resources: a.Resources}
	for _, p := range a.Paths {
		ef.Paths = append(ef.Paths, policy.Path{Name: p})
	}
	return ef
}

// Join connects to the fleet (or starts the embedded server and joins it)
// and makes sure its stream exists with this replica's limits. It fails on
// bad options and when the server answers but refuses the stream; a server
// that cannot be reached is joined in the background, when it comes up
// (until then the replica fails closed: Connected is false).
func Join(ctx context.Context, opts *Options) (*Fleet, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	o = o.withDefaults()
	o.Backends = slices.Clone(o.Backends)
	if !validName.MatchString(o.Replica) {
		o.Replica = "x" + hex.EncodeToString([]byte(o.Replica))
	}
	if !validName.MatchString(o.Name) {
		return nil, fmt.Errorf("fleet: name %q: want letters, digits, _ or -", o.Name)
	}
	if o.URL == "" && o.Embedded == nil {
		return nil, errors.New("fleet: no url and no embedded server")
	}
	f := &Fleet{
		opts:      o,
		stream:    o.Name + "_invalidations",
		backend:   make(map[string]string),
		changed:   make(chan struct{}),
		lateAll:   make(map[string]bool),
		heard:     make(map[string]time.Time),
		wakeFence: make(chan struct{}, 1),
		wakeKeep:  make(chan struct{}, 1),
		stop:      make(chan struct{}),
		res:       results{clocks: make(map[string]*clock), queue: make(chan shareJob, shareQueue)},
	}
	for _, b := range o.Backends {
		s := f.subject(b)
		if _, dup := f.backend[s]; !dup {
			f.backend[s] = b
			f.subjects = append(f.subjects, s)
		}
	}
	slices.Sort(f.subjects)
	url := o.URL
	if o.Embedded != nil {
		srv, err := startEmbedded(o.Embedded, o.Name)
		if err != nil {
			return nil, err
		}
		f.srv = srv
		url = srv.ClientURL()
	}
	if err := f.connect(url); err != nil {
		f.shutdownServer()
		return nil, err
	}
	if !f.up.Load() && f.srv == nil {
		f.unreached.Store(true)
		// Not reachable yet (nats.Connect tried once): the keeper makes
		// the stream once it is.
		o.Logger.Warn("fleet unreachable: serving without it (shared-state results are not reused) until it is up", "fleet", o.Name, "url", url)
	} else if err := f.ensureStreamUnless(ctx, o.ReadOnly); err != nil {
		f.nc.Close()
		f.shutdownServer()
		return nil, err
	}
	if err := f.listen(); err != nil {
		f.nc.Close()
		f.shutdownServer()
		return nil, fmt.Errorf("fleet: listening for replicas: %w", err)
	}
	f.fenceTime = f.register(o.Registerer)
	return f, nil
}

// URL returns the URL other replicas join: the embedded server's, or the
// one this replica joined.
func (f *Fleet) URL() string {
	if f.srv != nil {
		return f.srv.ClientURL()
	}
	return f.opts.URL
}

// Name returns the fleet's name (the prefix of its stream and subjects).
func (f *Fleet) Name() string { return f.opts.Name }

// Replica returns this replica's id.
func (f *Fleet) Replica() string { return f.opts.Replica }

func (f *Fleet) connect(url string) error {
	o := f.opts
	nopts := []nats.Option{
		nats.Name("ahead " + o.Replica),
		nats.Timeout(2 * time.Second),
		nats.PingInterval(o.PingInterval),
		nats.MaxPingsOutstanding(2),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.ReconnectJitter(50*time.Millisecond, 250*time.Millisecond),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			f.up.Store(false)
			if f.down() {
				return // closing
			}
			o.Logger.Warn("fleet disconnected: shared-state results are not reused until it is back", "fleet", o.Name, "err", err)
		}),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			// Not nats.go's default, which writes to stderr.
			o.Logger.Debug("fleet: connection", "fleet", o.Name, "err", err)
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			o.Logger.Info("fleet reconnected", "fleet", o.Name, "url", nc.ConnectedUrlRedacted())
			f.up.Store(true)
			f.resync.Store(true)
			f.wake(f.wakeKeep)
		}),
		// A replica started while the fleet is unreachable serves (fail
		// closed: no fence succeeds, writes wait to be announced) and
		// joins when it comes up.
		nats.RetryOnFailedConnect(!o.MustConnect),
		nats.ConnectHandler(func(nc *nats.Conn) {
			if f.unreached.Load() {
				o.Logger.Info("fleet reached: joining", "fleet", o.Name, "url", nc.ConnectedUrlRedacted())
			}
			f.up.Store(true)
			f.resync.Store(true)
			f.wake(f.wakeKeep)
		}),
	}
	if c := os.Getenv("NATS_CREDS"); c != "" {
		nopts = append(nopts, nats.UserCredentials(c))
	}
	if t := os.Getenv("NATS_TOKEN"); t != "" {
		nopts = append(nopts, nats.Token(t))
	}
	nc, err := nats.Connect(url, nopts...)
	if err != nil {
		return fmt.Errorf("fleet: connecting to %s: %w", url, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return fmt.Errorf("fleet: %w", err)
	}
	sharejs, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(o.AnnounceTimeout), jetstream.WithPublishAsyncMaxPending(shareQueue))
	if err != nil {
		nc.Close()
		return fmt.Errorf("fleet: %w", err)
	}
	f.nc, f.js, f.sharejs = nc, js, sharejs
	f.up.Store(nc.IsConnected())
	return nil
}

// ensureStream creates the invalidation stream, or updates its limits.
// AllowDirect stays off: a fence's read must come from the stream's leader
// (a follower's direct get may lag behind an acknowledged announcement).
func (f *Fleet) ensureStream(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := f.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        f.stream,
		Description: "ahead: writes announced by the replicas of fleet " + f.opts.Name,
		Subjects:    []string{f.opts.Name + ".inv.>"},
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardOld,
		// In memory: a replica resyncs (drops its shared-state
		// speculation, consumes from the end) whenever it reconnects, so
		// nothing needs the announcements a server restart loses; and
		// on loopback a file-backed publish's p99 was 6-30 ms against
		// 0.3-0.5 ms in memory (BenchmarkAnnouncedWrite, README).
		Storage:    jetstream.MemoryStorage,
		MaxBytes:   f.opts.MaxBytes,
		MaxAge:     f.opts.MaxAge,
		MaxMsgSize: maxMsgSize,
		MaxMsgs:    -1,
		Replicas:   1,
	})
	if err != nil {
		return fmt.Errorf("fleet: creating stream %s: %w", f.stream, err)
	}
	return nil
}

// subject returns the subject of a backend's announcements: its name when
// that is a valid subject token, else a hex encoding of it.
func (f *Fleet) subject(backend string) string {
	if validName.MatchString(backend) {
		return f.opts.Name + ".inv." + backend
	}
	return f.opts.Name + ".inv.x" + hex.EncodeToString([]byte(backend))
}

// Start gives the fleet the engine it applies announcements to, and starts
// consuming them. Fences fail until the consumer runs.
func (f *Fleet) Start(app Applier) {
	f.mu.Lock()
	if f.app != nil || f.closed || f.opts.ReadOnly {
		f.mu.Unlock()
		return
	}
	f.app = app
	f.mu.Unlock()
	f.resync.Store(true)
	f.wake(f.wakeKeep)
	f.wg.Go(f.keeper)
	f.wg.Go(f.fencer)
	f.wg.Go(f.heartbeat)
	f.wg.Go(f.sharer)
}

// Close stops consuming, waits for the fleet's goroutines, closes the
// connection and stops the embedded server, if any. Late announcements
// still queued are lost (their writes are bounded by result lifetimes).
func (f *Fleet) Close() {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return
	}
	f.closed = true
	f.synced = false
	cc := f.cc
	f.cc = nil
	f.signalLocked()
	if f.next != nil {
		f.next.err = ErrClosed
		close(f.next.done)
		f.next = nil
	}
	f.mu.Unlock()
	close(f.stop)
	f.wg.Wait()
	if cc != nil {
		cc.Stop()
	}
	if !f.opts.ReadOnly {
		f.bye()
	}
	f.nc.Close()
	f.shutdownServer()
}

func (f *Fleet) shutdownServer() {
	if f.srv != nil {
		f.srv.Shutdown()
		f.srv.WaitForShutdown()
	}
}

// Stats returns the counters.
func (f *Fleet) Stats() Stats {
	st := Stats{
		Announced:   f.stats.announced.Load(),
		Late:        f.stats.late.Load(),
		LateSent:    f.stats.lateSent.Load(),
		Applied:     f.stats.applied.Load(),
		Fences:      f.stats.fences.Load(),
		FenceDown:   f.stats.fenceDown.Load(),
		FenceMissed: f.stats.fenceMissed.Load(),
		FenceAbsent: f.stats.fenceAbsent.Load(),
		Resyncs:     f.stats.resyncs.Load(),

		SharedHits:      f.stats.sharedHits.Load(),
		SharedRefusedBy: make(map[string]int64, refusedReasons),
		SharedPuts:      f.stats.sharedPuts.Load(),
		SharedPurges:    f.stats.sharedPurges.Load(),
		ShareDropped:    f.stats.shareDropped.Load(),
		ShareSuperseded: f.stats.shareSuperseded.Load(),
		ShareTooBig:     f.stats.shareTooBig.Load(),
		SharedErrors:    f.stats.sharedErrors.Load(),
	}
	for i, name := range refusedNames {
		n := f.stats.sharedRefused[i].Load()
		st.SharedRefusedBy[name] = n
		st.SharedRefused += n
	}
	return st
}

// Connected reports whether the replica is connected and caught up, that
// is whether fences can succeed.
func (f *Fleet) Connected() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.synced && f.up.Load()
}

// Ready waits until the replica is connected and caught up (fences can
// succeed), or ctx is done.
func (f *Fleet) Ready(ctx context.Context) error {
	for {
		f.mu.Lock()
		ok, closed, ch := f.synced, f.closed, f.changed
		f.mu.Unlock()
		switch {
		case closed:
			return ErrClosed
		case ok:
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("fleet %s: waiting to catch up: %w", f.opts.Name, ctx.Err())
		}
	}
}

func (f *Fleet) wake(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// signalLocked wakes everyone waiting for applied or synced to change.
func (f *Fleet) signalLocked() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// down marks the replica as not caught up: fences fail until a resync.
// It reports whether the fleet is closed.
func (f *Fleet) down() (closed bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.synced = false
	f.signalLocked()
	f.resync.Store(true)
	return f.closed
}

func encode(a announcement) []byte {
	data, _ := json.Marshal(a)
	if len(data) > maxMsgSize-1024 {
		a.Resources, a.Paths, a.All = nil, nil, true
		data, _ = json.Marshal(a)
	}
	return data
}
