package fleet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ahead-dev/ahead/pattern"
	"github.com/ahead-dev/ahead/trace"
)

// Learning shared (issue 25 item 3). Every replica publishes what it
// records (calls, emitted calls and, with ShareConversation, messages) on
// the fleet's trace stream (NAME_traces, subject NAME.traces.REPLICA). At
// a checkpoint one replica mines: the one holding the mining lease (key
// "miner" of the KV bucket NAME_lease, whose TTL is LeaseTTL; taken with
// Create, renewed with a revision-checked Update, so two replicas never
// both hold it). It reads the fleet's recent lines (Recent), mines them,
// and puts the pool in the object store NAME_pool (chunked: a pool may be
// larger than a NATS message), after checking that it still holds the
// lease. Every replica watches the store and loads a newer pool at once;
// one that starts loads the current pool before it serves (Load).
//
// What is shared: trace lines are the user's logs, as the trace files are
// (arguments and outputs of calls, bounded by the stream's MaxBytes and
// MaxAge); message text only with ShareConversation; the pool is written
// by pattern.Pool.Encode, which applies the privacy rule.

// LearningOptions configure a replica's part in the fleet's learning. The
// zero value of each field means its default.
type LearningOptions struct {
	// ShareConversation publishes message lines with their text; false
	// keeps them on this replica (calls and emitted calls are shared).
	ShareConversation bool
	// MaxBytes bounds the trace stream; 0 means 256 MiB.
	MaxBytes int64
	// MaxAge bounds how long a line is kept; 0 means 24 h.
	MaxAge time.Duration
	// MaxLine bounds one published line; a larger line is published
	// without its output, and dropped if still larger. 0 means 256 KiB.
	MaxLine int
	// MaxRecent bounds the lines Recent reads (the most recent); 0 means
	// 50000.
	MaxRecent int
	// MaxPoolBytes bounds an encoded pool; a larger one is not shared.
	// 0 means 64 MiB.
	MaxPoolBytes int64
	// LeaseTTL is how long the mining lease lasts unless renewed; 0 means
	// 2 min. It must exceed the time one mining takes.
	LeaseTTL time.Duration
	// Queue bounds the lines waiting to be published; beyond it lines are
	// dropped (counted). 0 means 4096.
	Queue int
}

func (o LearningOptions) withDefaults() LearningOptions {
	if o.MaxBytes <= 0 {
		o.MaxBytes = 256 << 20
	}
	if o.MaxAge <= 0 {
		o.MaxAge = 24 * time.Hour
	}
	if o.MaxLine <= 0 {
		o.MaxLine = 256 << 10
	}
	if o.MaxRecent <= 0 {
		o.MaxRecent = 50000
	}
	if o.MaxPoolBytes <= 0 {
		o.MaxPoolBytes = 64 << 20
	}
	if o.LeaseTTL <= 0 {
		o.LeaseTTL = 2 * time.Minute
	}
	if o.Queue <= 0 {
		o.Queue = 4096
	}
	return o
}

// PoolInfo describes a pool shared in the fleet.
type PoolInfo struct {
	Version uint64    `json:"version"` // 1 for the first pool shared, then +1
	Miner   string    `json:"miner"`   // the replica that mined it
	Mark    uint64    `json:"mark"`    // the last trace stream sequence it was mined from
	Mined   time.Time `json:"mined"`
	Bytes   int64     `json:"bytes"`
}

// LearningStats counts what a replica shared and loaded.
type LearningStats struct {
	Published int64 // lines published
	Dropped   int64 // lines dropped: queue full, too large, or not encodable
	Trimmed   int64 // lines published without their output (too large)
	Queued    int   // lines waiting to be published
	Mined     int64 // pools this replica mined and shared
	Loaded    int64 // pools of the fleet loaded
	// Pool is the pool in use (the last loaded or shared); zero before.
	Pool PoolInfo
	// Lag is how many lines the fleet had published beyond the pool in
	// use's mark, as of the last checkpoint (Lease).
	Lag uint64
}

