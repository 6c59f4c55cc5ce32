package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ahead-dev/ahead/backend"
	"github.com/ahead-dev/ahead/engine"
	"github.com/ahead-dev/ahead/policy"
	"github.com/ahead-dev/ahead/predict"
)

// Issue 13: hazards are keyed by resource across sessions. On a backend
// whose state is shared (the default), a write in one session invalidates
// the speculative reads of what it writes in every session.
func TestWriteInvalidatesOtherSessions(t *testing.T) {
	for _, tc := range []struct {
		name, tool, args string
	}{
		{"declared write", "write", `{"path":"a","data":"new"}`},
		{"undescribed write", "touch", `{}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t, engine.Options{Predictor: predictAfter("list", read("a", 0.9))})
				h.st.shared = true
				h.call("s2", "write", `{"path":"a","data":"old"}`)
				h.call("s1", "list", `{}`)
				time.Sleep(3 * time.Second) // s1's read of a is done
				h.call("s2", tc.tool, tc.args)
				want := h.direct("s1", "read", `{"path":"a"}`)
				if res := h.call("s1", "read", `{"path":"a"}`); res.Source != engine.Executed || res.Output != want {
					t.Errorf("s1 read a after s2's %s = %s %q, want executed %q", tc.tool, res.Source, res.Output, want)
				}
			})
		})
	}
}

// Issue 13: shared (cross-session) results are invalidated by writes too.
func TestWriteInvalidatesSharedResults(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pol := &policy.Policy{Tools: map[string]policy.Tool{
			"read":  {Allow: true, Reads: policy.Refs("path"), Shared: true, TTL: time.Minute},
			"write": {Writes: policy.Refs("path")},
			"list":  {Allow: true},
		}}
		h := newHarness(t, engine.Options{Policy: pol, Predictor: predictAfter("list", read("a", 0.9))})
		h.st.shared = true
		h.call("s1", "list", `{}`)
		time.Sleep(3 * time.Second)
		h.call("s1", "write", `{"path":"a","data":"new"}`)
		if res := h.call("s2", "read", `{"path":"a"}`); res.Source != engine.Executed || res.Output != `a="new" bumps=0` {
			t.Errorf("s2 read a after a write = %s %q, want executed with the new data", res.Source, res.Output)
		}
	})
}

// Issue 13: cancellable: false means the running execution is never
// cancelled; an invalidated result is still discarded, never served.
func TestNotCancellableInvalidatedIsDiscarded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pol := &policy.Policy{Tools: map[string]policy.Tool{
			"read":  {Allow: true, Reads: policy.Refs("path"), Cancellable: new(false)},
			"write": {Writes: policy.Refs("path")},
			"list":  {Allow: true},
		}}
		h := newHarness(t, engine.Options{Policy: pol, Predictor: predictAfter("list", read("a", 0.9))})
		h.call("s", "list", `{}`)
		time.Sleep(100 * time.Millisecond) // the speculative read is running
		h.call("s", "write", `{"path":"a","data":"x"}`)
		if res := h.call("s", "read", `{"path":"a"}`); res.Source != engine.Executed || res.Output != `a="x" bumps=0` {
			t.Errorf("read after write = %s %q, want executed with the new data", res.Source, res.Output)
		}
		time.Sleep(3 * time.Second)
		h.st.mu.Lock()
		cancelled := h.st.cancelled
		h.st.mu.Unlock()
		if cancelled != 0 {
			t.Errorf("%d executions cancelled; a tool with cancellable: false must run to the end", cancelled)
		}
		if got := h.eng.Stats().Outcomes[engine.OutcomeInvalidated]; got != 1 {
			t.Errorf("invalidated = %d, want 1", got)
		}
	})
}

// Issue 13: a dry-run variant runs as the tool the policy names, which must
// itself be allowed and read-only, on that tool's backend.
func TestDryRunVariantIsChecked(t *testing.T) {
	for _, tc := range []struct {
		name    string
		variant policy.Tool // the rule of the variant "read"
		want    []string    // speculative executions: backend/tool
	}{
		{"variant not in the policy", policy.Tool{}, nil},
		{"variant allowed but not read-only", policy.Tool{Allow: true, ReadOnly: new(false)}, nil},
		{"variant allowed and read-only", policy.Tool{Allow: true, Reads: policy.Refs("path")}, []string{"r/read"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				pol := &policy.Policy{Tools: map[string]policy.Tool{
					"write": {Allow: true, MaxSpeculation: policy.LevelDryRun, Writes: policy.Refs("path"),
						DryRun: policy.DryRun{Tool: "read"}},
					"read": tc.variant,
				}}
				w, r := newStore(time.Second), newStore(time.Second)
				pred := predictAfter("list", predict.Prediction{Tool: "write", Args: json.RawMessage(`{"path":"a","data":"x"}`), P: 0.9})
				h := newHarness(t, engine.Options{Policy: pol, Predictor: pred, Backends: map[string]engine.Backend{
					"w": {Backend: w, Tools: []string{"write", "list"}},
					"r": {Backend: r, Tools: []string{"read"}},
				}})
				h.call("s", "list", `{}`)
				time.Sleep(3 * time.Second)
				var got []string
				for name, st := range map[string]*store{"w": w, "r": r} {
					for _, x := range st.speculative() {
						got = append(got, name+"/"+x.tool)
					}
				}
				if len(got) != len(tc.want) || (len(got) == 1 && got[0] != tc.want[0]) {
					t.Errorf("speculative executions %v, want %v", got, tc.want)
				}
			})
		})
	}
}

// A backend that keeps separate state per session confines a write's
// hazard to the writing session.
func TestPerSessionBackendConfinesHazards(t *testing.T) {
	for _, perSession := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			st := newStore(time.Second)
			h := newHarness(t, engine.Options{
				Predictor: predictAfter("list", read("a", 0.9)),
				Backends:  map[string]engine.Backend{"store": {Backend: st, PerSession: perSession}},
			})
			h.st = st
			h.call("s1", "list", `{}`)
			time.Sleep(3 * time.Second)
			h.call("s2", "touch", `{}`) // per session: only s2's state changed
			want := engine.Executed
			if perSession {
				want = engine.Reused
			}
			if res := h.call("s1", "read", `{"path":"a"}`); res.Source != want {
				t.Errorf("per session %v: s1 read after s2's touch = %s, want %s", perSession, res.Source, want)
			}
		})
	}
}

// Resources are compared after normalisation, and one call may write
// several.
func TestHazardResourcesNormalised(t *testing.T) {
	pol := &policy.Policy{
		Tools: map[string]policy.Tool{
			"read":  {Allow: true, Reads: []policy.Ref{{Arg: "path", As: policy.KindPath}}},
			"write": {Writes: []policy.Ref{{Arg: "path", As: policy.KindPath}, {Arg: "also", As: policy.KindPath}}},
			"list":  {Allow: true},
		},
		Dedup: policy.Dedup{Strategy: policy.StrategyAll},
	}
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, engine.Options{Policy: pol,
			Predictor: predictAfter("list", read("d/a", 0.9), read("./b/", 0.9), read("c", 0.9))})
		h.call("s", "list", `{}`)
		time.Sleep(3 * time.Second)
		h.call("s", "write", `{"path":"./d//a","also":["x","b"]}`)
		for path, want := range map[string]engine.Source{"d/a": engine.Executed, "./b/": engine.Executed, "c": engine.Reused} {
			if res := h.call("s", "read", `{"path":"`+path+`"}`); res.Source != want {
				t.Errorf("read %s after writing d/a and b: %s, want %s", path, res.Source, want)
			}
		}
	})
}

// A volatile tool's result is reused only within the think window it was
// started in.
func TestVolatileLivesOneThinkWindow(t *testing.T) {
	pol := &policy.Policy{Tools: map[string]policy.Tool{
		"read": {Allow: true, Reads: policy.Refs("path"), Volatile: true},
		"list": {Allow: true},
	}}
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, engine.Options{Policy: pol, Predictor: predictAfter("list", read("a", 0.9), read("b", 0.9))})
		h.call("s", "list", `{}`)
		time.Sleep(3 * time.Second)
		if res := h.call("s", "read", `{"path":"a"}`); res.Source != engine.Reused {
			t.Errorf("read a in the window it was speculated in: %s, want reused", res.Source)
		}
		// read a's result ended the window: b, speculated in it, is stale.
		if res := h.call("s", "read", `{"path":"b"}`); res.Source != engine.Executed {
			t.Errorf("read b in a later window: %s, want executed", res.Source)
		}
	})
}

// The default lifetime of an unshared result follows the think times.
func TestDefaultTTLFollowsThinkTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, engine.Options{Predictor: predictAfter("list", read("a", 0.9))})
		// 20 calls 500 ms apart: think times of 500 ms, so results live 1 s
		// at least DefaultThink (1.8 s).
		for range 20 {
			h.call("s0", "fail", `{}`)
			time.Sleep(500 * time.Millisecond)
		}
		h.call("s", "list", `{}`)
		time.Sleep(1900 * time.Millisecond) // done at 1 s
		if res := h.call("s", "read", `{"path":"a"}`); res.Source != engine.Reused {
			t.Errorf("read within the TTL: %s, want reused", res.Source)
		}
		h.call("s", "list", `{}`)
		time.Sleep(3 * time.Second) // done at 1 s, expired at 2.8 s
		if res := h.call("s", "read", `{"path":"a"}`); res.Source != engine.Executed {
			t.Errorf("read after 2 s: %s, want executed (expired)", res.Source)
		}
	})
}

// Issue 23: a write to a file spelled another way (absolute under the
// backend's root, through a symlinked folder, through a symlink to the
// file) invalidates a speculative read of it, on a backend that runs on
// this machine; a write to a sibling file does not.
func TestHazardPathAliases(t *testing.T) {
	root := t.TempDir()
	if r, err := filepath.EvalSymlinks(root); err == nil {
		root = r
	}
	for _, err := range []error{
		os.Mkdir(filepath.Join(root, "docs"), 0o755),
		os.WriteFile(filepath.Join(root, "docs", "notes.txt"), []byte("v0"), 0o644),
		os.Symlink("docs", filepath.Join(root, "link")),
		os.Symlink("notes.txt", filepath.Join(root, "docs", "alias.txt")),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	type pathArg struct{ Path, Text string }
	at := func(args json.RawMessage) (string, pathArg) {
		var a pathArg
		json.Unmarshal(args, &a)
		if !filepath.IsAbs(a.Path) {
			return filepath.Join(root, a.Path), a
		}
		return a.Path, a
	}
	fs := backend.Funcs{
		"list": func(context.Context, json.RawMessage) (string, error) { return "docs", nil },
		"read": func(_ context.Context, args json.RawMessage) (string, error) {
			p, _ := at(args)
			b, err := os.ReadFile(p)
			return string(b), err
		},
		"write": func(_ context.Context, args json.RawMessage) (string, error) {
			p, a := at(args)
			return "ok", os.WriteFile(p, []byte(a.Text), 0o644)
		},
	}
	asPath := []policy.Ref{{Arg: "path", As: policy.KindPath}}
	pol := &policy.Policy{Tools: map[string]policy.Tool{
		"list":  {Allow: true},
		"read":  {Allow: true, Reads: asPath},
		"write": {Writes: asPath},
	}}
	for i, w := range []struct {
		path  string
		stale bool // whether the read must run again
	}{
		{filepath.ToSlash(filepath.Join(root, "docs", "notes.txt")), true},
		{"link/notes.txt", true},
		{"docs/alias.txt", true},
		{"docs/other.txt", false},
	} {
		synctest.Test(t, func(t *testing.T) {
			h := newHarness(t, engine.Options{Policy: pol, Predictor: predictAfter("list", read("docs/notes.txt", 0.9)),
				Backends: map[string]engine.Backend{"fs": {Backend: fs, Paths: policy.PathSpace{Root: root, Local: true}}}})
			h.call("s", "list", `{}`)
			time.Sleep(time.Second)
			text := fmt.Sprintf("v%d", i+1)
			h.call("s", "write", fmt.Sprintf(`{"path":%q,"text":%q}`, w.path, text))
			res := h.call("s", "read", `{"path":"docs/notes.txt"}`)
			want, wantText := engine.Reused, "v0"
			if w.stale {
				want, wantText = engine.Executed, text
			}
			if res.Source != want || res.Output != wantText && w.stale {
				t.Errorf("read docs/notes.txt after writing %s: %s %q, want %s %q", w.path, res.Source, res.Output, want, wantText)
			}
			os.WriteFile(filepath.Join(root, "docs", "notes.txt"), []byte("v0"), 0o644)
		})
	}
}
