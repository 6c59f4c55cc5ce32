package fleet

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// StreamState describes one of the fleet's streams, for checks (ahead
// doctor).
type StreamState struct {
	Name           string
	Msgs, Bytes    uint64
	MaxBytes       int64
	MaxAge         time.Duration
	FirstSeq, Last uint64
}

// ErrNotCreated: a stream or bucket of the fleet does not exist on the
// server (yet: a replica creates it when it starts).
var ErrNotCreated = errors.New("not created yet")

// ensureStreamUnless creates (or updates) the invalidation stream, unless
// readOnly.
func (f *Fleet) ensureStreamUnless(ctx context.Context, readOnly bool) error {
	if readOnly {
		return nil
	}
	return f.ensureStream(ctx)
}

// Stream returns the invalidation stream's state, read from the server,
// and fails if its bounds are not those this replica sets (MaxBytes,
// MaxAge), or with ErrNotCreated if it does not exist.
func (f *Fleet) Stream(ctx context.Context) (StreamState, error) {
	st, err := f.streamState(ctx, f.stream)
	if err == nil {
		err = st.within("stream "+st.Name, f.opts.MaxBytes, f.opts.MaxAge)
	}
	return st, err
}

// within fails unless st has the bounds a replica sets (maxBytes,
// maxAge); what names st in the error.
func (st StreamState) within(what string, maxBytes int64, maxAge time.Duration) error {
	if st.MaxBytes == maxBytes && st.MaxAge == maxAge {
		return nil
	}
	return fmt.Errorf("fleet: %s is bounded by %d bytes and %s on the server, want %d bytes and %s",
		what, st.MaxBytes, st.MaxAge, maxBytes, maxAge)
}

func (f *Fleet) streamState(ctx context.Context, name string) (StreamState, error) {
	s, err := f.js.Stream(ctx, name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		err = ErrNotCreated
	}
	if err != nil {
		return StreamState{}, fmt.Errorf("fleet: stream %s: %w", name, err)
	}
	info := s.CachedInfo()
	return StreamState{Name: name, Msgs: info.State.Msgs, Bytes: info.State.Bytes, MaxBytes: info.Config.MaxBytes,
		MaxAge: info.Config.MaxAge, FirstSeq: info.State.FirstSeq, Last: info.State.LastSeq}, nil
}

// LearningState describes the fleet's learning resources, for checks
// (ahead doctor).
type LearningState struct {
	Traces StreamState // the trace stream
	// PoolStore is the pool store's bucket; PoolStoreBytes what it holds,
	// PoolStoreMax its bound.
	PoolStore      string
	PoolStoreBytes uint64
	PoolStoreMax   int64
	// Pool is the pool shared (zero when none is yet).
	Pool PoolInfo
	// Lease is the mining lease's bucket, LeaseTTL how long the lease
	// outlives its holder's last renewal, Miner the replica holding it
	// ("" when none does).
	Lease    string
	LeaseTTL time.Duration
	Miner    string
}

// State reads the trace stream, the pool store and the lease bucket from
// the server, and fails if their bounds (the lease's TTL) are not those
// this replica set (Fleet.Learning):
// another replica with other limits, or a server that changed them.
func (l *Learning) State(ctx context.Context) (LearningState, error) {
	return l.f.LearningState(ctx, &l.opts)
}

