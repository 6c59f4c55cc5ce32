package engine

import (
	"encoding/json"
	"slices"
	"time"

	"github.com/ahead-dev/ahead/callkey"
	"github.com/ahead-dev/ahead/policy"
	"github.com/ahead-dev/ahead/predict"
)

// Freshness: what keeps a speculative result from going stale.
//
// Writes ahead sees invalidate by the hazard rule (policy.Effect.Invalidates),
// keyed by resource across sessions: a write reaches the entries of its own
// session on every backend, and, unless its backend keeps separate state per
// session (Backend.PerSession), the entries of every session on backends
// that do not, and all shared entries. Backends are not assumed to be
// independent of one another (two servers may front one file system); only
// PerSession narrows the reach. Writes are applied when they arrive and
// again when they complete: anything speculated while a write ran may have
// read the old state.
//
// Writes ahead does not see (another client, a cron job) are bounded only by
// the lifetime of a result: a tool's ttl, or by default twice the 95th
// percentile of the agents' recent think times (at most a minute), and for
// volatile tools the think window the result was started in.

// hazardIndex finds the entries a write in another session can reach: the
// shared entries and those on backends whose state is shared, by the
// resources they read. A session's own entries are found through the
// session (at most MaxSessionEntries of them).
type hazardIndex struct {
	all   map[*entry][]string            // every entry reachable across sessions → its keys
	wild  map[*entry]struct{}            // those that may depend on anything
	byRes map[string]map[*entry]struct{} // those reading a resource, by index key (Footprint.Keys)
}

func (x *hazardIndex) add(en *entry) {
	if x.all == nil {
		x.all = make(map[*entry][]string)
		x.wild = make(map[*entry]struct{})
		x.byRes = make(map[string]map[*entry]struct{})
	}
	if en.fp.Any {
		x.all[en] = nil
		x.wild[en] = struct{}{}
		return
	}
	keys := en.fp.Keys()
	x.all[en] = keys
	for _, r := range keys {
		m := x.byRes[r]
		if m == nil {
			m = make(map[*entry]struct{})
			x.byRes[r] = m
		}
		m[en] = struct{}{}
	}
}

func (x *hazardIndex) remove(en *entry) {
	keys, ok := x.all[en]
	if !ok {
		return
	}
	delete(x.all, en)
	delete(x.wild, en)
	for _, r := range keys {
		if m := x.byRes[r]; m != nil {
			delete(m, en)
			if len(m) == 0 {
				delete(x.byRes, r)
			}
		}
	}
}

// crossSession reports whether writes in other sessions can reach en: a
// shared entry, or one on a backend whose state is shared.
func (e *Engine) crossSession(en *entry) bool {
	return en.sess == nil || !e.perSession[en.backend]
}

// Invalidate applies a write another replica of a fleet announced on
// backend bname (see Fleet): as a write of no session here, it reaches the
// speculative results of every session sharing the backend's state, and the
// shared ones, by the hazard rule. A backend whose state is per session
// shares nothing across replicas: its writes are not applied.
func (e *Engine) Invalidate(bname string, ef policy.Effect) {
	e.mu.Lock()
	if !e.closed && !ef.ReadOnly && !e.perSession[bname] {
		e.invalidateLocked(nil, bname, ef)
	}
	e.unlock()
}

// fenceWantedLocked reports whether the speculative counterpart of a call
// with key can be reached by other replicas' writes, and so needs a fence
// (Options.Fleet) before it is handed over, and on which backend.
func (e *Engine) fenceWantedLocked(s *session, key callkey.Key, rule policy.Tool) (string, bool) {
	if e.opts.Fleet == nil {
		return "", false
	}
	en := s.entries[key]
	if en == nil && rule.Shared {
		en = e.shared[key]
	}
	if en == nil || en.level != policy.LevelFull || !e.crossSession(en) {
		return "", false
	}
	return en.backend, true
}

