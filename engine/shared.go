package engine

import (
	"context"
	"encoding/json"
	"time"

	"github.com/ahead-dev/ahead/backend"
	"github.com/ahead-dev/ahead/callkey"
	"github.com/ahead-dev/ahead/policy"
)

// Results shared between the replicas of a fleet: a speculative result of a
// tool marked shared (a pure function) that completed on one replica may
// serve an agent's call on another (package fleet, results.go).

// Mark is a point of a fleet's stream of announced writes: a result still
// valid when its replica had applied every write up to it (Epoch names the
// stream: points of another mean nothing).
type Mark struct {
	Epoch int64
	Seq   uint64
}

// SharedResult is a result another replica may reuse.
type SharedResult struct {
	Output string
	// Raw is the result's front-specific form (backend.Response.Raw)
	// encoded by its backend's backend.RawCodec; nil when it has none.
	Raw       json.RawMessage
	Took      time.Duration // how long the tool ran
	Expires   time.Time     // the end of its lifetime (its tool's TTL)
	Footprint policy.Footprint
}

// ResultSharer is a Fleet that also shares results of shared tools. An
// engine whose Options.Fleet is one reads Mark before it checks, inside its
// door, that a completed shared result is still valid, then Shares it; and
// a call of a shared tool without a result on this replica asks Lookup,
// which vouches for what it returns (the fence, and no write applied since
// the result's mark may change it) or finds nothing. A result with a
// front-specific form (backend.Response.Raw, an MCP upstream's whole
// result) travels with it when its backend is a backend.RawCodec (the MCP
// proxy's upstreams are), and stays with its replica otherwise.
type ResultSharer interface {
	Mark(ctx context.Context) (Mark, bool)
	Share(backend string, key callkey.Key, r SharedResult, mark Mark)
	Lookup(ctx context.Context, backend string, key callkey.Key, fp policy.Footprint) (SharedResult, bool)
}

// lookupWanted reports whether an authoritative call of a tool with rule on
// bname, without a speculative counterpart here, may be served by another
// replica's result.
func (e *Engine) lookupWanted(bname string, rule policy.Tool) bool {
	return e.sharer != nil && rule.Shared && rule.Level() == policy.LevelFull && rule.IsReadOnly() && !e.perSession[bname]
}

// fromFleet serves the call from a result another replica shared, if one
// can be vouched for.
func (c *authCall) fromFleet(ctx context.Context) (Result, bool) {
	fp := c.rule.FootprintIn(c.args, c.e.spaces[c.backend])
	r, ok := c.e.sharer.Lookup(ctx, c.backend, c.key, fp)
	if !ok {
		return Result{}, false
	}
	resp := backend.Response{Output: r.Output}
	if len(r.Raw) > 0 {
		// The front's form, as the tool's replica had it: without it the
		// agent would receive another shape (an MCP result rendered to
		// text), so a result that cannot be decoded is not reused.
		codec, ok := c.e.backends[c.backend].(backend.RawCodec)
		if !ok {
			return Result{}, false
		}
		raw, err := codec.DecodeRaw(r.Raw)
		if err != nil {
			c.e.opts.Logger.Warn("fleet: a shared result's raw form", "backend", c.backend, "tool", c.key.Tool, "err", err)
			return Result{}, false
		}
		resp.Raw = raw
	}
	c.toolTime = r.Took
	res := c.result(resp, Reused, r.Took)
	return res, true
}

// rawForFleet encodes a completed result's front-specific form for the
// fleet (SharedResult.Raw): nil for a result without one; ok is false when
// its backend cannot encode it (it is not shared).
func (e *Engine) rawForFleet(bname string, raw any) (json.RawMessage, bool) {
	if raw == nil {
		return nil, true
	}
	codec, ok := e.backends[bname].(backend.RawCodec)
	if !ok {
		return nil, false
	}
	data, err := codec.EncodeRaw(raw)
	if err != nil {
		e.opts.Logger.Warn("fleet: encoding a result's raw form", "backend", bname, "err", err)
		return nil, false
	}
	return data, true
}
