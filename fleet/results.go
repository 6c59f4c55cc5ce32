package fleet

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ahead-dev/ahead/callkey"
	"github.com/ahead-dev/ahead/engine"
	"github.com/ahead-dev/ahead/policy"
)

// Pure results shared: the speculative result of a tool marked shared (a
// pure function) that one replica ran is put in the fleet's results bucket
// (NAME_results, a KV bucket in memory) with the result's lifetime, and a
// replica whose agent makes the same call without a result of its own
// reuses it (engine.ResultSharer).
//
// Lossless, as for a replica's own results: a result carries the point of
// the invalidation stream it was still valid at (its producer had applied
// every announcement up to it and the result survived them: mark). Every
// replica keeps, per backend, a conflict clock: the last sequence of the
// announcements it applied, by resource (hashed into clockSlots slots,
// where a collision only refuses a result), of those naming any resource,
// and of those that may change anything, from its last resync on. A
// replica reuses a result only after a fence (every write announced before
// the call applied) and only if no announcement it applied after the
// result's mark may change it. So a result that started before a write
// announced before the agent's call is never handed over, whichever
// replica ran it, whenever it was put, and whatever the bucket holds (a
// follower's older copy included).
//
// A write also purges the results it may change from the bucket (best
// effort, in the background: the check above is what keeps them from being
// reused): a result is stored under the slot of its first resource, so a
// write purges the slots of its resources and the results that name none;
// a result reading several resources is purged by a write of its first and
// otherwise refused until it expires.
//
// A result with a front-specific form (an MCP upstream's whole result)
// travels with it (sharedValue.Raw), under the same rules: the engine
// shares it only when its backend can encode it (backend.RawCodec), and
// reuses it only in that form.
//
// Bounds: a value holds at most MaxResultSize bytes (larger results stay
// with their replica), the bucket MaxResultBytes (a full bucket refuses
// puts: counted, the result stays local), each key lives its result's TTL
// (rounded up to a second in the bucket; a reader checks the exact
// expiry), and at most shareQueue puts and purges wait to be sent (beyond,
// they are dropped and counted).

// clockSlots is the number of resource slots of a backend's conflict
// clock: 32 KiB per shared backend.
const clockSlots = 4096

// shareQueue bounds the puts and purges waiting for the sharer.
const shareQueue = 1024

// clock is a backend's conflict clock (see above). Protected by Fleet.mu.
type clock struct {
	floor uint64 // the resync point: results valid only before it are refused
	all   uint64 // last announcement that may change anything
	named uint64 // last announcement naming resources (reaches reads naming none)
	slot  [clockSlots]uint64
}

func slotOf(key string) int {
	h := fnv.New32a()
	h.Write([]byte(key))
	return int(h.Sum32() % clockSlots)
}

// applyLocked records announcement seq of ef on the clock.
func (c *clock) applyLocked(seq uint64, ef policy.Effect) {
	if ef.All {
		c.all = max(c.all, seq)
		return
	}
	c.named = max(c.named, seq)
	for _, k := range ef.Keys() {
		i := slotOf(k)
		c.slot[i] = max(c.slot[i], seq)
	}
}

// validLocked reports whether a result with footprint fp, valid at seq,
// survives every announcement this replica applied since.
func (c *clock) validLocked(seq uint64, fp policy.Footprint) bool {
	if seq < c.floor || seq < c.all {
		return false
	}
	if fp.Any {
		return seq >= c.named
	}
	for _, k := range fp.Keys() {
		if seq < c.slot[slotOf(k)] {
			return false
		}
	}
	return true
}

// sharedValue is a result in the bucket.
type sharedValue struct {
	Replica string `json:"r"`
	Epoch   int64  `json:"e"` // the stream's creation time: sequences of another stream mean nothing
	Seq     uint64 `json:"s"` // valid at this sequence
	Output  string `json:"o"`
	// Raw is the result's front-specific form (an MCP upstream's whole
	// result), as its backend encoded it (backend.RawCodec).
	Raw     json.RawMessage `json:"raw,omitempty"`
	TookNS  int64           `json:"t"`
	Expires int64           `json:"x"` // unix ns
	Any     bool            `json:"any,omitempty"`
	Res     []string        `json:"res,omitempty"`
	Paths   []string        `json:"paths,omitempty"`
}

func (v sharedValue) footprint() policy.Footprint {
	fp := policy.Footprint{Any: v.Any, Resources: v.Res}
	for _, p := range v.Paths {
		fp.Paths = append(fp.Paths, policy.Path{Name: p})
	}
	return fp
}

type shareJob struct {
	key   string        // put: the bucket key
	value []byte        // put: the value
	ttl   time.Duration // put
	purge []string      // purge: subjects of the bucket's stream
}

