// Package policy decides what ahead may run speculatively and what a call
// may have changed. It owns the speculation policy: the PASTE paper's
// Figure 6 shape (default, tools, deduplication) extended with hazards
// (reads/writes, compared as identifiers, paths or URLs), shared results
// with a TTL, volatile and non-cancellable tools and the dry-run and warm-up
// levels. Effect.Invalidates is the hazard rule, used by the engine and the
// replay benchmark alike. Parse, FromNode and Load read it from YAML
// with errors that name file:line:column and the field.
//
// The zero Policy denies all speculation: nothing with a side effect is ever
// executed speculatively unless the operator's policy says so.
package policy

import (
	"encoding/json"
	"path"
	"time"
)

// Level is how far a tool may be speculated, from LevelNone up to LevelFull.
type Level int

const (
	// LevelNone: never speculated.
	LevelNone Level = iota
	// LevelWarmup: only the backend's warm-up (start or connect an
	// upstream); the tool itself never runs.
	LevelWarmup
	// LevelDryRun: a declared safe variant runs (an argument patch such as
	// {dry_run: true}, or another tool); its result only warms caches and
	// is never handed to the agent. Without a declared variant, the tool
	// is only warmed up: the call itself would run its side effect.
	LevelDryRun
	// LevelFull: the predicted call runs and its result is reusable.
	LevelFull
)

var levelNames = [...]string{"none", "warmup", "dry_run", "full"}

func (l Level) String() string {
	if l < 0 || int(l) >= len(levelNames) {
		return "invalid"
	}
	return levelNames[l]
}

// ParseLevel returns the level named s.
func ParseLevel(s string) (Level, bool) {
	for i, n := range levelNames {
		if n == s {
			return Level(i), true
		}
	}
	return LevelNone, false
}

// Dedup strategies for several predictions of the same tool.
const (
	// StrategyMaxUtility keeps, per tool, the predictions with the highest
	// expected speculative utility (MaxPerTool of them).
	StrategyMaxUtility = "max_expected_speculative_utility"
	// StrategyMaxProbability keeps the most probable ones.
	StrategyMaxProbability = "max_probability"
	// StrategyAll keeps every distinct call (one per call key).
	StrategyAll = "all"
)

// DefaultMaxPerTool is how many predictions of one tool are speculated
// after one event when the policy says nothing. The paper's policy runs
// one, but agents fetch whole lists in one step (the reservations of a
// user, the files of a directory) and the conversation names several
// candidates: one per tool left a third of the gain on the shared tau2
// sessions. The engine's amplification budget, not this cap, bounds the
// waste.
const DefaultMaxPerTool = 8

// Dedup arbitrates several predictions of one tool.
type Dedup struct {
	// Strategy is one of the Strategy constants; "" means StrategyMaxUtility.
	Strategy string
	// MaxPerTool is how many predictions of one tool may be speculated
	// after one event; 0 means DefaultMaxPerTool.
	MaxPerTool int
}

// DryRun is the safe variant of a tool run at LevelDryRun.
type DryRun struct {
	// Tool is the variant's tool name; "" means the same tool.
	Tool string
	// Args is a JSON object merged over the predicted arguments
	// (for example {"dry_run": true}); nil means no patch.
	Args json.RawMessage
}

// Declared reports whether a variant is declared: an argument patch, or a
// tool other than the one it belongs to.
func (d DryRun) Declared(tool string) bool {
	return d.Args != nil || (d.Tool != "" && d.Tool != tool)
}

