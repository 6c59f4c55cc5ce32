package mcpproxy

import (
	"context"
	"encoding/json"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ahead-dev/ahead/policy"
)

func TestNormaliseInputSchema(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		changed  bool
	}{
		{`{"type":"object","properties":{"a":{"type":"string"}}}`, `{"type":"object","properties":{"a":{"type":"string"}}}`, false},
		{`null`, `{"type":"object"}`, true},
		{`{}`, `{"type":"object"}`, true},
		{`{"properties":{"a":{}}}`, `{"type":"object","properties":{"a":{}}}`, true},
		{`{"type":["object","null"],"required":["a"]}`, `{"type":"object","required":["a"]}`, true},
		{`{"type":"string","description":"a path"}`, `{"type":"object","description":"a path"}`, true},
		{`"object"`, `{"type":"object"}`, true},
		{`[1,2]`, `{"type":"object"}`, true},
	} {
		var in any
		if err := json.Unmarshal([]byte(tc.in), &in); err != nil {
			t.Fatal(err)
		}
		got, changed := normaliseInputSchema(in)
		var want any
		json.Unmarshal([]byte(tc.want), &want)
		if diff := cmp.Diff(want, wireAny(t, got)); diff != "" || changed != tc.changed {
			t.Errorf("normaliseInputSchema(%s): changed %v, want %v; diff (-want +got):\n%s", tc.in, changed, tc.changed, diff)
		}
	}
}

func wireAny(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	json.Unmarshal(b, &out)
	return out
}

// FuzzNormaliseInputSchema: whatever an upstream sends, the agent gets an
// object schema of type object, and a valid one is passed unchanged.
func FuzzNormaliseInputSchema(f *testing.F) {
	for _, s := range []string{`{"type":"object"}`, `{}`, `null`, `{"type":["null","object"]}`, `{"type":7}`, `"x"`, `{"type":"object","$defs":{"a":{}}}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var in any
		if json.Unmarshal([]byte(s), &in) != nil {
			return
		}
		got, changed := normaliseInputSchema(in)
		b, err := json.Marshal(got)
		if err != nil {
			t.Fatalf("normalised schema does not marshal: %v", err)
		}
		var m map[string]any
		if json.Unmarshal(b, &m) != nil || m["type"] != "object" {
			t.Fatalf("normaliseInputSchema(%s) = %s: not an object schema", s, b)
		}
		if !changed {
			if diff := cmp.Diff(wireAny(t, in), m); diff != "" {
				t.Fatalf("unchanged schema differs:\n%s", diff)
			}
		}
	})
}

func TestAnnotationPolicy(t *testing.T) {
	tools := []*mcp.Tool{
		{Name: "read", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: new(false)}},
		{Name: "search_web", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: new(true)}},
		{Name: "fetch", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, // open world by default
		{Name: "write", Annotations: &mcp.ToolAnnotations{DestructiveHint: new(true), OpenWorldHint: new(false)}},
		{Name: "bare"},
		{Name: "read_secret", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: new(false)}},
		{Name: "git_log", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: new(false)}},
	}
	base := &policy.Policy{
		Tools: map[string]policy.Tool{"read_secret": {}, "fetch": {Allow: true}},
		Globs: []policy.Glob{{Pattern: "git_*", Tool: policy.Tool{Allow: true, MaxSpeculation: policy.LevelWarmup}}},
	}
	p := AnnotationPolicy(base, tools)
	for _, tc := range []struct {
		tool     string
		level    policy.Level
		readOnly bool
	}{
		{"read", policy.LevelFull, true},
		{"search_web", policy.LevelNone, true},
		{"fetch", policy.LevelFull, true}, // the operator allows it
		{"write", policy.LevelNone, false},
		{"bare", policy.LevelNone, false},
		{"read_secret", policy.LevelNone, false}, // the operator's rule wins
		{"git_log", policy.LevelWarmup, false},   // so does the operator's glob
		{"unknown", policy.LevelNone, false},
	} {
		r := p.Lookup(tc.tool)
		if r.Level() != tc.level || r.IsReadOnly() != tc.readOnly {
			t.Errorf("%s: level %v read-only %v, want %v %v", tc.tool, r.Level(), r.IsReadOnly(), tc.level, tc.readOnly)
		}
	}
	if len(base.Tools) != 2 {
		t.Errorf("AnnotationPolicy modified the operator's policy")
	}
	if p := AnnotationPolicy(nil, tools[:1]); p.Lookup("read").Level() != policy.LevelFull || p.Lookup("x").Level() != policy.LevelNone {
		t.Errorf("AnnotationPolicy(nil, ...) = %+v", p)
	}
}

func TestUntrustedAnnotationsDoNotSpeculate(t *testing.T) {
	// An untrusted upstream and the operator's policy alone (deny all):
	// the predicted read never runs speculatively, however read-only its
	// annotations say it is, even after sessions list them.
	r := newRig(t, rigOptions{predictor: readAfterList, policy: &policy.Policy{}, untrusted: true})
	cs := r.connect(nil)
	call(t, cs, "list", map[string]any{})
	if _, src := call(t, cs, "read", map[string]any{"name": "a.txt"}); src != "executed" {
		t.Errorf("read: source %q, want executed (untrusted annotations)", src)
	}
	st := r.up.files(r.up.connects - 1)
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.reads["a.txt"] != 1 {
		t.Errorf("read ran %d times, want once (authoritatively)", st.reads["a.txt"])
	}
}

// TestBadSchemasAndListChanged: an upstream whose schemas MCP clients
// reject still lists (normalised), and its list_changed reaches the agent,
// whose next listing shows the new tool.
func TestBadSchemasAndListChanged(t *testing.T) {
	r := newRig(t, rigOptions{policy: &policy.Policy{}})
	var extra atomic.Bool
	a := &agent{}
	cs := r.connect(a)
	lt, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	before := len(lt.Tools)

	// The session's upstream starts answering tools/list as a sloppy
	// server would: a tool whose schemas MCP clients refuse (AddTool
	// would panic on them).
	srv := r.up.server(r.up.connects - 1)
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			res, err := next(ctx, method, req)
			if method == "tools/list" && err == nil && extra.Load() {
				lr := res.(*mcp.ListToolsResult)
				lr.Tools = append(slices.Clone(lr.Tools), &mcp.Tool{Name: "sloppy", InputSchema: map[string]any{"properties": map[string]any{}}, OutputSchema: map[string]any{"type": "string"}})
			}
			return res, err
		}
	})
	extra.Store(true)
	// Any change to the upstream's tools makes it send list_changed.
	srv.AddTool(&mcp.Tool{Name: "added", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "added!"}}}, nil
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		a.mu.Lock()
		n := a.changed
		a.mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the agent never got tools/list_changed")
		}
		time.Sleep(5 * time.Millisecond)
	}
	lt, err = cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(lt.Tools) != before+2 {
		t.Fatalf("after list_changed: %d tools, want %d", len(lt.Tools), before+2)
	}
	for _, tl := range lt.Tools {
		if tl.Name != "sloppy" {
			continue
		}
		if diff := cmp.Diff(map[string]any{"type": "object", "properties": map[string]any{}}, wireAny(t, tl.InputSchema)); diff != "" {
			t.Errorf("sloppy input schema not normalised (-want +got):\n%s", diff)
		}
		if tl.OutputSchema != nil {
			t.Errorf("sloppy output schema kept: %v", tl.OutputSchema)
		}
	}
	if res, _ := call(t, cs, "added", map[string]any{}); text(res) != "added!" {
		t.Errorf("added = %q", text(res))
	}
}
