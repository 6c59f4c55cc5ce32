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

// Stream returns the invalidation stream's state, read from the server.
func (f *Fleet) Stream(ctx context.Context) (StreamState, error) {
	return f.streamState(ctx, f.stream)
}

func (f *Fleet) streamState(ctx context.Context, name string) (StreamState, error) {
	s, err := f.js.Stream(ctx, name)
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
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var st LearningState
	var err error
	if st.Traces, err = l.f.streamState(ctx, l.stream); err != nil {
		return st, err
	}
	if st.Traces.MaxBytes != l.opts.MaxBytes || st.Traces.MaxAge != l.opts.MaxAge {
		return st, fmt.Errorf("fleet: stream %s is bounded by %d bytes and %s on the server, want %d bytes and %s",
			st.Traces.Name, st.Traces.MaxBytes, st.Traces.MaxAge, l.opts.MaxBytes, l.opts.MaxAge)
	}
	status, err := l.pools.Status(ctx)
	if err != nil {
		return st, fmt.Errorf("fleet: the pool store: %w", err)
	}
	st.PoolStore = status.Bucket()
	// The store is a stream of its own (OBJ_BUCKET), where its bound is.
	backing, err := l.f.streamState(ctx, "OBJ_"+status.Bucket())
	if err != nil {
		return st, err
	}
	st.PoolStoreBytes, st.PoolStoreMax = backing.Bytes, backing.MaxBytes
	if want := poolStoreMax(l.opts); st.PoolStoreMax != want {
		return st, fmt.Errorf("fleet: pool store %s is bounded by %d bytes on the server, want %d", st.PoolStore, st.PoolStoreMax, want)
	}
	ls, err := l.lease.Status(ctx)
	if err != nil {
		return st, fmt.Errorf("fleet: the lease bucket: %w", err)
	}
	st.Lease, st.LeaseTTL = ls.Bucket(), ls.TTL()
	// A lease without expiry would let a miner that died holding it
	// stop the fleet's learning for good.
	if st.LeaseTTL != l.opts.LeaseTTL {
		return st, fmt.Errorf("fleet: lease bucket %s expires a lease after %s on the server, want %s", st.Lease, st.LeaseTTL, l.opts.LeaseTTL)
	}
	switch e, err := l.lease.Get(ctx, leaseKey); {
	case errors.Is(err, jetstream.ErrKeyNotFound):
	case err != nil:
		return st, fmt.Errorf("fleet: reading the lease: %w", err)
	default:
		st.Miner = string(e.Value())
	}
	info, err := l.pools.GetInfo(ctx, poolObject)
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