// results is the fleet's side of shared results. Its fields other than
// the queue are protected by Fleet.mu.
type results struct {
	bucket string
	kv     jetstream.KeyValue // nil until created (restart)
	stream jetstream.Stream   // the bucket's stream, for purges
	epoch  int64
	clocks map[string]*clock // backend → clock
	queue  chan shareJob
}

func (f *Fleet) resultsBucket() string { return f.opts.Name + "_results" }

// bucketSubject is the subject prefix of the bucket's keys.
func (f *Fleet) bucketSubject() string { return "$KV." + f.resultsBucket() + "." }

// token is a backend's part of subjects and keys.
func (f *Fleet) token(backend string) string {
	return f.subject(backend)[len(f.opts.Name+".inv."):]
}

// resultKey is the bucket key of a call's result on backend: under the
// slot of its first resource (or "any"), so that a write can purge it by
// subject.
func (f *Fleet) resultKey(backend string, key callkey.Key, fp policy.Footprint) string {
	h := sha256.Sum256([]byte(key.Tool + "\x00" + key.Args))
	g := "any"
	if keys := fp.Keys(); !fp.Any && len(keys) > 0 {
		g = fmt.Sprintf("s%03x", slotOf(keys[0]))
	}
	return f.token(backend) + "." + g + "." + hex.EncodeToString(h[:16])
}

// purgeSubjects are the bucket subjects of the results a write of ef on
// backend may change.
func (f *Fleet) purgeSubjects(backend string, ef policy.Effect) []string {
	pre := f.bucketSubject() + f.token(backend) + "."
	if ef.All {
		return []string{pre + ">"}
	}
	subs := []string{pre + "any.*"}
	seen := map[int]bool{}
	for _, k := range ef.Keys() {
		if i := slotOf(k); !seen[i] {
			seen[i] = true
			subs = append(subs, fmt.Sprintf("%ss%03x.*", pre, i))
		}
	}
	return subs
}

// ensureBucket creates (or updates) the results bucket with explicit
// limits. Called by restart, outside the lock.
func (f *Fleet) ensureBucket(ctx context.Context) (jetstream.KeyValue, jetstream.Stream, error) {
	kv, err := f.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:         f.resultsBucket(),
		Description:    "ahead: results of pure tools shared by the replicas of fleet " + f.opts.Name,
		History:        1,
		TTL:            f.opts.MaxResultAge,
		MaxBytes:       f.opts.MaxResultBytes,
		MaxValueSize:   int32(f.opts.MaxResultSize),
		Storage:        jetstream.MemoryStorage,
		LimitMarkerTTL: time.Second,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("fleet: results bucket %s: %w", f.resultsBucket(), err)
	}
	s, err := f.js.Stream(ctx, "KV_"+f.resultsBucket())
	if err != nil {
		return nil, nil, fmt.Errorf("fleet: results bucket %s: %w", f.resultsBucket(), err)
	}
	return kv, s, nil
}

