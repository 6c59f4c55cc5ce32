package mcpproxy

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path"
	"reflect"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ahead-dev/ahead/policy"
)

// AnnotationPolicy returns base (the operator's policy; nil denies all)
// with rules derived from the annotations of tools, which must come from
// upstreams the operator trusts (Upstream.TrustAnnotations), under their
// downstream names:
//   - readOnlyHint and openWorldHint false: speculated in full, read-only;
//   - readOnlyHint but open world (openWorldHint true, or absent: the spec's
//     default is true): read-only, never speculated — a tool that reaches
//     third parties speculates only when the operator's policy names it;
//   - anything else (writes, no annotations): never speculated, and a call
//     invalidates the session's speculative results.
//
// The operator's policy always wins: a tool named by one of its rules, or
// matched by one of its globs, keeps that rule. Annotations replace only
// the policy's default. base is not modified.
func AnnotationPolicy(base *policy.Policy, tools []*mcp.Tool) *policy.Policy {
	var out policy.Policy
	if base != nil {
		out = *base
	}
	out.Tools = maps.Clone(out.Tools)
	if out.Tools == nil {
		out.Tools = make(map[string]policy.Tool)
	}
	for _, t := range tools {
		if operatorRule(base, t.Name) {
			continue
		}
		out.Tools[t.Name] = annotationRule(t.Annotations)
	}
	return &out
}

func operatorRule(p *policy.Policy, tool string) bool {
	if p == nil {
		return false
	}
	if _, ok := p.Tools[tool]; ok {
		return true
	}
	for _, g := range p.Globs {
		if ok, _ := path.Match(g.Pattern, tool); ok {
			return true
		}
	}
	return false
}

func annotationRule(a *mcp.ToolAnnotations) policy.Tool {
	if a == nil || !a.ReadOnlyHint {
		return policy.Tool{ReadOnly: new(false)}
	}
	if a.OpenWorldHint != nil && !*a.OpenWorldHint {
		return policy.Tool{Allow: true, MaxSpeculation: policy.LevelFull, ReadOnly: new(true)}
	}
	return policy.Tool{ReadOnly: new(true)}
}

// TrustedTools connects once to every upstream that trusts its annotations
// and returns its tools under their downstream names, for
// AnnotationPolicy: the engine's policy before any agent connects. Tools
// that upstreams add or re-annotate later reach the policy when sessions
// list them (see Attach).
func (p *Proxy) TrustedTools(ctx context.Context) ([]*mcp.Tool, error) {
	var tools []*mcp.Tool
	for _, u := range p.ups {
		if !u.TrustAnnotations {
			continue
		}
		ts, err := p.probe(ctx, u)
		if err != nil {
			return nil, fmt.Errorf("listing the tools of upstream %q: %w", u.Name, err)
		}
		tools = append(tools, ts...)
	}
	p.noteTrusted(tools) // known already: no policy update for them later
	return tools, nil
}

// noteTrusted records the annotations of trusted upstreams' tools (under
// their downstream names) and, when that adds a tool or changes one's
// annotations and the proxy follows annotations, gives the engine the
// policy derived from all of them.
func (p *Proxy) noteTrusted(tools []*mcp.Tool) {
	if len(tools) == 0 {
		return
	}
	p.policyMu.Lock()
	defer p.policyMu.Unlock()
	p.mu.Lock()
	if p.trusted == nil {
		p.trusted = make(map[string]*mcp.ToolAnnotations)
	}
	changed := false
	for _, t := range tools {
		if old, ok := p.trusted[t.Name]; !ok || !reflect.DeepEqual(old, t.Annotations) {
			p.trusted[t.Name] = t.Annotations
			changed = true
		}
	}
	set := p.follow
	var all []*mcp.Tool
	if changed && set != nil {
		for _, name := range slices.Sorted(maps.Keys(p.trusted)) {
			all = append(all, &mcp.Tool{Name: name, Annotations: p.trusted[name]})
		}
	}
	p.mu.Unlock()
	if all != nil {
		set(AnnotationPolicy(p.opts.Policy, all))
	}
}

func (p *Proxy) probe(ctx context.Context, u *upstream) ([]*mcp.Tool, error) {
	ctx, cancel := context.WithTimeout(ctx, p.opts.StartTimeout)
	defer cancel()
	var cs *mcp.ClientSession
	if u.hub != nil {
		// A stateless upstream's hub is the connection every session
		// will use: list on it rather than open another.
		var err error
		cs, err = u.hub.get(ctx)
		if err != nil && !errors.Is(err, errSessions) {
			return nil, err
		}
	}
	if cs == nil {
		t, err := u.transport(p.opts.Stderr)
		if err != nil {
			return nil, err
		}
		c := mcp.NewClient(&mcp.Implementation{Name: p.opts.Name, Version: p.opts.Version},
			&mcp.ClientOptions{Logger: discardLogger, Capabilities: &mcp.ClientCapabilities{}})
		if cs, err = c.Connect(ctx, t, nil); err != nil {
			return nil, err
		}
		defer cs.Close()
	}
	var tools []*mcp.Tool
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return nil, err
		}
		tt := *tool
		tt.Name = u.Prefix + tool.Name
		tools = append(tools, &tt)
	}
	return tools, nil
}