// Errors of Learning.
var (
	// ErrNotMiner: the lease was lost before the pool could be shared.
	ErrNotMiner = errors.New("fleet: not holding the mining lease")
	// ErrPoolTooLarge: the pool exceeds MaxPoolBytes.
	ErrPoolTooLarge = errors.New("fleet: pool too large to share")
)

const (
	leaseKey   = "miner"
	poolObject = "pool"
	hdrVersion = "Ahead-Pool-Version"
	hdrMiner   = "Ahead-Pool-Miner"
	hdrMark    = "Ahead-Pool-Mark"
)

// Learning is a replica's part in the fleet's learning. Create it with
// Fleet.Learning; Close it before the Fleet.
type Learning struct {
	f      *Fleet
	opts   LearningOptions
	stream string
	lease  jetstream.KeyValue
	pools  jetstream.ObjectStore

	lines chan *queued
	stop  chan struct{}
	wg    sync.WaitGroup

	published, dropped, trimmed, mined, loaded atomic.Int64

	mu       sync.Mutex // protects the fields below
	leaseRev uint64     // revision of our lease, 0 when not held
	pool     PoolInfo   // the pool in use
	last     uint64     // the trace stream's last sequence, at the last Lease
	closed   bool
}

// Learning creates (or updates the limits of) the fleet's trace stream,
// lease bucket and pool store, and starts publishing what Record is given.
// opts may be nil.
func (f *Fleet) Learning(ctx context.Context, opts *LearningOptions) (*Learning, error) {
	var o LearningOptions
	if opts != nil {
		o = *opts
	}
	o = o.withDefaults()
	if o.MaxLine > maxPayload {
		return nil, fmt.Errorf("fleet: max line %d exceeds the server's payload limit %d", o.MaxLine, maxPayload)
	}
	l := &Learning{f: f, opts: o, stream: f.tracesStream(), lines: make(chan *queued, o.Queue), stop: make(chan struct{})}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := f.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        l.stream,
		Description: "ahead: what the replicas of fleet " + f.opts.Name + " record, for mining",
		Subjects:    []string{f.opts.Name + ".traces.>"},
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardOld,
		Storage:     jetstream.FileStorage,
		MaxBytes:    o.MaxBytes,
		MaxAge:      o.MaxAge,
		MaxMsgSize:  int32(o.MaxLine + 1024),
		MaxMsgs:     -1,
		Replicas:    1,
	})
	if err != nil {
		return nil, fmt.Errorf("fleet: creating stream %s: %w", l.stream, err)
	}
	l.lease, err = f.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:       f.leaseBucket(),
		Description:  "ahead: which replica of fleet " + f.opts.Name + " mines",
		History:      1,
		TTL:          o.LeaseTTL,
		MaxBytes:     leaseMaxBytes,
		MaxValueSize: 1024,
		Storage:      jetstream.FileStorage,
	})
	if err != nil {
		return nil, fmt.Errorf("fleet: creating the lease bucket: %w", err)
	}
	l.pools, err = f.js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{
		Bucket:      f.poolBucket(),
		Description: "ahead: the pattern pool of fleet " + f.opts.Name,
		MaxBytes:    poolStoreMax(o),
		Storage:     jetstream.FileStorage,
	})
	if err != nil {
		return nil, fmt.Errorf("fleet: creating the pool store: %w", err)
	}
	l.register(f.opts.Registerer)
	l.wg.Go(l.publisher)
	return l, nil
}

func (f *Fleet) tracesStream() string { return f.opts.Name + "_traces" }
func (f *Fleet) leaseBucket() string  { return f.opts.Name + "_lease" }
func (f *Fleet) poolBucket() string   { return f.opts.Name + "_pool" }

// poolStoreMax bounds the pool store: the new pool's chunks are written
// before the old one's are purged, and chunking adds a little.
func poolStoreMax(o LearningOptions) int64 { return 2*o.MaxPoolBytes + 1<<20 }

