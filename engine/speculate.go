package engine

import (
	"cmp"
	"context"
	"encoding/json"
	"math"
	"slices"
	"time"

	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/ahead-dev/ahead/backend"
	"github.com/ahead-dev/ahead/callkey"
	"github.com/ahead-dev/ahead/policy"
	"github.com/ahead-dev/ahead/predict"
	"github.com/ahead-dev/ahead/sched"
)

// candidate is a prediction that passed the policy, with its utility.
type candidate struct {
	pred    predict.Prediction
	key     callkey.Key
	rule    policy.Tool
	level   policy.Level
	backend string
	b       backend.Backend
	req     backend.Request
	utility float64
	warmup  bool
	origins origins
	raw     [maxOrigins]float32 // each origin's p before calibration
	// fp is what its result may depend on, if known before the lock was
	// taken (footprints); nil: computed when offered.
	fp *policy.Footprint
}

// speculate filters predictions through the policy, deduplicates them,
// arbitrates several of one tool, and offers the survivors to the scheduler
// as speculative jobs of session s (whose next call will be seq).
//
// predBytes is what the predictor keeps for s after making preds
// (predictorBytes), or -1 if unknown; it is counted in the memory budget.
func (e *Engine) speculate(s *session, seq int, preds []predict.Prediction, predBytes int64) {
	if len(preds) == 0 && predBytes < 0 {
		return
	}
	now := time.Now()
	pol0, fps := e.footprints(preds)
	e.lock()
	defer e.unlock()
	if predBytes >= 0 {
		switch {
		case !s.gone:
			s.predBytes = predBytes
			e.resizeLocked(s)
			e.enforceBudgetLocked(now)
		case e.st.sessions[s.id] == nil && e.opts.Predictor != nil:
			// Dropped while the predictor observed it, which
			// made the predictor remember it again.
			e.st.tail.forget = append(e.st.tail.forget, s.id)
		}
	}
	if s.gone && len(preds) > 0 {
		// Join folded s into another session between the caller's
		// look-up and this lock (an Offer that unlocked to record): the
		// predictions are that session's now, for its next call.
		if into := e.resolveLocked(s.id); into != s.id {
			if t := e.st.sessions[into]; t != nil {
				s, seq = t, t.seq
			}
		}
	}
	if len(preds) == 0 || s.gone || e.st.closed || e.st.quiet {
		return
	}
	// Loaded inside the door: SetPolicy cancels what a new policy forbids under
	// it too, so nothing it forbids can slip in between.
	pol := e.policy.Load()
	if pol == nil {
		return
	}
	var cands []candidate
	byKey := make(map[callkey.Key]int, len(preds))
	minP := e.minProbabilityLocked() // the budget's price, for this batch
	for i, p := range preds {
		c, ok := e.candidateLocked(s, pol, p, minP)
		if !ok {
			continue
		}
		if pol == pol0 && fps != nil && fps[i].ok {
			c.fp = &fps[i].fp
		}
		if i, dup := byKey[c.key]; dup {
			c.origins |= cands[i].origins
			for j := range c.raw {
				c.raw[j] = max(c.raw[j], cands[i].raw[j])
			}
			if c.utility > cands[i].utility {
				cands[i] = c
			} else {
				cands[i].origins, cands[i].raw = c.origins, c.raw
			}
			continue
		}
		byKey[c.key] = len(cands)
		cands = append(cands, c)
	}
	for _, c := range arbitrate(pol, cands) {
		if c.warmup {
			e.warmLocked(s, c, now)
		} else {
			e.offerLocked(s, seq, c, now)
		}
	}
}

