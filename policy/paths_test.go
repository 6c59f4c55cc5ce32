package policy

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// Issue 23: spellings of one file conflict; so do a folder and what it
// holds; where ahead cannot tell, paths conflict.
func TestPathConflicts(t *testing.T) {
	abs := func(s string) Path { return Path{Name: s, Resolved: true} }
	for _, tc := range []struct {
		a, b Path
		want bool
	}{
		{Path{Name: "docs/notes.txt"}, Path{Name: "docs/notes.txt"}, true},
		// Relative and absolute, the root unknown: either may be the other.
		{Path{Name: "docs/notes.txt"}, Path{Name: "/abs/root/docs/notes.txt"}, true},
		{Path{Name: "docs/a.txt"}, Path{Name: "/x/b.txt"}, true},
		// Remote, links unseen: by the last element.
		{Path{Name: "/srv/link/notes.txt"}, Path{Name: "/srv/docs/notes.txt"}, true},
		{Path{Name: "/srv/docs/a.txt"}, Path{Name: "/srv/docs/b.txt"}, false},
		{Path{Name: "link/notes.txt"}, Path{Name: "docs/notes.txt"}, true},
		// A folder and a path in it (a listing and a write).
		{Path{Name: "/srv/docs"}, Path{Name: "/srv/docs/new.txt"}, true},
		{Path{Name: "/other/docs"}, Path{Name: "/srv/docs/new.txt"}, true},
		{Path{Name: "/"}, Path{Name: "/srv/x"}, true},
		{Path{Name: "."}, Path{Name: "x"}, true},
		// Resolved on this machine: exactly, folders included.
		{abs("/srv/docs/notes.txt"), abs("/srv/docs/notes.txt"), true},
		{abs("/srv/docs"), abs("/srv/docs/notes.txt"), true},
		{abs("/srv/docs/notes.txt"), abs("/srv/docs"), true},
		{abs("/srv/docs/notes.txt"), abs("/srv/old/notes.txt"), false},
		{abs("/srv/doc"), abs("/srv/docs/notes.txt"), false},
		// One resolved, one not: by the last element.
		{abs("/real/docs/notes.txt"), Path{Name: "/srv/link/notes.txt"}, true},
	} {
		if got := tc.a.Conflicts(tc.b); got != tc.want {
			t.Errorf("%+v.Conflicts(%+v) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
		if got := tc.b.Conflicts(tc.a); got != tc.want {
			t.Errorf("%+v.Conflicts(%+v) = %v, want %v", tc.b, tc.a, got, tc.want)
		}
		// The index finds every conflicting read under a write's keys.
		if tc.want {
			ef := Effect{Paths: []Path{tc.a}}
			fp := Footprint{Paths: []Path{tc.b}}
			if !sharesKey(ef.Keys(), fp.Keys()) {
				t.Errorf("write %+v, read %+v: conflict, but no index key in common (%q, %q)", tc.a, tc.b, ef.Keys(), fp.Keys())
			}
		}
	}
}

func sharesKey(a, b []string) bool {
	for _, k := range a {
		if slices.Contains(b, k) {
			return true
		}
	}
	return false
}

// The three alias cases of issue 23 on a local backend: an absolute
// spelling under the root, a folder reached through a symlink, and a file
// symlink under another name; a sibling file stays apart.
func TestInvalidatesAliasesLocal(t *testing.T) {
	root := t.TempDir()
	if r, err := filepath.EvalSymlinks(root); err == nil {
		root = r
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Mkdir(filepath.Join(root, "docs"), 0o755))
	must(os.WriteFile(filepath.Join(root, "docs", "notes.txt"), nil, 0o644))
	must(os.Symlink("docs", filepath.Join(root, "link")))
	must(os.Symlink("notes.txt", filepath.Join(root, "docs", "alias.txt")))
	sp := PathSpace{Root: root, Local: true}
	rd := Tool{Allow: true, Reads: []Ref{{Arg: "path", As: KindPath}}}
	wr := Tool{Writes: []Ref{{Arg: "path", As: KindPath}}}
	read := rd.FootprintIn(json.RawMessage(`{"path":"docs/notes.txt"}`), sp)
	for _, tc := range []struct {
		path string
		want bool
	}{
		{filepath.ToSlash(filepath.Join(root, "docs", "notes.txt")), true},
		{"link/notes.txt", true},
		{"docs/alias.txt", true},
		{"docs", true},
		{"docs/other.txt", false},
		{"docs/new/deeper.txt", false},
	} {
		ef := wr.EffectIn(json.RawMessage(`{"path":`+quote(tc.path)+`}`), sp)
		if got := ef.Invalidates(read); got != tc.want {
			t.Errorf("write %s, read docs/notes.txt: invalidates %v, want %v (%+v, %+v)", tc.path, got, tc.want, ef.Paths, read.Paths)
		}
	}
}

func quote(s string) string { b, _ := json.Marshal(s); return string(b) }