// register exposes the learning's state and counters on reg (nil:
// nowhere).
func (l *Learning) register(reg prometheus.Registerer) {
	if reg == nil {
		return
	}
	counter := func(name, help string, v func() int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(v()) })
	}
	gauge := func(name, help string, v func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, v)
	}
	reg.MustRegister(
		gauge("ahead_fleet_pool_version", "Version of the fleet's pattern pool this replica serves (0: none yet).",
			func() float64 { return float64(l.Stats().Pool.Version) }),
		gauge("ahead_fleet_learning_lag", "Trace lines the fleet published beyond the pool served, as of this replica's last checkpoint.",
			func() float64 { return float64(l.Stats().Lag) }),
		gauge("ahead_fleet_lines_queued", "Trace lines waiting to be published.", func() float64 { return float64(len(l.lines)) }),
		counter("ahead_fleet_lines_published_total", "Trace lines published for the fleet to mine.", l.published.Load),
		counter("ahead_fleet_lines_dropped_total", "Trace lines not published: queue full, too large, or not encodable.", l.dropped.Load),
		counter("ahead_fleet_lines_trimmed_total", "Trace lines published without their output (too large).", l.trimmed.Load),
		counter("ahead_fleet_pools_mined_total", "Pools this replica mined (holding the lease) and shared.", l.mined.Load),
		counter("ahead_fleet_pools_loaded_total", "Pools of the fleet this replica loaded.", l.loaded.Load),
	)
}

// maxPayload is the largest message the embedded server takes (and the
// default of any NATS server).
const maxPayload = 1 << 20

// Record publishes ev for the fleet to mine, without blocking: calls,
// emitted calls and, with ShareConversation, messages; speculative and
// failed calls are not learnt from and stay local. It never fails: a line
// that cannot be queued is dropped and counted.
func (l *Learning) Record(ev trace.Event) error {
	switch {
	case ev.IsCall(), ev.Kind == trace.KindEmitted:
	case ev.IsMessage():
		if !l.opts.ShareConversation {
			return nil
		}
	default:
		return nil
	}
	line, ok := l.encode(ev)
	if !ok {
		l.dropped.Add(1)
		return nil
	}
	select {
	case l.lines <- &queued{line: line}:
	default:
		l.dropped.Add(1)
	}
	return nil
}

// queued is a line to publish, or a Flush's marker (done).
type queued struct {
	line []byte
	done chan struct{}
	err  error // set before done is closed
}

// encode returns ev's line within MaxLine: without its output if need be.
func (l *Learning) encode(ev trace.Event) ([]byte, bool) {
	var b bytes.Buffer
	if err := trace.EncodeLine(&b, ev); err != nil {
		return nil, false
	}
	if b.Len() <= l.opts.MaxLine {
		return b.Bytes(), true
	}
	if ev.Output == "" {
		return nil, false
	}
	ev.Output = ""
	b.Reset()
	if err := trace.EncodeLine(&b, ev); err != nil || b.Len() > l.opts.MaxLine {
		return nil, false
	}
	l.trimmed.Add(1)
	return b.Bytes(), true
}

// publisher publishes queued lines on core NATS (the stream stores them;
// nats.go buffers them, bounded, while reconnecting), until Close.
func (l *Learning) publisher() {
	subj := l.f.opts.Name + ".traces." + l.f.opts.Replica
	unacked := false // lines published since the last acknowledged marker
	for {
		select {
		case <-l.stop:
			// What is queued is published (core publishes do not wait).
			for {
				select {
				case q := <-l.lines:
					if q.done == nil && l.f.nc.Publish(subj, q.line) == nil {
						l.published.Add(1)
					}
					continue
				default:
				}
				break
			}
			_ = l.f.nc.FlushTimeout(time.Second)
			return
		case q := <-l.lines:
			if q.done != nil {
				// An empty line through JetStream: the stream stores a
				// connection's messages in order, so its acknowledgement
				// says every line before it is stored. None when no line
				// was published since the last: markers on an idle stream
				// would count as lag.
				if unacked {
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					_, q.err = l.f.js.Publish(ctx, subj, nil)
					cancel()
					unacked = q.err != nil
				}
				close(q.done)
				continue
			}
			if err := l.f.nc.Publish(subj, q.line); err != nil {
				l.dropped.Add(1)
				continue
			}
			unacked = true
			l.published.Add(1)
		}
	}
}

