package mcpproxy

// Prompts, resources and completions: listing them from every upstream of a
// session and finding the one upstream that owns a name or URI.

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/yosida95/uritemplate/v3"
)

// listPrompts lists every upstream's prompts.
func (s *session) listPrompts(ctx context.Context) (*mcp.ListPromptsResult, error) {
	owners := make(map[string]*upstream)
	prompts := []*mcp.Prompt{}
	for _, sl := range s.slots {
		cs, err := sl.get(ctx)
		if err != nil || !hasCap(cs, func(c *mcp.ServerCapabilities) bool { return c.Prompts != nil }) {
			continue
		}
		for pr, err := range cs.Prompts(ctx, nil) {
			if err != nil {
				return nil, passErrOnly(err)
			}
			if _, dup := owners[pr.Name]; dup {
				continue
			}
			owners[pr.Name] = sl.up
			prompts = append(prompts, pr)
		}
	}
	s.mu.Lock()
	s.prompts = owners
	s.mu.Unlock()
	return &mcp.ListPromptsResult{Prompts: prompts}, nil
}

// listResources lists every upstream's resources.
func (s *session) listResources(ctx context.Context) (*mcp.ListResourcesResult, error) {
	owners := make(map[string]*upstream)
	resources := []*mcp.Resource{}
	for _, sl := range s.slots {
		cs, err := sl.get(ctx)
		if err != nil || !hasCap(cs, func(c *mcp.ServerCapabilities) bool { return c.Resources != nil }) {
			continue
		}
		for r, err := range cs.Resources(ctx, nil) {
			if err != nil {
				return nil, passErrOnly(err)
			}
			if _, dup := owners[r.URI]; dup {
				continue
			}
			owners[r.URI] = sl.up
			resources = append(resources, r)
		}
	}
	s.mu.Lock()
	s.resources = owners
	s.mu.Unlock()
	return &mcp.ListResourcesResult{Resources: resources}, nil
}

// listTemplates lists every upstream's resource templates.
func (s *session) listTemplates(ctx context.Context) (*mcp.ListResourceTemplatesResult, error) {
	templates := []*mcp.ResourceTemplate{}
	for _, sl := range s.slots {
		cs, err := sl.get(ctx)
		if err != nil || !hasCap(cs, func(c *mcp.ServerCapabilities) bool { return c.Resources != nil }) {
			continue
		}
		for t, err := range cs.ResourceTemplates(ctx, nil) {
			if err != nil {
				return nil, passErrOnly(err)
			}
			templates = append(templates, t)
		}
	}
	return &mcp.ListResourceTemplatesResult{ResourceTemplates: templates}, nil
}

// only returns the session's single upstream connection for a feature when
// there is exactly one upstream (the common case needs no routing).
func (s *session) only(ctx context.Context) (*mcp.ClientSession, bool, error) {
	if len(s.slots) != 1 {
		return nil, false, nil
	}
	cs, err := s.slots[0].get(ctx)
	if err != nil {
		return nil, true, upstreamErr(err)
	}
	return cs, true, nil
}

// promptOwner returns the upstream connection serving a prompt.
func (s *session) promptOwner(ctx context.Context, name string) (*mcp.ClientSession, error) {
	if cs, ok, err := s.only(ctx); ok {
		return cs, err
	}
	s.mu.Lock()
	listed := s.prompts != nil
	s.mu.Unlock()
	if !listed {
		if _, err := s.listPrompts(ctx); err != nil {
			return nil, err
		}
	}
	s.mu.Lock()
	up := s.prompts[name]
	s.mu.Unlock()
	if up == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown prompt %q", name)}
	}
	cs, err := s.slots[up.i].get(ctx)
	return cs, upstreamErrOrNil(err)
}

// resourceOwner returns the upstream connection serving a resource URI:
// the one that listed it, else the first whose templates match it, else the
// first with resources.
func (s *session) resourceOwner(ctx context.Context, uri string) (*mcp.ClientSession, error) {
	if cs, ok, err := s.only(ctx); ok {
		return cs, err
	}
	s.mu.Lock()
	listed := s.resources != nil
	s.mu.Unlock()
	if !listed {
		if _, err := s.listResources(ctx); err != nil {
			return nil, err
		}
	}
	s.mu.Lock()
	up := s.resources[uri]
	s.mu.Unlock()
	if up != nil {
		cs, err := s.slots[up.i].get(ctx)
		return cs, upstreamErrOrNil(err)
	}
	var first *mcp.ClientSession
	for _, sl := range s.slots {
		cs, err := sl.get(ctx)
		if err != nil || !hasCap(cs, func(c *mcp.ServerCapabilities) bool { return c.Resources != nil }) {
			continue
		}
		if first == nil {
			first = cs
		}
		for t, err := range cs.ResourceTemplates(ctx, nil) {
			if err != nil {
				break
			}
			if tmpl, err := uritemplate.New(t.URITemplate); err == nil && tmpl.Regexp().MatchString(uri) {
				return cs, nil
			}
		}
	}
	if first == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("resource %q not found", uri)}
	}
	return first, nil
}

// completionOwner returns the upstream connection that completes for a
// prompt or a resource template.
func (s *session) completionOwner(ctx context.Context, params *mcp.CompleteParams) (*mcp.ClientSession, error) {
	if cs, ok, err := s.only(ctx); ok {
		return cs, err
	}
	if params.Ref != nil && params.Ref.Type == "ref/prompt" {
		return s.promptOwner(ctx, params.Ref.Name)
	}
	if params.Ref != nil && params.Ref.URI != "" {
		return s.resourceOwner(ctx, params.Ref.URI)
	}
	return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "completion: unknown reference"}
}