// LearningState reads the fleet's learning resources from the server as
// State does, without creating or changing any (ahead doctor), against the
// bounds that a replica's Learning with opts (nil: the defaults) sets; it
// fails with ErrNotCreated for one that does not exist.
func (f *Fleet) LearningState(ctx context.Context, opts *LearningOptions) (LearningState, error) {
	var o LearningOptions
	if opts != nil {
		o = *opts
	}
	o = o.withDefaults()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var st LearningState
	var err error
	if st.Traces, err = f.streamState(ctx, f.tracesStream()); err != nil {
		return st, err
	}
	if err := st.Traces.within("stream "+st.Traces.Name, o.MaxBytes, o.MaxAge); err != nil {
		return st, err
	}
	pools, err := f.js.ObjectStore(ctx, f.poolBucket())
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		err = ErrNotCreated
	}
	if err != nil {
		return st, fmt.Errorf("fleet: the pool store %s: %w", f.poolBucket(), err)
	}
	status, err := pools.Status(ctx)
	if err != nil {
		return st, fmt.Errorf("fleet: the pool store: %w", err)
	}
	st.PoolStore = status.Bucket()
	// The store is a stream of its own (OBJ_BUCKET), where its bound is.
	backing, err := f.streamState(ctx, "OBJ_"+status.Bucket())
	if err != nil {
		return st, err
	}
	st.PoolStoreBytes, st.PoolStoreMax = backing.Bytes, backing.MaxBytes
	if want := poolStoreMax(o); st.PoolStoreMax != want {
		return st, fmt.Errorf("fleet: pool store %s is bounded by %d bytes on the server, want %d", st.PoolStore, st.PoolStoreMax, want)
	}
	lease, err := f.js.KeyValue(ctx, f.leaseBucket())
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		err = ErrNotCreated
	}
	if err != nil {
		return st, fmt.Errorf("fleet: the lease bucket %s: %w", f.leaseBucket(), err)
	}
	ls, err := lease.Status(ctx)
	if err != nil {
		return st, fmt.Errorf("fleet: the lease bucket: %w", err)
	}
	st.Lease, st.LeaseTTL = ls.Bucket(), ls.TTL()
	// A lease without expiry would let a miner that died holding it
	// stop the fleet's learning for good.
	if st.LeaseTTL != o.LeaseTTL {
		return st, fmt.Errorf("fleet: lease bucket %s expires a lease after %s on the server, want %s", st.Lease, st.LeaseTTL, o.LeaseTTL)
	}
	switch e, err := lease.Get(ctx, leaseKey); {
	case errors.Is(err, jetstream.ErrKeyNotFound):
	case err != nil:
		return st, fmt.Errorf("fleet: reading the lease: %w", err)
	default:
		st.Miner = string(e.Value())
	}
	info, err := pools.GetInfo(ctx, poolObject)
	switch {
	case errors.Is(err, jetstream.ErrObjectNotFound):
	case err != nil:
		return st, fmt.Errorf("fleet: reading the pool store: %w", err)
	default:
		st.Pool = parseInfo(info)
	}
	return st, nil
}

// leaseMaxBytes bounds the lease bucket (one small key).
const leaseMaxBytes = 1 << 20

// StoreBytes is what the fleet's learning with opts (nil: the defaults)
// takes of a server's file store, which JetStream reserves when the
// streams are created: the trace stream, the lease bucket and the pool
// store. An embedded server's MaxStore below it cannot hold them.
func StoreBytes(opts *LearningOptions) int64 {
	var o LearningOptions
	if opts != nil {
		o = *opts
	}
	o = o.withDefaults()
	return o.MaxBytes + leaseMaxBytes + poolStoreMax(o)
}

// ResultsState returns the state of the shared results' bucket (the
// stream behind it), read from the server, and fails if its bounds are not
// those this replica sets (MaxResultBytes, MaxResultAge), or with
// ErrNotCreated if it does not exist.
func (f *Fleet) ResultsState(ctx context.Context) (StreamState, error) {
	st, err := f.streamState(ctx, "KV_"+f.resultsBucket())
	if err == nil {
		err = st.within("results bucket "+f.resultsBucket(), f.opts.MaxResultBytes, f.opts.MaxResultAge)
	}
	return st, err
}

// CreateResults creates (or updates) the shared results' bucket as a
// replica whose policy marks a tool shared does when it starts; a
// read-only Fleet refuses.
func (f *Fleet) CreateResults(ctx context.Context) error {
	if f.opts.ReadOnly {
		return errors.New("fleet: joined read-only: the results bucket is not created")
	}
	_, _, err := f.ensureBucket(ctx)
	return err
}
