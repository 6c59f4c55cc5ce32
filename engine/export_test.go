package engine

import (
	"maps"
	"slices"
)

// Rules names the freshness rules the mutation check turns off one by one.
var Rules = map[string]rule{
	"completion":      ruleCompletion,
	"across-sessions": ruleAcrossSessions,
	"shared-entries":  ruleSharedEntries,
	"undescribed":     ruleUndescribed,
	"unnamed-reads":   ruleUnnamedReads,
	"volatile":        ruleVolatile,
	"not-cancellable": ruleNotCancellable,
	"path-aliases":    rulePathAliases,
}

// DisableRule turns a freshness rule off, for the mutation check only.
func DisableRule(e *Engine, name string) {
	r, ok := Rules[name]
	if !ok {
		panic("unknown rule " + name)
	}
	e.mu.Lock()
	e.disabled |= r
	e.mu.Unlock()
}

// ThinkSamples returns how many think times the engine has counted.
func ThinkSamples(e *Engine) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.thinks.n
}

// Sessions returns the ids of the sessions the engine keeps, sorted.
func Sessions(e *Engine) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Sorted(maps.Keys(e.sessions))
}