// Flush waits until the lines recorded before it are published and stored
// by the stream, or ctx is done.
func (l *Learning) Flush(ctx context.Context) error {
	q := &queued{done: make(chan struct{})}
	select {
	case l.lines <- q:
	case <-l.stop:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-q.done:
		return q.err
	case <-l.stop:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close publishes the lines queued (within a second), stops loading
// pools, and gives the mining lease up if it holds it, so that another
// replica mines at its next checkpoint rather than after LeaseTTL (ahead
// mcp processes come and go with their sessions). Close it before its
// Fleet.
func (l *Learning) Close() {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	l.closed = true
	rev := l.leaseRev
	l.leaseRev = 0
	l.mu.Unlock()
	close(l.stop)
	l.wg.Wait()
	if rev != 0 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = l.lease.Delete(ctx, leaseKey, jetstream.LastRevision(rev))
		cancel()
	}
}

// Lease reports whether this replica is the fleet's miner now: it holds
// the lease (renewed) or has just taken it. It also notes the trace
// stream's end, for Stats' lag.
func (l *Learning) Lease(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if s, err := l.f.js.Stream(ctx, l.stream); err == nil {
		l.mu.Lock()
		l.last = s.CachedInfo().State.LastSeq
		l.mu.Unlock()
	}
	me := []byte(l.f.opts.Replica)
	l.mu.Lock()
	rev := l.leaseRev
	l.mu.Unlock()
	var err error
	if rev != 0 {
		rev, err = l.lease.Update(ctx, leaseKey, me, rev)
	}
	if rev == 0 || err != nil {
		// Not held, or lost (expired and taken, or expired: Create
		// succeeds on a key whose lease ran out).
		rev, err = l.lease.Create(ctx, leaseKey, me)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.leaseRev = 0
		return false
	}
	l.leaseRev = rev
	return true
}

// Recent returns the fleet's most recent trace lines (at most MaxRecent),
// grouped into sessions (trace.Collect); fresh[i] is the index of the
// first call of sessions[i] published after the stream sequence since
// (the calls before it were in an earlier mining); mark is the stream's
// last sequence as read, or since when no line was published after it
// (the empty messages Flush publishes are not lines: a checkpoint with
// nothing new to mine sees mark == since).
func (l *Learning) Recent(ctx context.Context, since uint64) (sessions []trace.Session, fresh []int, mark uint64, err error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	// This replica's own lines recorded so far are mined too.
	if err := l.Flush(ctx); err != nil {
		return nil, nil, 0, fmt.Errorf("fleet: publishing the lines queued: %w", err)
	}
	s, err := l.f.js.Stream(ctx, l.stream)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("fleet: stream %s: %w", l.stream, err)
	}
	st := s.CachedInfo().State
	if st.Msgs == 0 {
		return nil, nil, since, nil
	}
	start := st.FirstSeq
	if st.LastSeq-start+1 > uint64(l.opts.MaxRecent) {
		start = st.LastSeq - uint64(l.opts.MaxRecent) + 1
	}
	cons, err := l.f.js.OrderedConsumer(ctx, l.stream, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: start,
	})
	if err != nil {
		return nil, nil, 0, fmt.Errorf("fleet: reading %s: %w", l.stream, err)
	}
	var evs []trace.Event
	newLines := false           // a line published after since
	old := make(map[string]int) // session → its calls published up to since
	rd := trace.NewReader(nil)
	for seq := start - 1; seq < st.LastSeq; {
		// No more than are left: a Fetch returns when its batch is full
		// (or after its wait, when lines aged out meanwhile).
		batch, err := cons.Fetch(int(min(1000, st.LastSeq-seq)), jetstream.FetchMaxWait(time.Second))
		if err != nil {
			return nil, nil, 0, fmt.Errorf("fleet: reading %s: %w", l.stream, err)
		}
		n := 0
		for m := range batch.Messages() {
			n++
			md, err := m.Metadata()
			if err != nil {
				continue
			}
			// Lines published since the read began end it.
			seq = md.Sequence.Stream
			if seq > st.LastSeq || len(m.Data()) == 0 {
				continue // a line of a later read, or a Flush's marker
			}
			newLines = newLines || seq > since
			for ev, err := range rd.Read(m.Subject(), bytes.NewReader(m.Data())) {
				if err != nil {
					continue
				}
				evs = append(evs, ev)
				if seq <= since && ev.IsCall() {
					old[ev.Session]++
				}
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
			return nil, nil, 0, fmt.Errorf("fleet: reading %s: %w", l.stream, err)
		}
		if n == 0 {
			break // the rest aged out meanwhile
		}
	}
	sessions, err = trace.Collect(func(yield func(trace.Event, error) bool) {
		for _, ev := range evs {
			if !yield(ev, nil) {
				return
			}
		}
	})
	if err != nil {
		return nil, nil, 0, err
	}
	fresh = make([]int, len(sessions))
	for i, s := range sessions {
		fresh[i] = min(old[s.ID], len(s.Events))
	}
	if !newLines {
		return sessions, fresh, since, nil
	}
	return sessions, fresh, st.LastSeq, nil
}