// invalidateLocked applies the hazard ef of a write of session s (nil for a
// write another replica announced) on backend bname (see the comment at the
// top of this file).
func (e *Engine) invalidateLocked(s *session, bname string, ef policy.Effect) {
	if ef.ReadOnly {
		return
	}
	var cands []*entry
	if s != nil {
		for _, en := range s.entries {
			cands = append(cands, en)
		}
	}
	switch {
	case s == nil && (e.perSession[bname] || e.disabled&ruleAcrossSessions != 0):
		// Another replica's write reaches no session here.
	case e.perSession[bname] || e.disabled&ruleAcrossSessions != 0:
		// Only this session's data changed; its shared results too.
		for _, en := range e.shared {
			if en.from == s.id {
				cands = append(cands, en)
			}
		}
	case ef.All:
		for en := range e.hazards.all {
			cands = append(cands, en)
		}
	default:
		for en := range e.hazards.wild {
			cands = append(cands, en)
		}
		for _, r := range ef.Keys() {
			for en := range e.hazards.byRes[r] {
				cands = append(cands, en)
			}
		}
	}
	for _, en := range cands {
		if !en.removed && e.invalidatesLocked(ef, en) {
			e.removeLocked(en, OutcomeInvalidated)
		}
	}
}

// invalidatesLocked applies the hazard rule to one entry, less the rules a
// mutation check has disabled.
func (e *Engine) invalidatesLocked(ef policy.Effect, en *entry) bool {
	if d := e.disabled; d != 0 {
		switch {
		case d&ruleSharedEntries != 0 && en.sess == nil,
			d&ruleUndescribed != 0 && ef.All,
			d&ruleUnnamedReads != 0 && en.fp.Any && !ef.All,
			d&ruleNotCancellable != 0 && !en.rule.IsCancellable():
			return false
		}
		if d&rulePathAliases != 0 {
			// Paths compared as cleaned strings only, as before issue 23.
			fp := en.fp
			ef.Paths, fp.Paths = nil, nil
			return ef.Invalidates(fp)
		}
	}
	return ef.Invalidates(en.fp)
}

// rule is one freshness rule, named so that the mutation check (see
// export_test.go and TestMutationsFailDifferential) can turn it off and
// show that the differential test catches its absence. Engines outside
// tests have every rule on.
type rule uint

const (
	ruleCompletion     rule = 1 << iota // writes invalidate again when they complete
	ruleAcrossSessions                  // writes reach other sessions
	ruleSharedEntries                   // writes reach shared entries
	ruleUndescribed                     // a write the policy does not describe reaches everything
	ruleUnnamedReads                    // a declared write reaches reads that name no resource
	ruleVolatile                        // volatile results live one think window
	ruleNotCancellable                  // non-cancellable work is invalidated too
	rulePathAliases                     // paths conflict as the files they may name (policy.Path)
)

// staleLocked reports whether a volatile entry is claimed outside the think
// window it was started in: by another session, or after a later
// authoritative result of its own.
func (e *Engine) staleLocked(en *entry, s *session) bool {
	if !en.rule.Volatile || e.disabled&ruleVolatile != 0 {
		return false
	}
	return en.from != s.id || en.window != s.results
}

// dropStaleLocked discards the session's volatile entries from earlier
// think windows, once a new authoritative result has arrived.
func (e *Engine) dropStaleLocked(s *session) {
	for _, en := range s.entries {
		if e.staleLocked(en, s) {
			e.removeLocked(en, OutcomeExpired)
		}
	}
}

