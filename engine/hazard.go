package engine

import (
	"github.com/ahead-dev/ahead/policy"
)

// Invalidation: the hazard of a write, a step of every call that is not
// read-only, taken when it arrives (Call) and again when it completes
// (finish). invalidateLocked is the one place a write is decided to
// invalidate speculative work; a fleet announcing writes to other replicas
// hooks in beside it.
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
	e.lock()
	if !e.st.closed && !ef.ReadOnly && !e.perSession[bname] {
		e.invalidateLocked(nil, bname, ef)
	}
	e.unlock()
}

// invalidateLocked applies the hazard ef of a write of session s (nil for a
// write another replica announced) on backend bname (see the comment at the
// top of this file).
func (e *Engine) invalidateLocked(s *session, bname string, ef policy.Effect) {
	if ef.ReadOnly {
		return
	}
	e.st.writes++ // no orphaned read that arrived before is joined (orphan.go)
	var cands []*entry
	if s != nil {
		for _, en := range s.entries {
			cands = append(cands, en)
		}
	}
	switch {
	case s == nil && (e.perSession[bname] || e.st.disabled&ruleAcrossSessions != 0):
		// Another replica's write reaches no session here.
	case e.perSession[bname] || e.st.disabled&ruleAcrossSessions != 0:
		// Only this session's data changed; its shared results too.
		for _, en := range e.st.shared {
			if en.from == s.id {
				cands = append(cands, en)
			}
		}
	case ef.All:
		for en := range e.st.hazards.all {
			cands = append(cands, en)
		}
	default:
		for en := range e.st.hazards.wild {
			cands = append(cands, en)
		}
		for _, r := range ef.Keys() {
			for en := range e.st.hazards.byRes[r] {
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
	if d := e.st.disabled; d != 0 {
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