// Mark returns the point of the invalidation stream this replica has
// applied, to be read before the engine checks that a result is still
// valid (engine.ResultSharer); ok is false while it is not caught up. It
// fences first (joining the replica's shared fence), so that the mark is
// the stream's end rather than how far this replica's consumer lags: a
// reader refuses a result if any write it applied came after the mark.
func (f *Fleet) Mark(ctx context.Context) (engine.Mark, bool) {
	if len(f.opts.Backends) == 0 || f.Fence(ctx, f.opts.Backends[0]) != nil {
		return engine.Mark{}, false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.synced || f.res.kv == nil {
		return engine.Mark{}, false
	}
	return engine.Mark{Epoch: f.res.epoch, Seq: f.applied}, true
}

// Share puts a result valid at mark into the bucket, in the background,
// for its remaining lifetime (engine.ResultSharer). A result too large,
// expired, of a backend this replica does not share, or of another epoch
// is not put.
func (f *Fleet) Share(backend string, key callkey.Key, r engine.SharedResult, mark engine.Mark) {
	ttl := time.Until(r.Expires)
	if _, ok := f.backend[f.subject(backend)]; !ok || ttl <= 0 {
		return
	}
	v := sharedValue{Replica: f.opts.Replica, Epoch: mark.Epoch, Seq: mark.Seq, Output: r.Output, Raw: r.Raw,
		TookNS: int64(r.Took), Expires: r.Expires.UnixNano(), Any: r.Footprint.Any, Res: r.Footprint.Resources}
	for _, p := range r.Footprint.Paths {
		v.Paths = append(v.Paths, p.Name)
	}
	data, err := json.Marshal(v)
	if err != nil || len(data) > f.opts.MaxResultSize {
		f.stats.shareTooBig.Add(1)
		return
	}
	// Kept in the bucket a whole second more at most; readers check the
	// exact expiry.
	f.enqueue(shareJob{key: f.resultKey(backend, key, r.Footprint), value: data, ttl: ttl.Truncate(time.Second) + time.Second})
}

// purgeResults purges from the bucket the results a write of ef on backend
// may change, in the background (Announce).
func (f *Fleet) purgeResults(backend string, ef policy.Effect) {
	if f.noPurge {
		return
	}
	f.mu.Lock()
	on := f.res.kv != nil
	f.mu.Unlock()
	if on {
		f.enqueue(shareJob{purge: f.purgeSubjects(backend, ef)})
	}
}

func (f *Fleet) enqueue(j shareJob) {
	select {
	case f.res.queue <- j:
	default:
		f.stats.shareDropped.Add(1)
	}
}

// Lookup returns a result of key on backend another replica (or this one)
// put in the bucket, once a fence has applied every write announced before
// the call, if none it applied since the result's mark may change it and
// it has not expired (engine.ResultSharer). It never fails: a result it
// cannot vouch for is not found.
func (f *Fleet) Lookup(ctx context.Context, backend string, key callkey.Key, fp policy.Footprint) (engine.SharedResult, bool) {
	subj := f.subject(backend)
	if _, ok := f.backend[subj]; !ok {
		return engine.SharedResult{}, false
	}
	f.mu.Lock()
	kv := f.res.kv
	f.mu.Unlock()
	if kv == nil {
		return engine.SharedResult{}, false
	}
	// The get runs beside the fence: what it finds is checked against
	// the writes applied once the fence is done, whenever it was read.
	type got struct {
		e   jetstream.KeyValueEntry
		err error
	}
	gctx, cancel := context.WithTimeout(ctx, f.opts.FenceTimeout)
	defer cancel()
	ch := make(chan got, 1)
	if !f.spawn(func() {
		e, err := kv.Get(gctx, f.resultKey(backend, key, fp))
		ch <- got{e, err}
	}) {
		return engine.SharedResult{}, false
	}
	if err := f.Fence(ctx, backend); err != nil {
		return engine.SharedResult{}, false
	}
	var g got
	select {
	case g = <-ch:
	case <-gctx.Done():
		g.err = gctx.Err()
	}
	e, err := g.e, g.err
	if err != nil {
		if !errors.Is(err, jetstream.ErrKeyNotFound) {
			f.stats.sharedErrors.Add(1)
		}
		return engine.SharedResult{}, false
	}
	var v sharedValue
	if err := json.Unmarshal(e.Value(), &v); err != nil {
		f.stats.sharedErrors.Add(1)
		return engine.SharedResult{}, false
	}
	now := time.Now()
	f.mu.Lock()
	c := f.res.clocks[backend]
	ok := f.synced && c != nil && v.Epoch == f.res.epoch && now.UnixNano() < v.Expires &&
		(f.noResultCheck || c.validLocked(v.Seq, v.footprint()))
	f.mu.Unlock()
	if !ok {
		f.stats.sharedRefused.Add(1)
		return engine.SharedResult{}, false
	}
	f.stats.sharedHits.Add(1)
	return engine.SharedResult{Output: v.Output, Raw: v.Raw, Took: time.Duration(v.TookNS), Expires: time.Unix(0, v.Expires), Footprint: fp}, true
}

// sharer sends the queued puts and purges, until Close.
func (f *Fleet) sharer() {
	for {
		var j shareJob
		select {
		case <-f.stop:
			return
		case j = <-f.res.queue:
		}
		f.mu.Lock()
		kv := f.res.kv
		f.mu.Unlock()
		if kv == nil || !f.up.Load() {
			f.stats.shareDropped.Add(1)
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), f.opts.AnnounceTimeout)
		var err error
		if j.purge != nil {
			for _, s := range j.purge {
				if err = f.purgeSubject(ctx, s); err != nil {
					break
				}
			}
			if err == nil {
				f.stats.sharedPurges.Add(1)
			}
		} else {
			_, err = f.js.Publish(ctx, f.bucketSubject()+j.key, j.value, jetstream.WithMsgTTL(j.ttl))
			if err == nil {
				f.stats.sharedPuts.Add(1)
			}
		}
		cancel()
		if err != nil {
			f.stats.shareDropped.Add(1)
			f.opts.Logger.Debug("fleet: sharing a result", "fleet", f.opts.Name, "err", err)
		}
	}
}

func (f *Fleet) purgeSubject(ctx context.Context, subj string) error {
	f.mu.Lock()
	s := f.res.stream
	f.mu.Unlock()
	if s == nil {
		return ErrDown
	}
	return s.Purge(ctx, jetstream.WithPurgeSubject(subj))
}

// ResultKeys returns how many results the bucket holds, for checks.
func (f *Fleet) ResultKeys(ctx context.Context) (int, error) {
	f.mu.Lock()
	s := f.res.stream
	f.mu.Unlock()
	if s == nil {
		return 0, ErrDown
	}
	info, err := s.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("fleet: results bucket: %w", err)
	}
	return int(info.State.Msgs), nil
}