// Share puts pool in the fleet's store as the next version, mined from
// the trace stream up to mark, if this replica still holds the lease
// (else ErrNotMiner).
func (l *Learning) Share(ctx context.Context, pool *pattern.Pool, mark uint64) error {
	_, err := l.share(ctx, pool, mark)
	return err
}

func (l *Learning) share(ctx context.Context, pool *pattern.Pool, mark uint64) (PoolInfo, error) {
	var b bytes.Buffer
	if err := pool.Encode(&b); err != nil {
		return PoolInfo{}, fmt.Errorf("fleet: encoding the pool: %w", err)
	}
	if int64(b.Len()) > l.opts.MaxPoolBytes {
		return PoolInfo{}, fmt.Errorf("%w: %d bytes, max %d", ErrPoolTooLarge, b.Len(), l.opts.MaxPoolBytes)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var version uint64 = 1
	if info, err := l.pools.GetInfo(ctx, poolObject); err == nil {
		version = parseInfo(info).Version + 1
	} else if !errors.Is(err, jetstream.ErrObjectNotFound) {
		return PoolInfo{}, fmt.Errorf("fleet: reading the pool store: %w", err)
	}
	// The lease checked (and renewed) last: a replica that lost it while
	// mining shares nothing.
	if !l.Lease(ctx) {
		return PoolInfo{}, ErrNotMiner
	}
	pi := PoolInfo{Version: version, Miner: l.f.opts.Replica, Mark: mark, Mined: time.Now().UTC(), Bytes: int64(b.Len())}
	meta := jetstream.ObjectMeta{Name: poolObject, Description: "ahead pattern pool", Headers: nats.Header{
		hdrVersion: {strconv.FormatUint(pi.Version, 10)},
		hdrMiner:   {pi.Miner},
		hdrMark:    {strconv.FormatUint(pi.Mark, 10)},
	}}
	if _, err := l.pools.Put(ctx, meta, &b); err != nil {
		return PoolInfo{}, fmt.Errorf("fleet: sharing the pool: %w", err)
	}
	l.mined.Add(1)
	l.use(pi)
	return pi, nil
}

func parseInfo(info *jetstream.ObjectInfo) PoolInfo {
	pi := PoolInfo{Miner: info.Headers.Get(hdrMiner), Mined: info.ModTime, Bytes: int64(info.Size)}
	pi.Version, _ = strconv.ParseUint(info.Headers.Get(hdrVersion), 10, 64)
	pi.Mark, _ = strconv.ParseUint(info.Headers.Get(hdrMark), 10, 64)
	return pi
}

// use records pi as the pool in use, if newer.
func (l *Learning) use(pi PoolInfo) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if pi.Version <= l.pool.Version {
		return false
	}
	l.pool = pi
	return true
}

