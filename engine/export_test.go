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
	e.lock()
	e.st.disabled |= r
	e.unlock()
}

// ThinkSamples returns how many think times the engine has counted.
func ThinkSamples(e *Engine) int {
	e.lock()
	defer e.unlock()
	return e.st.thinks.n
}

// Sessions returns the ids of the sessions the engine keeps, sorted.
func Sessions(e *Engine) []string {
	e.lock()
	defer e.unlock()
	return slices.Sorted(maps.Keys(e.st.sessions))
}

// OnFiled makes the engine call f, under its lock, each time a
// speculative result is filed (ready to be reused). f must not block.
func OnFiled(e *Engine, f func()) {
	e.lock()
	e.st.onFiled = f
	e.unlock()
}
