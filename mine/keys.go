package mine

import (
	"strings"

	"github.com/ahead-dev/ahead/internal/rawjson"
	"github.com/ahead-dev/ahead/internal/text"
)

// Discovery looks values up in the indexes of earlier events by a few
// kinds of key, all cut from the arguments of the session's calls: a whole
// value (findSources), a token or path component of a string value (its
// template parts), and a start of a string value that ends at a separator
// or where such a part starts (findBase). An event's output holds far more
// lines, tokens and normalised forms than any call of its session ever
// names, so before indexing a session discovery hashes every key its calls
// can look up (wantedKeys) and the index keeps only places whose key hashes
// to one of them: the same places under every key looked up (a hash that
// collides only keeps a place never looked up), without building, for the
// rest, the key strings, the places and the map entries the collector then
// marks over and over.
//
// Every lookup of an evIndex must use a key that wantedKeys adds; the keys
// are hashed as FNV-1a of their canonical JSON (keyHash), strings without
// building it (quotedHash).

// keySet holds the hashes of the keys worth indexing; nil holds all.
type keySet map[uint64]struct{}

func (k keySet) has(h uint64) bool {
	if k == nil {
		return true
	}
	_, ok := k[h]
	return ok
}

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

func hashByte(h uint64, c byte) uint64 { return (h ^ uint64(c)) * fnvPrime }

// keyHash is the hash of a key: canonical JSON.
func keyHash(key []byte) uint64 {
	h := uint64(fnvOffset)
	for _, c := range key {
		h = hashByte(h, c)
	}
	return h
}

// hashEscaped continues h over the body of s's canonical JSON string
// (rawjson.AppendEscaped), without building it.
func hashEscaped(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c == '"' || c == '\\' {
			var b [8]byte
			for _, e := range rawjson.AppendEscaped(b[:0], s[i:i+1]) {
				h = hashByte(h, e)
			}
			continue
		}
		h = hashByte(h, c)
	}
	return h
}

// quotedHash is keyHash(rawjson.AppendQuoted(nil, s)).
func quotedHash(s string) uint64 {
	return hashByte(hashEscaped(hashByte(fnvOffset, '"'), s), '"')
}

// wantedKeys collects the keys the calls' argument values can be looked
// up by, for a session: add each value of each call once.
type wantedKeys struct {
	set   keySet
	done  map[uint64]struct{} // the values added (keyHash)
	spans []text.Span
	state []uint64 // per end of a start of the value: the hash so far
	ends  []bool   // the starts added, by end
}

// reset empties w for another session. Clearing a map costs its
// capacity: the maps a long session grew are dropped, not cleared for
// each short one after it.
func (w *wantedKeys) reset() {
	if w.set == nil || len(w.set) > 4096 {
		w.set, w.done = make(keySet), make(map[uint64]struct{})
	}
	clear(w.set)
	clear(w.done)
}

// add adds the keys findSources and findBase look value v (canonical JSON)
// up by.
func (w *wantedKeys) add(v []byte) {
	hv := keyHash(v)
	if _, ok := w.done[hv]; ok {
		return
	}
	w.done[hv] = struct{}{}
	w.set[hv] = struct{}{}
	s, ok := templated(v)
	if !ok {
		return
	}
	// The hash of each start s[:i], closed: state[i] is the hash of
	// '"' and the escaped s[:i].
	w.state = append(w.state[:0], hashByte(fnvOffset, '"'))
	for i := 0; i < len(s); i++ {
		w.state = append(w.state, hashEscaped(w.state[i], s[i:i+1]))
	}
	if cap(w.ends) < len(s)+1 {
		w.ends = make([]bool, len(s)+1)
	}
	w.ends = w.ends[:len(s)+1]
	clear(w.ends)
	start := func(i int) {
		if i >= 2 && !w.ends[i] {
			w.ends[i] = true
			w.set[hashByte(w.state[i], '"')] = struct{}{}
		}
	}
	// findBase's starts of a prefix s[:p]: s[:i] for i < p where s[i] is a
	// separator, and s[:p] itself.
	for i := 2; i < len(s); i++ {
		if isSeparator(s[i]) {
			start(i)
		}
	}
	w.spans = eachTemplatePart(w.spans[:0], s, func(sp text.Span) {
		w.set[quotedHash(s[sp.Start:sp.End])] = struct{}{}
		start(sp.Start)
	})
}

// templated returns the string of v when findSources looks for its parts
// (a template: constant text around a value found elsewhere).
func templated(v []byte) (string, bool) {
	if len(v) < 2 || v[0] != '"' || len(v) > maxTemplateLen+2 {
		return "", false
	}
	return rawjson.Unquote(v)
}

// eachTemplatePart calls f with each part of s findSources looks up: its
// tokens, and the components of a token that is a path (a directory or
// file name joined into a longer path), but not s whole. It returns the
// spans of s's tokens (in spans, reused).
func eachTemplatePart(spans []text.Span, s string, f func(text.Span)) []text.Span {
	try := func(sp text.Span) {
		if sp.Start == 0 && sp.End == len(s) {
			return // the whole value: found above
		}
		f(sp)
	}
	spans = text.TokenSpans(spans, s)
	for _, sp := range spans {
		try(sp)
		if tok := s[sp.Start:sp.End]; strings.Contains(tok, "/") {
			start := sp.Start
			for i := sp.Start; i <= sp.End; i++ {
				if i == sp.End || s[i] == '/' {
					if i > start && !(start == sp.Start && i == sp.End) {
						try(text.Span{Start: start, End: i})
					}
					start = i + 1
				}
			}
		}
	}
	return spans
}
