package convo

import (
	"hash/maphash"
	"strconv"
	"strings"

	"github.com/ahead-dev/ahead/internal/text"
)

// Text is read by token, as package pattern reads outputs: a token is a
// maximal run of letters, digits, non-ASCII bytes and the characters
// _ . / - ~ + @ # %, so ids, numbers, e-mail addresses, dates and paths
// stay whole while spaces, quotes, brackets, colons and commas separate
// them. A trailing '.' (the end of a sentence) is trimmed.

// sentenceStart reports whether the token at s[i:] is a capitalised word
// that begins a sentence: an upper-case letter then a lower-case one
// ("Could", "My"; not "I", "JFK", "W123"), at the start of the text or
// after a sentence's end ('.', '!', '?') or a line break, with only
// spaces, quotes, brackets and list marks between.
func sentenceStart(s string, i int) bool {
	if i+1 >= len(s) || s[i] < 'A' || s[i] > 'Z' || s[i+1] < 'a' || s[i+1] > 'z' {
		return false
	}
	for j := i - 1; j >= 0; j-- {
		switch s[j] {
		case ' ', '\t', '"', '\'', '(', '[', '*', '-', '>':
			continue
		case '.', '!', '?', '\n', '\r':
			return true
		}
		return false
	}
	return true
}

// countRuns counts the runs of token bytes in s: the tokens of s, and
// those eachToken skips (all dots, too long).
func countRuns(s string) int {
	n := 0
	in := false
	for i := 0; i < len(s); i++ {
		t := tokBits[s[i]] != 0
		if t && !in {
			n++
		}
		in = t
	}
	return n
}

// maxTokenLen bounds the tokens that can be values: longer runs (base64
// blobs, minified code) are skipped.
const maxTokenLen = 96

// eachToken calls f with every token of s, trimmed, in order.
func eachToken(s string, f func(tok string)) {
	for i := 0; i < len(s); {
		if !text.IsTokenByte(s[i]) {
			i++
			continue
		}
		j := i
		for j < len(s) && text.IsTokenByte(s[j]) {
			j++
		}
		t := strings.TrimRight(s[i:j], ".")
		if t != "" && len(t) <= maxTokenLen {
			f(t)
		}
		i = j
	}
}

// isWord reports whether t is a word that statistics may keep: lower-case
// ASCII letters only, at least two of them. A capitalised word, a name or
// anything with a digit never qualifies (ISSUE-NOTES, privacy).
func isWord(t string) bool {
	if len(t) < 2 || len(t) > 24 {
		return false
	}
	for i := 0; i < len(t); i++ {
		if t[i] < 'a' || t[i] > 'z' {
			return false
		}
	}
	return true
}

// shape is a token's character classes with runs collapsed: a lower-case
// letter reads 'a', an upper-case one 'A', a digit '9', a non-ASCII byte
// 'u', and the other token characters stand for themselves
// ("emma_kim_9957" → "a_a_9", "#W2378156" → "#A9"). Long shapes are cut.
func shape(t string) string {
	var b [16]byte
	return string(shapeBytes(t, b[:0]))
}

// shapeBytes appends the shape of t to dst (at most 16 bytes).
func shapeBytes(t string, dst []byte) []byte {
	n := 0
	var last byte
	for i := 0; i < len(t); i++ {
		c := classOf(t[i])
		if c == last {
			continue
		}
		last = c
		if n == 15 {
			dst = append(dst, '*')
			break
		}
		dst = append(dst, c)
		n++
	}
	return dst
}

// shapeCodes maps packed shapes (packShape) to shape ids: a token's shape
// looked up by a 64-bit key, not by a string.
type shapeCodes map[uint64]int32

// newShapeCodes packs the shapes of ids that pack (those of tokens do).
func newShapeCodes(ids map[string]int32) shapeCodes {
	codes := make(shapeCodes, len(ids))
	for shp, id := range ids {
		if k, ok := packShape([]byte(shp)); ok {
			codes[k] = id
		}
	}
	return codes
}