// ttlLocked returns how long a result of a tool with rule stays reusable:
// the rule's ttl, else Options.DefaultTTL if set, else a minute for shared
// results and, for the others, twice the 95th percentile of recent think
// times (at least DefaultThink, at most a minute; 4×DefaultThink until
// enough are measured): a result is meant for a
// call in the next think window or so, and the shorter it lives, the less
// a write ahead does not see can make it stale.
func (e *Engine) ttlLocked(rule policy.Tool) time.Duration {
	switch {
	case rule.TTL > 0:
		return rule.TTL
	case e.opts.DefaultTTL > 0:
		return e.opts.DefaultTTL
	case rule.Shared:
		return maxTTL
	}
	// Before enough think times are measured, DefaultThink stands for their
	// mean and twice it for their 95th percentile.
	return min(max(2*e.thinks.p95(2*e.opts.DefaultThink), e.opts.DefaultThink), maxTTL)
}

// An expired result is run again while the agent is still thinking
// about the call it was predicted for: a long think (a user who takes
// minutes to answer) then finds a result as fresh as a short one does,
// where keeping the old result longer would let a write ahead does not see
// make it stale. maxRefreshes bounds the runs of one prediction in one
// think window, and each run spends amplification budget as any other.
const maxRefreshes = 2

// refreshableLocked reports whether an expired entry's call should run
// again: a full run of a session's own that succeeded, predicted (again)
// for the call the session has not made yet (no call since, none in flight),
// refreshed fewer than maxRefreshes times, as likely as the budget now
// asks of new work, and still allowed by the policy.
func (e *Engine) refreshableLocked(en *entry) bool {
	s := en.sess
	if s == nil || s.gone || e.closed || e.quiet || en.refreshes >= maxRefreshes {
		return false
	}
	if !en.done || en.err != nil || en.resp.IsError || en.level != policy.LevelFull || en.req.Tool != en.key.Tool {
		return false
	}
	if en.latest != s.seq || s.inflight > 0 || en.p < e.minProbabilityLocked() {
		return false
	}
	pol := e.policy.Load()
	return pol != nil && pol.Lookup(en.key.Tool).Level() == policy.LevelFull
}

// refreshLocked offers the call of an expired entry again, as the same
// prediction (see refreshableLocked).
func (e *Engine) refreshLocked(en *entry, now time.Time) {
	bname, b, ok := e.route(en.key.Tool)
	if !ok || bname != en.backend {
		return
	}
	s := en.sess
	c := candidate{
		pred:    predict.Prediction{Tool: en.key.Tool, Args: json.RawMessage(en.key.Args), P: en.p},
		key:     en.key,
		rule:    e.policy.Load().Lookup(en.key.Tool),
		level:   en.level,
		backend: bname,
		b:       b,
		req:     en.req,
		utility: en.utility,
		origins: en.origins,
		raw:     en.raw,
		fp:      &en.fp,
	}
	// Offered for the position it is predicted for now (en.latest, the
	// session's next call), so that it may be refreshed again.
	e.offerLocked(s, en.latest, c, now)
	if ne := s.entries[en.key]; ne != nil && ne != en {
		ne.refreshes = en.refreshes + 1
	}
}

// maxTTL is the default lifetime of shared results and the longest default
// lifetime of others.
const maxTTL = time.Minute

// thinkTimes keeps the latest think times of all sessions and their 95th
// percentile.
type thinkTimes struct {
	ring   [256]time.Duration
	n      int // samples seen
	cached time.Duration
}

// minThinkSamples is how many think times are needed before their
// percentile replaces the configured default.
const minThinkSamples = 16

func (q *thinkTimes) observe(d time.Duration) {
	q.ring[q.n%len(q.ring)] = d
	q.n++
	if q.n >= minThinkSamples && (q.n <= len(q.ring) || q.n%16 == 0) {
		// Recomputed every 16 samples once the ring is full: sorting 256
		// durations per call would cost more than it tells.
		s := slices.Clone(q.ring[:min(q.n, len(q.ring))])
		slices.Sort(s)
		q.cached = s[(len(s)*95+99)/100-1]
	}
}

// p95 returns the 95th percentile of the latest think times, or def before
// enough are known.
func (q *thinkTimes) p95(def time.Duration) time.Duration {
	if q.n < minThinkSamples {
		return def
	}
	return q.cached
}
