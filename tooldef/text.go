package tooldef

import (
	"encoding/json"
	"net/mail"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// words appends to dst the distinct content words of s: lower-case
// letters, split at anything else and at a lower-to-upper change
// (getUser: get, user), a plural's "s" dropped, stopwords left out.
func words(s string, dst []string) []string {
	start := -1
	flush := func(end int) {
		if start < 0 {
			return
		}
		w := stem(strings.ToLower(s[start:end]))
		start = -1
		if len(w) < 2 || stopwords[w] || slices.Contains(dst, w) {
			return
		}
		dst = append(dst, w)
	}
	prevLower := false
	for i, r := range s {
		switch {
		case unicode.IsLetter(r):
			if unicode.IsUpper(r) && prevLower {
				flush(i)
			}
			if start < 0 {
				start = i
			}
			prevLower = unicode.IsLower(r)
		default:
			flush(i)
			prevLower = false
		}
	}
	flush(len(s))
	return dst
}

// stem drops a plural's "s" (files: file; addresses: address).
func stem(w string) string {
	switch {
	case len(w) > 4 && strings.HasSuffix(w, "sses"):
		return w[:len(w)-2]
	case len(w) > 3 && strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss") && !strings.HasSuffix(w, "us"):
		return w[:len(w)-1]
	}
	return w
}

// stopwords say nothing of what a tool does or which value is meant.
var stopwords = wordSet(`a an the of to in on at by for from with without and or not no is are be
		been was were it its this that these those as if then than so such can could should would will may
		must do does did done has have had i me my we our you your he she they them their there here what
		which who whom how when where why all any each every some one two more most other into over under
		about after before up down out only also just please want need like get set use using used via
		given provided return returns if per us let value values string number true false null`)

func wordSet(s string) map[string]bool {
	m := make(map[string]bool)
	for w := range strings.FieldsSeq(s) {
		m[w] = true
	}
	return m
}

// token is a value-like token of a message: a run of characters that are
// neither space nor brackets, quotes or separating punctuation, trimmed of
// a sentence's final punctuation (notes.txt, /tmp/a, #W123, 2024-05-01,
// user@example.com).
type token struct {
	text  string
	start int // byte offset in the message
	// prev is the last content word before it (within nearBytes), set
	// by lastWords.
	prev string
	// js is its text as a JSON string; plain marks a word of a sentence
	// (no value look, see hasValueLook), stop a stopword.
	js          string
	plain, stop bool
	// num is its value when it is a number (isNum), an integer (isInt).
	num          float64
	isNum, isInt bool
}

// lastWords sets each token's prev: the last content word said in the
// nearBytes before it.
func lastWords(text string, toks []token) {
	for i := range toks {
		at := toks[i].start
		from := max(0, at-nearBytes)
		for from > 0 && !utf8.RuneStart(text[from]) {
			from++
		}
		toks[i].prev = lastWord(text[from:at])
	}
}

// lastWord returns the last content word of s (as words reads them), or
// "".
func lastWord(s string) string {
	end := len(s)
	for end > 0 {
		// Skip to the end of the last run of letters.
		r, n := utf8.DecodeLastRuneInString(s[:end])
		if !unicode.IsLetter(r) {
			end -= n
			continue
		}
		start := end
		for start > 0 {
			r, n := utf8.DecodeLastRuneInString(s[:start])
			if !unicode.IsLetter(r) {
				break
			}
			start -= n
		}
		ws := words(s[start:end], nil)
		if len(ws) > 0 {
			return ws[len(ws)-1]
		}
		end = start
	}
	return ""
}

func tokens(s string, dst []token) []token {
	start := -1
	for i, r := range s {
		if isSep(r) {
			if start >= 0 {
				dst = appendToken(dst, s[start:i], start)
				start = -1
			}
			continue
		}
		if start < 0 {
			start = i
		}
	}
	if start >= 0 {
		dst = appendToken(dst, s[start:], start)
	}
	return dst
}

func isSep(r rune) bool {
	switch r {
	case '(', ')', '[', ']', '{', '}', '<', '>', '"', '\'', '`', ',', ';', '|', '“', '”', '‘', '’':
		return true
	}
	return unicode.IsSpace(r)
}

func appendToken(dst []token, t string, start int) []token {
	t = strings.TrimRight(t, ".:!?")
	if t == "" || len(t) > 512 {
		return dst
	}
	js, _ := json.Marshal(t)
	plain := !hasValueLook(t)
	tk := token{text: t, start: start, js: string(js), plain: plain, stop: plain && stopwords[strings.ToLower(t)]}
	if c := t[0]; c == '-' || c == '.' || (c >= '0' && c <= '9') {
		tk.num, tk.isNum = isNumber(t, false)
		_, tk.isInt = isNumber(t, true)
	}
	return append(dst, tk)
}

// shape is a token's characters collapsed to their classes (a: letters,
// 9: digits, others as they are), runs of one class as one: #W1234567 →
// #a9, 2024-05-01 → 9-9-9, notes.txt → a.a.
func shape(s string) string {
	var b []byte
	var last byte
	for _, r := range s {
		c := byte('?')
		switch {
		case unicode.IsLetter(r):
			c = 'a'
		case unicode.IsDigit(r):
			c = '9'
		case r < utf8.RuneSelf:
			c = byte(r)
		}
		if c == last && (c == 'a' || c == '9') {
			continue
		}
		b = append(b, c)
		last = c
	}
	return string(b)
}

// matchesFormat reports whether a token is a value of a JSON-schema
// format; known is false for a format this package does not check.
func matchesFormat(format, s string) (ok, known bool) {
	switch format {
	case "date":
		_, err := time.Parse("2006-01-02", s)
		return err == nil, true
	case "date-time":
		_, err := time.Parse(time.RFC3339, s)
		return err == nil, true
	case "time":
		_, err := time.Parse("15:04:05", strings.TrimSuffix(s, "Z"))
		return err == nil, true
	case "email":
		a, err := mail.ParseAddress(s)
		return err == nil && a.Address == s, true
	case "uri", "url", "iri", "uri-reference":
		i := strings.Index(s, "://")
		return i > 0 && i+3 < len(s), true
	case "uuid":
		return uuidRE.MatchString(s), true
	case "ipv4":
		a, err := netip.ParseAddr(s)
		return err == nil && a.Is4(), true
	case "ipv6":
		a, err := netip.ParseAddr(s)
		return err == nil && a.Is6(), true
	}
	return false, false
}

var uuidRE = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// isNumber reports whether s is a JSON number (an integer, if integer).
func isNumber(s string, integer bool) (float64, bool) {
	if integer {
		n, err := strconv.ParseInt(s, 10, 64)
		return float64(n), err == nil
	}
	f, err := strconv.ParseFloat(s, 64)
	return f, err == nil && !strings.ContainsAny(s, "xXpP_iInN")
}

// nameFormats are the formats an argument's name or description words
// imply when its schema names none: what a value called a path, a URL or
// an email looks like is not a domain's, it is the word's.
var nameFormats = map[string]string{
	"path": "path", "file": "path", "filename": "path", "directory": "path", "dir": "path", "folder": "path",
	"url": "uri", "uri": "uri", "link": "uri", "endpoint": "uri",
	"email": "email", "mail": "email",
	"date": "date", "day": "date",
	"uuid": "uuid",
	"ip":   "ip",
}

// looksLike reports whether a token has the look a name-implied format
// gives it.
func looksLike(kind, s string) bool {
	switch kind {
	case "path":
		return strings.ContainsRune(s, '/') || strings.ContainsRune(s, '\\') ||
			(strings.Count(s, ".") == 1 && !strings.HasPrefix(s, ".") && len(s) > 2 && !strings.HasSuffix(s, "."))
	case "ip":
		_, err := netip.ParseAddr(s)
		return err == nil
	}
	ok, _ := matchesFormat(kind, s)
	return ok
}