// footprints returns the footprint of each prediction's call under the
// policy it returns, where computing it may stat the paths' folders
// (policy.PathSpace.Local): that is done before the engine's lock is
// taken. The others are computed under the lock when offered, as cheap
// as here; nil when no prediction needs it (one allocation at most: this
// runs for every batch of predictions).
func (e *Engine) footprints(preds []predict.Prediction) (*policy.Policy, []earlyFootprint) {
	pol := e.policy.Load()
	if pol == nil {
		return pol, nil
	}
	var fps []earlyFootprint
	for i, p := range preds {
		bname, _, ok := e.route(p.Tool)
		if !ok || p.Args == nil || !e.spaces[bname].Local {
			continue
		}
		if fps == nil {
			fps = make([]earlyFootprint, len(preds))
		}
		fps[i] = earlyFootprint{pol.Lookup(p.Tool).FootprintIn(p.Args, e.spaces[bname]), true}
	}
	return pol, fps
}

// earlyFootprint is a footprint computed before the lock (ok).
type earlyFootprint struct {
	fp policy.Footprint
	ok bool
}

// candidateLocked checks a prediction against the policy and routing,
// makes its p honest (calibrate.go), and computes its utility U = p·T/(c·d):
// d the tool's expected duration, T the expected saving min(d, expected
// think time), c the slots it takes (1). minP is the probability the
// amplification budget asks for now.
func (e *Engine) candidateLocked(s *session, pol *policy.Policy, p predict.Prediction, minP float64) (candidate, bool) {
	if p.P < e.opts.MinProbability || p.Tool == "" {
		return candidate{}, false
	}
	rule := pol.Lookup(p.Tool)
	level := rule.Level()
	if level == policy.LevelNone {
		return candidate{}, false
	}
	bname, b, ok := e.route(p.Tool)
	if !ok {
		return candidate{}, false
	}
	ts := e.toolLocked(p.Tool) // a routed tool: bounded by the routes
	raw := p.P
	p.P = ts.honest(p.Origin, raw)
	if p.P < e.opts.MinProbability {
		return candidate{}, false
	}
	if p.P < minP {
		e.declineLocked(p.Tool)
		return candidate{}, false
	}
	d := ts.dur.value(e.opts.DefaultDuration)
	think := ts.think.value(e.opts.DefaultThink)
	d = max(d, time.Millisecond)
	u := p.P * float64(min(d, think)) / float64(d)
	c := candidate{pred: p, rule: rule, level: level, backend: bname, b: b, utility: u, origins: originBit(p.Origin)}
	if i := originIndex(p.Origin); i >= 0 {
		c.raw[i] = float32(raw)
	}
	if level == policy.LevelDryRun && !rule.DryRun.Declared(p.Tool) {
		level = policy.LevelWarmup // no safe variant: never run the call itself
	}
	if p.Args == nil || level == policy.LevelWarmup {
		if _, ok := b.(backend.Warmer); !ok {
			return candidate{}, false
		}
		c.warmup = true
		c.key = callkey.Key{Tool: p.Tool} // one warm-up per tool
		return c, true
	}
	key, err := callkey.Make(p.Tool, p.Args)
	if err != nil {
		return candidate{}, false
	}
	c.key = key
	c.req = backend.Request{Session: s.id, Tool: p.Tool, Args: json.RawMessage(key.Args), Speculative: true}
	if level == policy.LevelDryRun {
		req, ok := dryRunVariant(rule.DryRun, c.req)
		if !ok {
			return candidate{}, false
		}
		if req.Tool != p.Tool {
			// The variant runs as the tool it names, on that tool's
			// backend, and only if the policy lets that tool run at any
			// time: allowed and read-only.
			vr := pol.Lookup(req.Tool)
			if vr.Level() == policy.LevelNone || !vr.IsReadOnly() {
				return candidate{}, false
			}
			if c.backend, c.b, ok = e.route(req.Tool); !ok {
				return candidate{}, false
			}
		}
		c.req = req
	}
	return c, true
}

// minProbabilityLocked is the least probability a prediction needs to be
// run now: MinProbability while at least half the amplification budget is
// saved up, rising geometrically to 0.5 as it runs out. What a scarce
// budget declines is then the least likely work, wherever it comes from,
// not whatever happens to arrive once it is spent.
func (e *Engine) minProbabilityLocked() float64 {
	floor := e.opts.MinProbability
	if e.opts.Amplification <= 0 || floor >= 0.5 {
		return floor
	}
	fill := e.st.tokens / e.opts.AmplificationBurst
	if fill >= 0.5 {
		return floor
	}
	return floor * math.Pow(0.5/floor, 1-2*max(fill, 0))
}

