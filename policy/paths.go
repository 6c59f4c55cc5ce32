package policy

import (
	"path"
	"path/filepath"
	"strings"
)

// Paths (issue 23): an argument declared `as: path` names a file, and two
// spellings of one file must conflict, or a write through one spelling
// leaves a speculative read through the other stale. Cleaning the strings
// is not enough: "/srv/docs/notes.txt" and "docs/notes.txt" (under root
// /srv), and "link/notes.txt" where link is a symlink to docs, name one
// file. So paths compare as the files they may name:
//
//   - A relative path resolves against the backend's root (PathSpace.Root:
//     an exec backend's working directory, an MCP stdio server's, or a
//     declared path_root). Where the root is unknown, a relative and an
//     absolute path may name the same file: they conflict.
//   - On a backend that runs on this machine (PathSpace.Local), symlinks
//     are resolved, as far as the path exists; two resolved paths conflict
//     when one is the other or a folder holding it (a write in a folder
//     changes its listing; a moved folder changes the files in it).
//   - Otherwise (a remote backend, whose links ahead cannot see) two paths
//     conflict when the last element of either is an element of the other:
//     equal names (a folder reached through a link keeps the names below
//     the link), and a folder and the paths in it. A file linked under
//     another name is beyond this rule, as a hard link is beyond all of
//     them.
//
// Resolving a path costs a few lstat calls on a local backend, made when a
// call arrives or a prediction is offered, outside the engine's lock.

// PathSpace says how one backend's path arguments name files. The zero
// value knows nothing: relative paths have no root and links are not
// resolved.
type PathSpace struct {
	// Root is the absolute directory the backend resolves relative paths
	// against; "" when unknown.
	Root string
	// Local reports that the backend runs on this machine and sees its
	// file system, so symlinks are resolved (filepath.EvalSymlinks).
	Local bool
}

// Path is a path resource as compared: a cleaned, slash-separated name,
// absolute when its root is known.
type Path struct {
	Name string
	// Resolved: Name is absolute and its symlinks were resolved on this
	// machine, as far as it exists.
	Resolved bool
}

// resolvePath returns the Path a cleaned path argument names in sp.
func resolvePath(p string, sp PathSpace) Path {
	if !path.IsAbs(p) {
		if sp.Root == "" {
			return Path{Name: p}
		}
		p = path.Join(filepath.ToSlash(sp.Root), p)
	}
	if !sp.Local {
		return Path{Name: p}
	}
	return Path{Name: filepath.ToSlash(evalExisting(filepath.FromSlash(p))), Resolved: true}
}

// evalExisting resolves the symlinks of the longest part of p that exists
// and appends the rest as written: a write may name a file not made yet.
func evalExisting(p string) string {
	rest := ""
	for {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			return filepath.Join(r, rest)
		}
		dir := filepath.Dir(p)
		if dir == p {
			return filepath.Join(p, rest)
		}
		rest = filepath.Join(filepath.Base(p), rest)
		p = dir
	}
}

// everything reports whether p names the root of its space ("/" or "."),
// which holds every path that compares with it.
func (p Path) everything() bool { return p.Name == "/" || p.Name == "." }

// elems returns the elements of p's name.
func (p Path) elems() []string {
	return strings.FieldsFunc(p.Name, func(r rune) bool { return r == '/' })
}

// last returns the last element of p's name.
func (p Path) last() string { return path.Base(p.Name) }

// within reports whether a is b or a path inside the folder b.
func within(a, b string) bool {
	return a == b || strings.HasPrefix(a, b) && (strings.HasSuffix(b, "/") || a[len(b)] == '/')
}

// Conflicts reports whether p and q may name the same file, or one a
// folder that holds the other (see the comment at the top of this file).
func (p Path) Conflicts(q Path) bool {
	switch {
	case p.Name == q.Name || p.everything() || q.everything():
		return true
	case path.IsAbs(p.Name) != path.IsAbs(q.Name):
		return true // one is relative to a root ahead does not know
	case p.Resolved && q.Resolved:
		return within(p.Name, q.Name) || within(q.Name, p.Name)
	}
	pl, ql := p.last(), q.last()
	for _, e := range q.elems() {
		if e == pl {
			return true
		}
	}
	for _, e := range p.elems() {
		if e == ql {
			return true
		}
	}
	return false
}

// Index keys of path resources (see Footprint.Keys and Effect.Keys). A
// NUL never starts the canonical JSON of an id, so they cannot meet one.
const (
	keyPathAll  = "\x00p*" // a read of "/" or "."
	keyPathAbs  = "\x00pa" // every absolute read
	keyPathRel  = "\x00pr" // every relative read
	keyPathLast = "\x00pl" // + a read's last element
	keyPathElem = "\x00pe" // + each element of a read
)

// readKeys appends the keys a read of p is filed under.
func (p Path) readKeys(keys []string) []string {
	if p.everything() {
		return append(keys, keyPathAll)
	}
	if path.IsAbs(p.Name) {
		keys = append(keys, keyPathAbs)
	} else {
		keys = append(keys, keyPathRel)
	}
	keys = append(keys, keyPathLast+p.last())
	for _, e := range p.elems() {
		keys = append(keys, keyPathElem+e)
	}
	return keys
}

// writeKeys appends the keys under which the reads a write of p may
// conflict with are filed: every read p.Conflicts with is under one.
func (p Path) writeKeys(keys []string) []string {
	if p.everything() {
		return append(keys, keyPathAll, keyPathAbs, keyPathRel)
	}
	keys = append(keys, keyPathAll)
	if path.IsAbs(p.Name) {
		keys = append(keys, keyPathRel)
	} else {
		keys = append(keys, keyPathAbs)
	}
	// A read whose last element is one of p's (the same path, a folder
	// holding it, an equal name), and a read with p's last element among
	// its own (a path in the folder p).
	for _, e := range p.elems() {
		keys = append(keys, keyPathLast+e)
	}
	return append(keys, keyPathElem+p.last())
}