// packShape packs a shape of at most 16 characters, 4 bits each, when each
// is a class letter of a token byte or the '*' of a cut shape; distinct
// shapes pack to distinct keys (no character packs to 0).
func packShape(shp []byte) (uint64, bool) {
	if len(shp) > 16 {
		return 0, false
	}
	var k uint64
	for i, c := range shp {
		v := shapeNibble[c]
		if v == 0 {
			return 0, false
		}
		k |= uint64(v) << (4 * i)
	}
	return k, true
}

// shapeNibble numbers the characters a token's shape is spelled with
// from 1, 0 for the others.
var shapeNibble = func() (t [256]uint8) {
	for i, c := range []byte("aA9u_./-~+@#%*") {
		t[c] = uint8(i + 1)
	}
	return t
}()

// classOf is the class letter of byte c (see shape).
func classOf(c byte) byte { return classTab[c] }

var classTab = func() (t [256]byte) {
	for c := range t {
		t[c] = classOfSlow(byte(c))
	}
	return t
}()

func classOfSlow(c byte) byte {
	switch {
	case c >= 'a' && c <= 'z':
		return 'a'
	case c >= 'A' && c <= 'Z':
		return 'A'
	case c >= '0' && c <= '9':
		return '9'
	case c >= 0x80:
		return 'u'
	}
	return c
}

// classBits is the set of a token's character classes, the coarse key
// candidates are found by: shapes differ in order ("A9A" and "9A") where
// the set does not.
func classBits(t string) uint16 {
	var m uint16
	for i := 0; i < len(t); i++ {
		m |= classBit(t[i])
	}
	return m
}

// classChars are the classes' letters; '?' stands for any other byte
// (a whole argument value may hold one).
const classChars = "aA9u_./-~+@#%?"

func classBit(c byte) uint16 { return classBitTable[c] }

// tokBits is classBit of a token byte, 0 for the others.
var tokBits = func() (t [256]uint16) {
	for c := range t {
		if text.IsTokenByte(byte(c)) {
			t[c] = classBitTable[c]
		}
	}
	return t
}()

// lowerBit is the class bit of a lower-case letter.
var lowerBit = classBitTable['a']

var classBitTable = func() (t [256]uint16) {
	for c := range t {
		i := strings.IndexByte(classChars, classOfSlow(byte(c)))
		if i < 0 {
			i = len(classChars) - 1
		}
		t[c] = 1 << i
	}
	return t
}()

// classString spells a class set with the characters of classChars.
func classString(m uint16) string {
	var b []byte
	for i := 0; i < len(classChars); i++ {
		if m&(1<<i) != 0 {
			b = append(b, classChars[i])
		}
	}
	return string(b)
}

func parseClass(s string) uint16 {
	var m uint16
	for i := 0; i < len(s); i++ {
		if j := strings.IndexByte(classChars, s[i]); j >= 0 {
			m |= 1 << j
		}
	}
	return m
}