// declineLocked counts a prediction not run for want of amplification
// budget.
func (e *Engine) declineLocked(tool string) {
	e.st.totals.Declined++
	e.metrics.declined.WithLabelValues(e.metrics.tool(tool)).Inc()
}

// dryRunVariant returns the safe variant of a call: its arguments patched
// and its tool possibly renamed (the caller checked one is declared).
func dryRunVariant(d policy.DryRun, req backend.Request) (backend.Request, bool) {
	if d.Tool != "" {
		req.Tool = d.Tool
	}
	if d.Args != nil {
		var args, patch map[string]json.RawMessage
		if json.Unmarshal(req.Args, &args) != nil || json.Unmarshal(d.Args, &patch) != nil {
			return req, false
		}
		if args == nil {
			args = make(map[string]json.RawMessage)
		}
		for k, v := range patch {
			args[k] = v
		}
		raw, err := json.Marshal(args)
		if err != nil {
			return req, false
		}
		c, err := callkey.Canonical(raw)
		if err != nil {
			return req, false
		}
		req.Args = c
	}
	return req, true
}

// arbitrate applies the policy's deduplication strategy to several
// candidates of the same tool, and orders the survivors best first.
func arbitrate(pol *policy.Policy, cands []candidate) []candidate {
	strategy, perTool := pol.Strategy()
	better := func(a, b candidate) int {
		if strategy == policy.StrategyMaxProbability {
			if c := cmp.Compare(b.pred.P, a.pred.P); c != 0 {
				return c
			}
		}
		return cmp.Compare(b.utility, a.utility)
	}
	slices.SortStableFunc(cands, better)
	if strategy == policy.StrategyAll {
		return cands
	}
	kept := cands[:0]
	perToolCount := make(map[string]int)
	for _, c := range cands {
		if perToolCount[c.pred.Tool] >= perTool {
			continue
		}
		perToolCount[c.pred.Tool]++
		kept = append(kept, c)
	}
	return kept
}

// offerLocked creates a speculative entry for a candidate unless one exists,
// making room by evicting lower-utility work if the memory limits demand it.
func (e *Engine) offerLocked(s *session, seq int, c candidate, now time.Time) {
	if old := s.entries[c.key]; old != nil {
		old.latest = max(old.latest, seq)
		e.joinLocked(old, c)
		return
	}
	if _, ok := s.served[c.key]; ok && !c.pred.Repeat {
		// The agent already has this result and has written nothing
		// since: it will not ask again.
		return
	}
	if s.running[c.key] > 0 {
		// The session is making this very call now (a parallel call's
		// result predicted it): a second run would be pure waste.
		return
	}
	if c.rule.Shared {
		if sh := e.st.shared[c.key]; sh != nil && (!sh.done || sh.reusableLocked(now)) {
			e.joinLocked(sh, c)
			return
		}
	}
	capped := e.opts.Amplification > 0
	if capped && e.st.tokens < 1 {
		e.declineLocked(c.pred.Tool)
		return
	}
	if !e.makeRoomLocked(s, c.rule.Shared, c.utility) {
		return
	}
	if capped {
		e.st.tokens--
	}
	en := &entry{
		key:     c.key,
		rule:    c.rule,
		level:   c.level,
		p:       c.pred.P,
		origins: c.origins,
		raw:     c.raw,
		utility: c.utility,
		backend: c.backend,
		req:     c.req,
		from:    s.id,
		seq:     seq,
		latest:  seq,

		utilityAt: -1,
		filedAt:   -1,
	}
	e.st.byUtility.add(en)
	if c.fp != nil {
		en.fp = *c.fp
	} else {
		en.fp = c.rule.FootprintIn(json.RawMessage(c.key.Args), e.spaces[c.backend])
	}
	en.window = s.results
	if c.rule.Shared {
		if old := e.st.shared[c.key]; old != nil {
			e.removeLocked(old, OutcomeExpired)
		}
		e.st.shared[c.key] = en
	} else {
		en.sess = s
		s.entries[c.key] = en
	}
	if e.crossSession(en) {
		e.st.hazards.add(en)
	}
	e.st.count++
	c.origins.each(func(o predict.Origin) { e.originLocked(o).Offered++ })
	b := c.b
	en.job = e.sched.Submit(sched.Spec{
		Backend:        c.backend,
		Utility:        c.utility,
		Deadline:       now.Add(e.startDeadlineLocked(c.pred.Tool)),
		NotCancellable: !c.rule.IsCancellable(),
		Run:            func(ctx context.Context) { e.runSpec(ctx, en, b) },
	})
}

