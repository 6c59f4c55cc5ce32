package mcpproxy

import (
	"bytes"
	"encoding/json"
	"flag"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ahead-dev/ahead/engine"
	"github.com/ahead-dev/ahead/predict"
	"github.com/ahead-dev/ahead/tooldef"
	"github.com/ahead-dev/ahead/trace"
)

var updateTools = flag.Bool("update-tools", false, "rewrite the real servers' tool definitions in ../tooldef/testdata")

type toolsRecorder struct {
	mu  sync.Mutex
	evs []trace.Event
}

func (r *toolsRecorder) Record(ev trace.Event) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ev.Kind == trace.KindTools {
		r.evs = append(r.evs, ev)
	}
	return nil
}

// newDeclaring is a proxy in front of ups whose engine records what it
// is told and asks pred.
func newDeclaring(t *testing.T, ups []Upstream, pred predict.Predictor, rec engine.Recorder) *e2e {
	t.Helper()
	for i := range ups {
		ups[i].TrustAnnotations = true
	}
	p, err := New(&Options{Upstreams: ups, Logger: slog.New(slog.DiscardHandler), Stderr: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	tools, err := p.TrustedTools(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	eng := engine.New(&engine.Options{
		Backends: p.Backends(), Route: p.Route, Policy: AnnotationPolicy(nil, tools),
		Predictor: pred, Recorder: rec, Logger: slog.New(slog.DiscardHandler),
	})
	p.Attach(eng)
	t.Cleanup(func() {
		p.Close()
		eng.Close()
	})
	return &e2e{proxy: p, eng: eng}
}

// TestDeclaredToolsRecorded: the real npm servers' tools/list, through
// ahead, is recorded once per session as a line of declared tools (again
// only if it changes), with each tool's name, description and input
// schema as the agent saw them. The definitions are kept in
// ../tooldef/testdata, where the predictor's tests read them.
func TestDeclaredToolsRecorded(t *testing.T) {
	for _, tc := range []struct {
		name string
		up   func(t *testing.T) Upstream
	}{
		{"filesystem", func(t *testing.T) Upstream {
			return npmServer(t, "fs", "mcp-server-filesystem", nil, t.TempDir())
		}},
		{"memory", func(t *testing.T) Upstream {
			return npmServer(t, "memory", "mcp-server-memory", map[string]string{"MEMORY_FILE_PATH": filepath.Join(t.TempDir(), "m.jsonl")})
		}},
		{"everything", func(t *testing.T) Upstream { return npmServer(t, "everything", "mcp-server-everything", nil, "stdio") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &toolsRecorder{}
			x := newDeclaring(t, []Upstream{tc.up(t)}, nil, rec)
			via := x.connect(t)
			listed, err := via.ListTools(t.Context(), nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := via.ListTools(t.Context(), nil); err != nil {
				t.Fatal(err)
			}
			x.eng.Close()
			rec.mu.Lock()
			evs := rec.evs
			rec.mu.Unlock()
			if len(evs) != 1 {
				t.Fatalf("%d lines of declared tools recorded for two listings of the same tools, want 1", len(evs))
			}
			ev := evs[0]
			if ev.From != trace.FromMCP || ev.Session == "" || len(ev.Tools) != len(listed.Tools) {
				t.Fatalf("recorded %d tools from %q in session %q, want the %d listed, from mcp", len(ev.Tools), ev.From, ev.Session, len(listed.Tools))
			}
			for i, lt := range listed.Tools {
				d := ev.Tools[i]
				schema, _ := json.Marshal(lt.InputSchema)
				var want bytes.Buffer
				json.Compact(&want, schema)
				if d.Name != lt.Name || d.Description != lt.Description || string(d.InputSchema) != want.String() {
					t.Errorf("recorded %s %q %s, listed %s %q %s", d.Name, d.Description, d.InputSchema, lt.Name, lt.Description, want.String())
				}
			}
			fixture := filepath.Join("..", "tooldef", "testdata", tc.name+".tools.json")
			var buf bytes.Buffer
			if err := trace.EncodeLine(&buf, trace.Event{Kind: trace.KindTools, Session: "fixture", From: ev.From, Tools: ev.Tools}); err != nil {
				t.Fatal(err)
			}
			if *updateTools {
				if err := os.WriteFile(fixture, buf.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			old, err := os.ReadFile(fixture)
			if err != nil {
				t.Fatalf("%v (go test ./mcpproxy -run TestDeclaredToolsRecorded -update-tools writes it)", err)
			}
			if diff := cmp.Diff(string(old), buf.String()); diff != "" {
				t.Errorf("the server's tools changed since %s was written (-old +new):\n%s", fixture, diff)
			}
		})
	}
}

// deafTo is a predictor without its definitions (no Declare): what ahead
// predicts when it ignores them.
type deafTo struct{ p *tooldef.Predictor }

func (d deafTo) Observe(ev trace.Event) []predict.Prediction { return d.p.Observe(ev) }
func (d deafTo) Hear(msg trace.Event) []predict.Prediction   { return d.p.Hear(msg) }
func (d deafTo) Forget(s string)                             { d.p.Forget(s) }

// TestDeclaredToolsPredictTheFirstRead: a fresh ahead (no pool) in front
// of the real filesystem server. The agent lists the tools, the user
// names a file, and the agent's first call, a read it never made before,
// is served ahead: the read's definition (its path argument, the words of
// its name) picked the path out of the message. Ignoring the definitions,
// the read runs when the agent asks.
func TestDeclaredToolsPredictTheFirstRead(t *testing.T) {
	for _, ignored := range []bool{false, true} {
		name := "definitions heard"
		if ignored {
			name = "definitions ignored"
		}
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			file := filepath.Join(dir, "notes.md")
			if err := os.WriteFile(file, []byte("remember the milk\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			pred := predict.Predictor(tooldef.New(nil))
			want := map[string]bool{"reused": true, "promoted": true}
			if ignored {
				pred, want = deafTo{tooldef.New(nil)}, map[string]bool{"executed": true}
			}
			x := newDeclaring(t, []Upstream{npmServer(t, "fs", "mcp-server-filesystem", nil, dir)}, pred, nil)
			via := x.connect(t)
			if _, err := via.ListTools(t.Context(), nil); err != nil {
				t.Fatal(err)
			}
			x.proxy.mu.Lock()
			var id string
			for k := range x.proxy.byID {
				id = k
			}
			x.proxy.mu.Unlock()
			if err := x.eng.Message(t.Context(), id, trace.RoleUser, "Could you read "+file+" and tell me what I must remember?"); err != nil {
				t.Fatal(err)
			}
			res, src := call(t, via, "read_text_file", map[string]any{"path": file})
			if !want[src] || text(res) != "remember the milk\n" {
				t.Errorf("first read: %q (%s), want the file's text, source in %v", text(res), src, want)
			}
		})
	}
}