// lengthBuckets are the names lengthBucket gives, by lengthIdx.
var lengthBuckets = [nLenBuckets]string{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9-12", "13-16", "17-24", "25-32", "33+"}

const nLenBuckets = 14

// lengthIdx is the index of lengthBucket(n) in lengthBuckets.
func lengthIdx(n int) uint8 {
	switch {
	case n <= 8:
		return uint8(n)
	case n <= 12:
		return 9
	case n <= 16:
		return 10
	case n <= 24:
		return 11
	case n <= 32:
		return 12
	}
	return 13
}

// seed hashes values within this process; hashes are never stored.
var seed = maphash.MakeSeed()

func hashString(s string) uint64 { return maphash.String(seed, s) }

func hashBytes(b []byte) uint64 { return maphash.Bytes(seed, b) }

// tfAppend appends transform tf of t to dst, as apply does, without
// allocating a string.
func tfAppend(dst []byte, tf uint8, t string) ([]byte, bool) {
	ascii := true
	for i := 0; i < len(t); i++ {
		if t[i] >= 0x80 {
			ascii = false
			break
		}
	}
	name := transforms[tf]
	if !ascii && name != tfSame {
		v, ok := apply(name, t)
		return append(dst, v...), ok
	}
	switch name {
	case tfSame:
		return append(dst, t...), true
	case tfLower:
		changed := false
		for i := 0; i < len(t); i++ {
			c := t[i]
			if c >= 'A' && c <= 'Z' {
				c += 'a' - 'A'
				changed = true
			}
			dst = append(dst, c)
		}
		return dst, changed
	case tfUpper:
		changed := false
		for i := 0; i < len(t); i++ {
			c := t[i]
			if c >= 'a' && c <= 'z' {
				c -= 'a' - 'A'
				changed = true
			}
			dst = append(dst, c)
		}
		return dst, changed
	case tfTitle:
		if t == "" {
			return dst, false
		}
		changed := false
		for i := 0; i < len(t); i++ {
			c := t[i]
			if i == 0 && c >= 'a' && c <= 'z' {
				c -= 'a' - 'A'
				changed = true
			} else if i > 0 && c >= 'A' && c <= 'Z' {
				c += 'a' - 'A'
				changed = true
			}
			dst = append(dst, c)
		}
		return dst, changed
	}
	v, ok := apply(transforms[tf], t)
	return append(dst, v...), ok
}

// isNumber reports whether s is a JSON number.
func isNumber(s []byte) bool {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	if i == len(s) || s[i] < '0' || s[i] > '9' {
		return false
	}
	if s[i] == '0' {
		i++
	} else {
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	}
	if i < len(s) && s[i] == '.' {
		i++
		j := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == j {
			return false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		j := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == j {
			return false
		}
	}
	return i == len(s)
}

// lengthBucket names a token's length: exact up to 8, then in ranges.
func lengthBucket(n int) string {
	switch {
	case n <= 8:
		return strconv.Itoa(n)
	case n <= 12:
		return "9-12"
	case n <= 16:
		return "13-16"
	case n <= 24:
		return "17-24"
	case n <= 32:
		return "25-32"
	}
	return "33+"
}

// Normalisations agents apply between what was said and what they send.
// Each is general: none knows a tool, an argument or a domain.
const (
	tfSame   = "same"   // as written
	tfLower  = "lower"  // lower-cased
	tfUpper  = "upper"  // upper-cased
	tfTitle  = "title"  // first letter upper-cased, the rest lower
	tfNoHash = "nohash" // a leading '#' dropped ("#W123" → "W123")
	tfHash   = "hash"   // a '#' added ("W123" → "#W123")
	tfDigits = "digits" // the number inside ("order #W123" → "123")
	// An ISO date a day later or earlier ("the day after 2024-05-23");
	// see dates.go.
	tfNextDay = "nextday"
	tfPrevDay = "prevday"
)

var transforms = []string{tfSame, tfLower, tfUpper, tfTitle, tfNoHash, tfHash, tfDigits, tfNextDay, tfPrevDay}

// tfSameIdx is the index of tfSame in transforms.
const tfSameIdx = 0

// apply returns tf applied to t, or false if it does not apply or changes
// nothing a more basic one would give.
func apply(tf, t string) (string, bool) {
	switch tf {
	case tfSame:
		return t, true
	case tfLower:
		l := strings.ToLower(t)
		return l, l != t
	case tfUpper:
		u := strings.ToUpper(t)
		return u, u != t
	case tfTitle:
		if t == "" || t[0] >= 0x80 {
			return "", false
		}
		v := strings.ToUpper(t[:1]) + strings.ToLower(t[1:])
		return v, v != t
	case tfNoHash:
		if len(t) > 1 && t[0] == '#' {
			return t[1:], true
		}
	case tfHash:
		if t != "" && t[0] != '#' {
			return "#" + t, true
		}
	case tfNextDay:
		return shiftDate(t, 1)
	case tfPrevDay:
		return shiftDate(t, -1)
	case tfDigits:
		i := strings.IndexAny(t, "0123456789")
		if i < 0 {
			return "", false
		}
		j := i
		for j < len(t) && t[j] >= '0' && t[j] <= '9' {
			j++
		}
		if d := t[i:j]; d != t {
			return d, true
		}
	}
	return "", false
}

// transformOf returns the normalisations that turn token t into value v.
func transformOf(t, v string, dst []string) []string {
	for _, tf := range transforms {
		if w, ok := apply(tf, t); ok && w == v {
			dst = append(dst, tf)
		}
	}
	return dst
}
