package fleet

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
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
// they are dropped and counted). The sharer sends all those waiting at
// once, coalesced (sendShares), so that it keeps up however many writes
// queue behind a slow request.

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

// Why a result found in the bucket was refused (Stats.SharedRefusedBy).
const (
	refusedWrite   = iota // a write applied since its mark may change it
	refusedResync         // valid only before this replica's last resync
	refusedEpoch          // valid on another stream (the server lost its store)
	refusedExpired        // past its lifetime
	refusedDown           // this replica not caught up
	refusedReasons
)

// refusedNames name the reasons, in /v1/stats and /metrics.
var refusedNames = [refusedReasons]string{"write", "resync", "epoch", "expired", "down"}

// checkLocked returns why a result with footprint fp, valid at seq, does
// not survive every announcement this replica applied since (-1: it
// does).
func (c *clock) checkLocked(seq uint64, fp policy.Footprint) int {
	if seq < c.floor {
		return refusedResync
	}
	if seq < c.all {
		return refusedWrite
	}
	if fp.Any {
		if seq < c.named {
			return refusedWrite
		}
		return -1
	}
	for _, k := range fp.Keys() {
		if seq < c.slot[slotOf(k)] {
			return refusedWrite
		}
	}
	return -1
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

// shareJob is a put or a purge waiting for the sharer.
type shareJob struct {
	key   string   // put: the bucket key
	value []byte   // put: the value
	purge []string // purge: subjects of the bucket's stream

	// put: what the value is valid at, checked again when it is sent.
	backend string
	mark    engine.Mark
	fp      policy.Footprint
	expires time.Time
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
	f.enqueue(shareJob{key: f.resultKey(backend, key, r.Footprint), value: data,
		backend: backend, mark: mark, fp: r.Footprint, expires: r.Expires})
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
	why := -1
	f.mu.Lock()
	switch c := f.res.clocks[backend]; {
	case !f.synced || c == nil:
		why = refusedDown
	case v.Epoch != f.res.epoch:
		why = refusedEpoch
	case now.UnixNano() >= v.Expires:
		why = refusedExpired
	case !f.noResultCheck:
		why = c.checkLocked(v.Seq, v.footprint())
	}
	f.mu.Unlock()
	if why >= 0 {
		f.stats.sharedRefused[why].Add(1)
		return engine.SharedResult{}, false
	}
	f.stats.sharedHits.Add(1)
	return engine.SharedResult{Output: v.Output, Raw: v.Raw, Took: time.Duration(v.TookNS), Expires: time.Unix(0, v.Expires), Footprint: fp}, true
}

// sharer sends the queued puts and purges, until Close: all those
// waiting at once, coalesced (sendShares).
//
// Issue 25: sent one request at a time, a replica's puts and purges came
// at a higher rate than one round trip each could carry under load (two
// cores at a load of 15, -race): the queue grew by about 70 jobs every 450
// sessions and never drained, so every result reached the bucket hundreds
// of announcements after its mark, where every reader refused it (a write
// since). Coalesced, a batch costs a request per distinct purge subject and
// a pipelined put per distinct result still valid, however many writes and
// results queued behind a slow one.
func (f *Fleet) sharer() {
	batch := make([]shareJob, 0, shareQueue)
	for {
		select {
		case <-f.stop:
			return
		case j := <-f.res.queue:
			batch = append(batch[:0], j)
		}
	drain:
		for len(batch) < shareQueue {
			select {
			case j := <-f.res.queue:
				batch = append(batch, j)
			default:
				break drain
			}
		}
		f.sendShares(batch)
		clear(batch) // the values are not kept until the next batch
	}
}

// sendShares sends a batch of puts and purges, in effect in their order:
// the purges (each subject once), then the puts that no later purge of the
// batch covers, the last of each key, if its result is still valid here
// (a put older than a write this replica applied would be refused by every
// reader: it is not sent).
func (f *Fleet) sendShares(batch []shareJob) {
	f.mu.Lock()
	kv := f.res.kv
	f.mu.Unlock()
	if kv == nil || !f.up.Load() {
		f.stats.shareDropped.Add(int64(len(batch)))
		return
	}
	subjects, purges, puts := f.coalesce(batch)
	f.stats.shareSuperseded.Add(int64(len(batch) - purges - len(puts)))
	ctx, cancel := context.WithTimeout(context.Background(), f.opts.AnnounceTimeout)
	defer cancel()
	if len(subjects) > 0 {
		var err error
		for _, subj := range subjects {
			if err = f.purgeSubject(ctx, subj); err != nil {
				break
			}
		}
		if err != nil {
			f.stats.shareDropped.Add(int64(purges))
			f.opts.Logger.Debug("fleet: purging shared results", "fleet", f.opts.Name, "err", err)
		} else {
			f.stats.sharedPurges.Add(int64(purges))
		}
	}
	now := time.Now()
	var acks []jetstream.PubAckFuture
	for _, j := range puts {
		f.mu.Lock()
		c := f.res.clocks[j.backend]
		valid := c != nil && j.mark.Epoch == f.res.epoch && now.Before(j.expires) && c.checkLocked(j.mark.Seq, j.fp) < 0
		f.mu.Unlock()
		if !valid {
			f.stats.shareSuperseded.Add(1)
			continue
		}
		// Kept in the bucket a whole second more at most; readers check
		// the exact expiry.
		ttl := j.expires.Sub(now).Truncate(time.Second) + time.Second
		a, err := f.sharejs.PublishAsync(f.bucketSubject()+j.key, j.value, jetstream.WithMsgTTL(ttl))
		if err != nil {
			f.stats.shareDropped.Add(1)
			f.opts.Logger.Debug("fleet: sharing a result", "fleet", f.opts.Name, "err", err)
			continue
		}
		acks = append(acks, a)
	}
	for i, a := range acks {
		select {
		case <-a.Ok():
			f.stats.sharedPuts.Add(1)
		case err := <-a.Err():
			f.stats.shareDropped.Add(1)
			f.opts.Logger.Debug("fleet: sharing a result", "fleet", f.opts.Name, "err", err)
		case <-ctx.Done():
			// Not acknowledged in time: counted as dropped (they may
			// still land, checked by their readers as any other); the
			// futures end with sharejs's async publish timeout.
			f.stats.shareDropped.Add(int64(len(acks) - i))
			return
		case <-f.stop:
			return
		}
	}
}

// coalesce returns what a batch of puts and purges comes to, in effect:
// the subjects to purge (each once), how many writes they purge for, and
// the puts to send after them: the last of each key, unless a later purge
// of the batch covers it.
func (f *Fleet) coalesce(batch []shareJob) (subjects []string, purges int, puts []shareJob) {
	seen := make(map[string]bool)
	last := make(map[string]int)               // key → its last put in batch
	groups := make(map[string]map[string]bool) // TOKEN.GROUP → keys of last
	pre := f.bucketSubject()
	for i, j := range batch {
		if j.purge == nil {
			last[j.key] = i
			g := j.key[:strings.LastIndexByte(j.key, '.')]
			if groups[g] == nil {
				groups[g] = make(map[string]bool)
			}
			groups[g][j.key] = true
			continue
		}
		purges++
		for _, subj := range j.purge {
			if !seen[subj] {
				seen[subj] = true
				subjects = append(subjects, subj)
			}
			// The puts before it that it purges would not survive it.
			if g, ok := strings.CutSuffix(strings.TrimPrefix(subj, pre), ".*"); ok {
				for key := range groups[g] {
					delete(last, key)
				}
				delete(groups, g)
				continue
			}
			for key := range last {
				if subjectMatches(subj, pre+key) {
					delete(last, key)
				}
			}
		}
	}
	for i, j := range batch {
		if k, ok := last[j.key]; ok && k == i && j.purge == nil {
			puts = append(puts, j)
		}
	}
	return subjects, purges, puts
}

// subjectMatches reports whether subj matches the pattern of a purge
// (purgeSubjects: one ending in ">" or ".*").
func subjectMatches(pattern, subj string) bool {
	if p, ok := strings.CutSuffix(pattern, ">"); ok {
		return strings.HasPrefix(subj, p)
	}
	if p, ok := strings.CutSuffix(pattern, "*"); ok {
		rest, ok := strings.CutPrefix(subj, p)
		return ok && rest != "" && !strings.Contains(rest, ".")
	}
	return pattern == subj
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