// joinLocked merges a candidate into the entry that already runs its call:
// the entry keeps the better probability and utility (its eviction rank),
// and every origin that predicted it is credited with its outcome.
func (e *Engine) joinLocked(en *entry, c candidate) {
	if en.removed {
		return
	}
	c.origins.each(func(o predict.Origin) {
		if en.origins&originBit(o) == 0 {
			e.originLocked(o).Offered++
		}
	})
	en.origins |= c.origins
	for i := range en.raw {
		en.raw[i] = max(en.raw[i], c.raw[i])
	}
	en.p = max(en.p, c.pred.P)
	en.utility = max(en.utility, c.utility)
	e.st.byUtility.fix(en)
	e.st.filed.fix(en)
}

// predictorBytes returns what the predictor keeps for a session, or -1 if
// it does not say.
func (e *Engine) predictorBytes(session string) int64 {
	if sz, ok := e.opts.Predictor.(SessionSizer); ok {
		return sz.SessionBytes(session)
	}
	return -1
}

func (e *Engine) startDeadlineLocked(tool string) time.Duration {
	if e.opts.StartDeadline > 0 {
		return e.opts.StartDeadline
	}
	return max(e.toolLocked(tool).think.value(e.opts.DefaultThink), 100*time.Millisecond)
}

// warmLocked asks the backend to warm up for a tool-only prediction, at
// most once per tool per TTL in a session.
func (e *Engine) warmLocked(s *session, c candidate, now time.Time) {
	w := c.b.(backend.Warmer)
	if t, ok := s.warmed[c.pred.Tool]; ok && now.Sub(t) < e.ttlLocked(c.rule) {
		return
	}
	if len(s.warmed) >= 256 {
		clear(s.warmed) // bounded: a predictor may name many tools
	}
	s.warmed[c.pred.Tool] = now
	e.st.totals.Warmups++
	req := backend.Request{Session: s.id, Tool: c.pred.Tool, Speculative: true}
	e.sched.Submit(sched.Spec{
		Backend:  c.backend,
		Utility:  c.utility,
		Deadline: now.Add(e.startDeadlineLocked(req.Tool)),
		Run:      func(ctx context.Context) { _ = w.Warmup(ctx, req) },
	})
}

