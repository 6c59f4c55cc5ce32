package pattern_test

import (
	"bytes"
	"errors"
	"path/filepath"
	"testing"

	"github.com/ahead-dev/ahead/pattern"
	"github.com/ahead-dev/ahead/trace"
)

func loadTestPool(t *testing.T, name string) *pattern.Pool {
	t.Helper()
	pool, err := pattern.Load(filepath.Join("..", "mine", "testdata", name+".pool.json"))
	if err != nil {
		t.Fatal(err)
	}
	return pool
}

// TestMerge checks how a learning pool gains the patterns it lacks: an
// empty base takes the mined pool whole (keeping its conversation model),
// a pattern both hold keeps base's counts, new ones are added in pool
// order, and pools of different discriminators do not merge.
func TestMerge(t *testing.T) {
	list, path := loadTestPool(t, "list"), loadTestPool(t, "path")
	empty := &pattern.Pool{Version: pattern.Version, Discriminators: []pattern.Discriminator{}, Conversation: []byte(`{"v":1}`)}
	counted := *list
	counted.Patterns = append([]pattern.Pattern(nil), list.Patterns...)
	counted.Patterns[0].Support += 100
	otherDisc := *path
	otherDisc.Discriminators = []pattern.Discriminator{{Tool: "shell", Arg: "command", Kind: pattern.KindWord, Values: []string{"ls"}}}
	for _, tc := range []struct {
		name        string
		base, mined *pattern.Pool
		want        int // patterns
		support0    int // of the merged pool's first pattern of base's first context, when base has patterns
		err         error
	}{
		{"empty base", empty, list, len(list.Patterns), 0, nil},
		{"same patterns keep base's counts", &counted, list, len(list.Patterns), counted.Patterns[0].Support, nil},
		{"new patterns added", list, path, len(list.Patterns) + len(path.Patterns), 0, nil},
		{"different discriminators", list, &otherDisc, 0, 0, pattern.ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n0 := len(tc.base.Patterns)
			got, err := pattern.Merge(tc.base, tc.mined)
			if !errors.Is(err, tc.err) {
				t.Fatalf("Merge error %v, want %v", err, tc.err)
			}
			if err != nil {
				return
			}
			if len(got.Patterns) != tc.want {
				t.Errorf("%d patterns, want %d", len(got.Patterns), tc.want)
			}
			if len(tc.base.Patterns) != n0 {
				t.Error("Merge modified base")
			}
			if tc.base == empty && string(got.Conversation) != `{"v":1}` {
				t.Errorf("conversation %q, want base's kept", got.Conversation)
			}
			if tc.support0 != 0 {
				found := false
				for _, p := range got.Patterns {
					if p.Describe() == tc.base.Patterns[0].Describe() {
						found = true
						if p.Support != tc.support0 {
							t.Errorf("support of %s = %d, want base's %d", p.Describe(), p.Support, tc.support0)
						}
					}
				}
				if !found {
					t.Errorf("%s lost in the merge", tc.base.Patterns[0].Describe())
				}
			}
			var raw bytes.Buffer
			if err := got.Encode(&raw); err != nil {
				t.Fatal(err)
			}
			if _, err := pattern.Decode(raw.Bytes()); err != nil {
				t.Errorf("the merged pool does not load: %v", err)
			}
		})
	}
}

// TestSigner checks events' signatures: the tool, errors marked, and a
// discriminator's value (a value it knows, Other for one it does not,
// read as a whole value or as the first word).
func TestSigner(t *testing.T) {
	s := pattern.NewSigner([]pattern.Discriminator{
		{Tool: "shell", Arg: "command", Kind: pattern.KindWord, Values: []string{"git", "ls"}},
		{Tool: "meta", Arg: "action", Kind: pattern.KindValue, Values: []string{"open", "close now"}},
	})
	for _, tc := range []struct {
		tool   string
		status trace.Status
		args   string
		want   string
	}{
		{"read", trace.StatusOK, `{"path":"a"}`, "read"},
		{"read", trace.StatusError, `{"path":"a"}`, "read!"},
		{"shell", trace.StatusOK, `{"command":"git status"}`, "shell[git]"},
		{"shell", trace.StatusOK, `{"command":"  ls -la"}`, "shell[ls]"},
		{"shell", trace.StatusError, `{"command":"rm -rf x"}`, "shell[*]!"},
		{"shell", trace.StatusOK, `{"cwd":"/"}`, "shell[*]"},
		{"meta", trace.StatusOK, `{"action":"close now"}`, "meta[close now]"},
		{"meta", trace.StatusOK, `{"action":"close"}`, "meta[*]"},
	} {
		if got := s.Sign(tc.tool, tc.status, []byte(tc.args)).String(); got != tc.want {
			t.Errorf("Sign(%s, %s, %s) = %s, want %s", tc.tool, tc.status, tc.args, got, tc.want)
		}
	}
	if got := pattern.StartSignature.String(); got != "^" {
		t.Errorf("the session start reads %q, want ^", got)
	}
}