// Tool is the rule for one tool.
type Tool struct {
	// Allow permits speculation at all; false means LevelNone.
	Allow bool
	// MaxSpeculation is the highest level allowed; with Allow and no level
	// given, LevelFull.
	MaxSpeculation Level
	// DryRun is the variant run at LevelDryRun.
	DryRun DryRun
	// ReadOnly declares the tool free of side effects: calling it
	// invalidates nothing. Nil means derived: read-only if Reads is set or
	// the tool may be speculated in full (an operator who lets ahead run a
	// tool at any time declares it safe to run at any time).
	ReadOnly *bool
	// Reads names the arguments that identify the resources the tool
	// reads (for example "path"). Speculative reads are invalidated by
	// writes to the same resources; a read that names none, by any write.
	Reads []Ref
	// Writes names the arguments that identify the resources the tool
	// writes. A call invalidates the speculative reads of those resources
	// (and the reads that name none) in every session that shares the
	// backend's state. A tool that is not read-only and names no resource
	// invalidates all speculative work there. See Effect.Invalidates.
	Writes []Ref
	// Shared marks a pure function (a web search): its speculative results
	// are cached across sessions for TTL.
	Shared bool
	// TTL is how long a speculative result stays reusable; 0 means the
	// engine's default (which follows the agents' measured think times).
	// It is the only bound on writes ahead does not see (another client,
	// a cron job).
	TTL time.Duration
	// Volatile marks a tool whose answer changes behind ahead's back (a
	// clock, a queue, a file other programs write): its speculative result
	// is reused only within the think window it was started in, never
	// after a later authoritative result of its session.
	Volatile bool
	// Private keeps the tool's outputs out of every prompt ahead sends to
	// a model (the speculator): they may hold what must not leave.
	Private bool
	// Cancellable false means speculative runs cannot be preempted or
	// cancelled, so on a backend with slots they only use slots beyond the
	// authoritative reserve (without slots, real calls never wait for them);
	// an invalidated run is left to finish and its result discarded. Nil
	// means true.
	Cancellable *bool
}

// Level returns the effective maximum speculation level.
func (t Tool) Level() Level {
	if !t.Allow {
		return LevelNone
	}
	if t.MaxSpeculation == LevelNone {
		return LevelFull
	}
	return t.MaxSpeculation
}

// IsReadOnly reports whether calling the tool changes nothing.
func (t Tool) IsReadOnly() bool {
	if t.ReadOnly != nil {
		return *t.ReadOnly
	}
	if len(t.Writes) > 0 {
		return false
	}
	return len(t.Reads) > 0 || t.Level() == LevelFull
}

// IsCancellable reports whether speculative runs may be preempted.
func (t Tool) IsCancellable() bool { return t.Cancellable == nil || *t.Cancellable }

// Glob is a rule for the tools whose names match a path.Match pattern.
type Glob struct {
	Pattern string
	Tool    Tool
}

// Policy is the whole speculation policy. Its zero value denies everything.
type Policy struct {
	// Default applies to tools named by no rule.
	Default Tool
	// Tools holds the rules for exact tool names.
	Tools map[string]Tool
	// Globs holds the rules with wildcard names, in file order; the first
	// match wins. An exact name always wins over a glob.
	Globs []Glob
	// Dedup arbitrates several predictions of one tool.
	Dedup Dedup
}

// Lookup returns the rule for tool. A nil Policy denies everything.
func (p *Policy) Lookup(tool string) Tool {
	if p == nil {
		return Tool{}
	}
	if t, ok := p.Tools[tool]; ok {
		return t
	}
	for _, g := range p.Globs {
		if ok, _ := path.Match(g.Pattern, tool); ok {
			return g.Tool
		}
	}
	return p.Default
}

// AnyShared reports whether p marks a tool shared (a pure function, whose
// results a fleet shares between replicas: its results bucket).
func (p *Policy) AnyShared() bool {
	if p == nil {
		return false
	}
	if p.Default.Shared {
		return true
	}
	for _, t := range p.Tools {
		if t.Shared {
			return true
		}
	}
	for _, g := range p.Globs {
		if g.Tool.Shared {
			return true
		}
	}
	return false
}

// Strategy returns the dedup strategy and how many predictions of one tool
// it keeps, with defaults filled in.
func (p *Policy) Strategy() (string, int) {
	if p == nil {
		return StrategyMaxUtility, DefaultMaxPerTool
	}
	s, n := p.Dedup.Strategy, p.Dedup.MaxPerTool
	if s == "" {
		s = StrategyMaxUtility
	}
	if n <= 0 {
		n = DefaultMaxPerTool
	}
	return s, n
}