// runSpec executes a speculative entry (the scheduler calls it when a slot
// is free) and files its result.
func (e *Engine) runSpec(ctx context.Context, en *entry, b backend.Backend) {
	e.lock()
	if en.removed && en.outcome != "" {
		// Invalidated or cancelled while it was starting: do not run.
		e.unlock()
		return
	}
	en.ran = true
	en.started = time.Now()
	e.st.totals.SpecStarted++
	e.toolLocked(en.key.Tool).specStarted++
	en.origins.each(func(o predict.Origin) { e.originLocked(o).Started++ })
	e.st.tail.started, e.st.tail.hasStarted = en.key.Tool, true
	e.unlock()

	var span oteltrace.Span
	if e.tracer != nil {
		ctx, span = e.startSpecSpan(ctx, en)
	}
	resp, err := b.Call(ctx, en.req)
	if err == nil && ctx.Err() != nil {
		err = ctx.Err() // cancelled: whatever came back is not trusted
	}
	now := time.Now()
	if span != nil {
		endSpecSpan(span, resp, err)
	}
	// Read before the entry is seen still valid below: every write the
	// fleet applied up to the mark has been checked against it.
	var mark Mark
	var raw json.RawMessage
	marked := false
	if e.sharer != nil && en.sess == nil && err == nil && !resp.IsError {
		var ok bool
		if raw, ok = e.rawForFleet(en.backend, resp.Raw); ok {
			mark, marked = e.sharer.Mark(ctx)
		}
	}
	var share *SharedResult

	e.lock()
	en.done = true
	en.resp, en.err = resp, err
	en.finished = now
	en.expires = now.Add(e.ttlLocked(en.rule))
	if err == nil && en.req.Tool == en.key.Tool {
		e.toolLocked(en.key.Tool).dur.observe(now.Sub(en.started))
	}
	switch {
	case en.removed:
		if en.outcome != "" {
			e.settleLocked(en, en.outcome) // removed while it ran
		}
		// else claimed by an authoritative call, which settles it.
	case err == nil && resp.NeedsInput:
		// Only the agent may answer for its user: the run is discarded,
		// and counted apart from failures.
		e.removeLocked(en, OutcomeNeedsInput)
	case err != nil || resp.IsError:
		why := OutcomeFailed
		if en.job.State() == sched.Preempted {
			why = OutcomePreempted
		}
		e.removeLocked(en, why)
	default:
		en.size = int64(len(resp.Output) + len(en.key.Args) + entryOverhead)
		e.st.bytes += en.size
		if en.sess != nil {
			en.sess.bytes += en.size
		}
		e.st.filed.add(en)
		if marked && en.level == policy.LevelFull && e.crossSession(en) && en.req.Tool == en.key.Tool {
			share = &SharedResult{Output: resp.Output, Raw: raw, Took: now.Sub(en.started), Expires: en.expires, Footprint: en.fp}
		}
		e.enforceBytesLocked(en.sess, now)
		if e.st.onFiled != nil {
			e.st.onFiled()
		}
	}
	e.unlock()
	if share != nil {
		e.sharer.Share(en.backend, en.key, *share, mark)
	}
	if resp.RetryAfter > 0 {
		e.sched.Backoff(en.backend, resp.RetryAfter)
	}
}

// entryOverhead approximates an entry's fixed memory cost in bytes.
const entryOverhead = 512

// makeRoomLocked makes space for one more entry of utility u in session s
// (or in the shared cache), evicting lower-utility entries. It reports
// false if everything in the way is worth more.
func (e *Engine) makeRoomLocked(s *session, shared bool, u float64) bool {
	if !shared {
		for len(s.entries) >= e.opts.MaxSessionEntries {
			v := lowest(s.entries, nil)
			if v == nil || v.utility >= u {
				return false
			}
			e.removeLocked(v, OutcomeEvicted)
		}
	}
	for e.st.count >= e.opts.MaxEntries {
		v := e.st.byUtility.top()
		if v == nil || v.utility >= u {
			return false
		}
		e.removeLocked(v, OutcomeEvicted)
	}
	return true
}

// enforceBytesLocked evicts the lowest-utility completed results of session
// s until its byte limit holds, then keeps the global budget
// (enforceBudgetLocked).
func (e *Engine) enforceBytesLocked(s *session, now time.Time) {
	done := func(en *entry) bool { return en.done }
	for s != nil && s.bytes > e.opts.MaxSessionBytes {
		v := lowest(s.entries, done)
		if v == nil {
			break
		}
		e.removeLocked(v, OutcomeEvicted)
	}
	e.enforceBudgetLocked(now)
}

// lowest scans one session's entries (at most MaxSessionEntries).
func lowest(m map[callkey.Key]*entry, keep func(*entry) bool) *entry {
	var v *entry
	for _, en := range m {
		if keep != nil && !keep(en) {
			continue
		}
		if v == nil || en.utility < v.utility {
			v = en
		}
	}
	return v
}