// Load returns the fleet's current pool, or nil and no error when none
// has been shared yet.
func (l *Learning) Load(ctx context.Context) (*pattern.Pool, PoolInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	info, err := l.pools.GetInfo(ctx, poolObject)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil, PoolInfo{}, nil
	}
	if err != nil {
		return nil, PoolInfo{}, fmt.Errorf("fleet: reading the pool store: %w", err)
	}
	return l.get(ctx, info)
}

func (l *Learning) get(ctx context.Context, info *jetstream.ObjectInfo) (*pattern.Pool, PoolInfo, error) {
	pi := parseInfo(info)
	if int64(info.Size) > l.opts.MaxPoolBytes {
		return nil, pi, fmt.Errorf("%w: version %d is %d bytes, max %d", ErrPoolTooLarge, pi.Version, info.Size, l.opts.MaxPoolBytes)
	}
	data, err := l.pools.GetBytes(ctx, poolObject)
	if err != nil {
		return nil, pi, fmt.Errorf("fleet: loading pool version %d: %w", pi.Version, err)
	}
	pool, err := pattern.Decode(data)
	if err != nil {
		return nil, pi, fmt.Errorf("fleet: pool version %d of %s: %w", pi.Version, pi.Miner, err)
	}
	return pool, pi, nil
}

// Watch calls adopt with every pool shared in the fleet newer than the one
// in use (the current one first, if any), until Close; adopt's error is
// logged. One goroutine, which Close stops.
func (l *Learning) Watch(adopt func(*pattern.Pool, PoolInfo) error) error {
	ctx, cancel := context.WithCancel(context.Background())
	w, err := l.pools.Watch(ctx)
	if err != nil {
		cancel()
		return fmt.Errorf("fleet: watching the pool store: %w", err)
	}
	l.wg.Go(func() {
		defer cancel()
		defer func() { _ = w.Stop() }()
		for {
			var info *jetstream.ObjectInfo
			select {
			case <-l.stop:
				return
			case i, ok := <-w.Updates():
				if !ok {
					return
				}
				info = i
			}
			if info == nil || info.Deleted || info.Name != poolObject {
				continue
			}
			l.adopt(ctx, info, adopt)
		}
	})
	return nil
}

// adopt loads the pool info describes and gives it to fn, if newer than
// the one in use.
func (l *Learning) adopt(ctx context.Context, info *jetstream.ObjectInfo, fn func(*pattern.Pool, PoolInfo) error) {
	pi := parseInfo(info)
	l.mu.Lock()
	newer := pi.Version > l.pool.Version
	l.mu.Unlock()
	if !newer {
		return
	}
	gctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	pool, pi, err := l.get(gctx, info)
	cancel()
	if err == nil {
		err = fn(pool, pi)
	}
	if err != nil {
		l.f.opts.Logger.Warn("fleet: loading a shared pool", "fleet", l.f.opts.Name, "version", pi.Version, "miner", pi.Miner, "err", err)
		return
	}
	if l.use(pi) {
		l.loaded.Add(1)
	}
}

// Adopted notes that a pool loaded with Load is in use.
func (l *Learning) Adopted(pi PoolInfo) {
	if l.use(pi) {
		l.loaded.Add(1)
	}
}

// Stats returns what the replica shared and loaded.
func (l *Learning) Stats() LearningStats {
	l.mu.Lock()
	pool, last := l.pool, l.last
	l.mu.Unlock()
	st := LearningStats{
		Published: l.published.Load(), Dropped: l.dropped.Load(), Trimmed: l.trimmed.Load(), Queued: len(l.lines),
		Mined: l.mined.Load(), Loaded: l.loaded.Load(), Pool: pool,
	}
	if last > pool.Mark {
		st.Lag = last - pool.Mark
	}
	return st
}
