package engine

import (
	"encoding/json"
	"slices"
	"time"

	"github.com/ahead-dev/ahead/policy"
	"github.com/ahead-dev/ahead/predict"
)

// Freshness: what keeps a speculative result from going stale. Writes
// ahead sees invalidate it (hazard.go). Writes ahead does not see (another client, a cron job) are bounded only by
// the lifetime of a result: a tool's ttl, or by default twice the 95th
// percentile of the agents' recent think times (at most a minute), and for
// volatile tools the think window the result was started in.

// staleLocked reports whether a volatile entry is claimed outside the think
// window it was started in: by another session, or after a later
// authoritative result of its own.
func (e *Engine) staleLocked(en *entry, s *session) bool {
	if !en.rule.Volatile || e.st.disabled&ruleVolatile != 0 {
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
	return min(max(2*e.st.thinks.p95(2*e.opts.DefaultThink), e.opts.DefaultThink), maxTTL)
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
	if s == nil || s.gone || e.st.closed || e.st.quiet || en.refreshes >= maxRefreshes {
		return false
	}
	if !en.done || en.err != nil || en.resp.IsError || en.resp.NeedsInput || en.level != policy.LevelFull || en.req.Tool != en.key.Tool {
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

// sweeper drops expired results and idle sessions until Close.
func (e *Engine) sweeper() {
	t := time.NewTicker(e.opts.SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-e.stop:
			return
		case now := <-t.C:
			e.sweep(now)
		}
	}
}

func (e *Engine) sweep(now time.Time) {
	e.lock()
	// Idle sessions come off the top of the idle heap, and the entries
	// are at most MaxEntries: a sweep does not visit every session.
	for e.st.idle.Len() > 0 && now.Sub(e.st.idle[0].lastActive) >= e.opts.IdleTimeout {
		e.dropSessionLocked(e.st.idle[0], OutcomeCancelled)
	}
	for _, en := range slices.Clone(e.st.byUtility.es) {
		e.sweepEntryLocked(en, now)
	}
	e.unlock() // the predictor forgets the dropped sessions
}

// sweepEntryLocked drops an entry whose result expired, or whose job ended
// without running (not started before its start deadline).
func (e *Engine) sweepEntryLocked(en *entry, now time.Time) {
	if en.expiredLocked(now) {
		en.refreshing = e.refreshableLocked(en)
		e.removeLocked(en, OutcomeExpired)
		if en.refreshing {
			e.refreshLocked(en, now)
		}
		return
	}
	if !en.done && !en.ran {
		select {
		case <-en.job.Done():
			e.removeLocked(en, OutcomeDropped)
		default:
		}
	}
}
