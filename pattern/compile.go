package pattern

import (
	"maps"
	"slices"

	"github.com/ahead-dev/ahead/trace"
)

// A Compiler numbers signatures and compiles patterns as an Index does, for
// patterns that are in no pool yet: the miner (package mine) evaluates each
// candidate pattern at every occurrence of its context to count its hits.
// It is not safe for concurrent use.
type Compiler struct {
	x *Index
}

// NewCompiler returns a Compiler that signs events with the discriminators.
func NewCompiler(disc []Discriminator) *Compiler {
	return &Compiler{x: newIndex(disc)}
}

// Sign returns the id of an event's signature, numbering it if it is new:
// the ids a History's Last and Recent are called with, ascending from
// StartSig+1 in the order signatures are first seen.
func (c *Compiler) Sign(tool string, status trace.Status, args []byte) int32 {
	return c.x.intern(c.x.signer.Sign(tool, status, args))
}

// Clone returns a Compiler that numbers the signatures numbered so far as
// c does, for another goroutine: each compiles its own patterns (a
// Compiler is not safe for concurrent use). Signatures either numbers
// later are its own.
func (c *Compiler) Clone() *Compiler {
	x := newIndex(c.x.disc)
	x.sigs = slices.Clone(c.x.sigs)
	x.ids = maps.Clone(c.x.ids)
	return &Compiler{x: x}
}

// Signature returns the signature numbered id.
func (c *Compiler) Signature(id int32) Signature { return c.x.sigs[id] }

// Compile compiles a pattern; its counts are not read. The pattern must not
// be modified while the result is in use.
func (c *Compiler) Compile(pt *Pattern) (*Compiled, error) {
	cp, err := c.x.compile(pt)
	if err != nil {
		return nil, err
	}
	return &Compiled{x: c.x, cp: cp}, nil
}

// Compiled is a pattern compiled by a Compiler.
type Compiled struct {
	x  *Index
	cp *cpattern
}

// Eval appends the pattern's candidates to dst and their arguments to buf,
// which backs them, as Index.Eval does.
func (c *Compiled) Eval(pos []int, h History, max int, dst []Candidate, buf []byte) ([]Candidate, []byte) {
	return c.x.evalCompiled(c.cp, pos, h, max, dst, buf)
}

// EachValue calls fn with each value the pattern's first mapping evaluates
// to (canonical JSON): once, or, for a list pattern, once per element of
// the list among the first it scans, until fn returns false. buf is
// scratch that backs the values; EachValue returns it, grown.
func (c *Compiled) EachValue(pos []int, h History, buf []byte, fn func(val []byte) bool) []byte {
	cp := c.cp
	check := func(it *elem) bool {
		var ok bool
		buf, ok = cp.appendValue(buf[:0], &cp.args[0], pos, h, it)
		return !ok || fn(buf)
	}
	if cp.list == nil {
		check(nil)
	} else if list, text, p, ok := cp.resolve(cp.list, pos, h, nil); ok {
		eachElem(cp.list, p, list, text, func(n int, it elem) bool { return n < maxListScan && check(&it) })
	}
	return buf
}
