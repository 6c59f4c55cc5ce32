package tooldef

import (
	"cmp"
	"encoding/json"
	"math"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/ahead-dev/ahead/predict"
	"github.com/ahead-dev/ahead/trace"
)

// How much each kind of evidence counts. A value is the argument's when
// its evidence reaches minFill: a schema's own constraint met (an enum
// value said, the pattern or the format matched) does on its own, a
// string with no constraint needs its words around it or its look, and
// being the user's latest words.
const (
	wEnum     = 3.0  // an enum (or const) value said
	wPattern  = 3.0  // a token the pattern matches whole
	wPartial  = 1.0  // ... in part (schema patterns are not anchored)
	wFormat   = 3.0  // a token of the argument's format
	wExample  = 2.0  // a token of the shape of an example (or default)
	wImplied  = 1.5  // the look its name implies (a path for "path")
	wNumber   = 1.0  // a number for a numeric argument
	wNear     = 1.5  // the argument's words just before the token
	wToolNear = 0.5  // the tool's name words just before it
	wUser     = 0.5  // said by the user
	wLatest   = 0.5  // in the user's latest message
	wSystem   = -0.5 // in the system prompt
	wRecency  = -0.2 // × log(1 + the value's recency rank)

	minFill     = 1.5 // a required argument's value
	minOptional = 2.0 // an optional argument is sent only on more than that
	// minAlone is what a tool none of whose words the user said needs of
	// its required arguments: a constraint of its schema met.
	minAlone = 3.0

	wToolName = 1.0 // per word of the tool's name the user said last
	wToolDesc = 0.5 // per word of its description (at most 4 count)
	minNoArgs = 2.0 // a tool with no argument to fill needs this much
	// scoreNone is the score of "none of the declared tools is next", in
	// the softmax that gives each prediction its P.
	scoreNone = 3.0
	maxP      = 0.9
	// nearBytes is how far before a token its words are read.
	nearBytes = 40
	maxCands  = 64 // candidate tokens read per argument, the most recent first
	// maxScan is how many of the latest messages values are read from:
	// the work per message is bounded, whatever the window holds.
	maxScan = 8
)

// value is a candidate value of an argument, and where it was said (the
// message's index in the window and the offset in it; mi -1 for none).
type value struct {
	json   string
	score  float64
	mi, at int
}

// predict returns the session's predictions, best first.
func (s *session) predict(max int) []predict.Prediction {
	if len(s.tools) == 0 || len(s.msgs) == 0 {
		return nil
	}
	var said []string // the content words of the user's latest message
	latest := -1
	for i := len(s.msgs) - 1; i >= 0; i-- {
		if s.msgs[i].role == trace.RoleUser {
			said, latest = s.msgs[i].words, i
			break
		}
	}
	type cand struct {
		tool  string
		args  []byte
		score float64
	}
	var cands []cand
	for _, t := range s.tools {
		ts := 0.0
		for _, w := range t.nameWords {
			if slices.Contains(said, w) {
				ts += wToolName
			}
		}
		nd := 0
		for _, w := range t.descWords {
			if nd < 4 && !slices.Contains(t.nameWords, w) && slices.Contains(said, w) {
				ts += wToolDesc
				nd++
			}
		}
		var req, opt []*arg
		fill := true
		for _, a := range t.args {
			switch {
			case a.required && !a.fillable():
				fill = false
			case a.required:
				req = append(req, a)
			case a.fillable():
				opt = append(opt, a)
			}
		}
		if !fill {
			continue
		}
		var sum float64
		// alts: the second value of the first required argument, as a
		// second call.
		var firstAlt *value
		vals := make([]value, len(req))
		for i, a := range req {
			top := s.values(t, a, latest)
			if len(top) > 0 && slices.ContainsFunc(vals[:i], func(v value) bool { return v.json == top[0].json }) {
				// One value in two arguments is rarely meant: the next best.
				top = top[1:]
			}
			if len(top) == 0 || top[0].score < minFill {
				fill = false
				break
			}
			vals[i] = top[0]
			sum += top[0].score
			if i == 0 && len(top) > 1 && top[1].score >= minFill {
				firstAlt = &top[1]
			}
		}
		if !fill {
			continue
		}
		inOrder(req, vals)
		score := ts
		switch {
		case len(req) > 0 && ts == 0 && sum/float64(len(req)) < minAlone:
			continue
		case len(req) > 0:
			score += sum / float64(len(req))
		case ts < minNoArgs:
			continue
		}
		var optNames []string
		var optVals []value
		for _, a := range opt {
			top := s.values(t, a, latest)
			if len(top) > 0 && (slices.ContainsFunc(vals, func(v value) bool { return v.json == top[0].json }) ||
				slices.ContainsFunc(optVals, func(v value) bool { return v.json == top[0].json })) {
				continue // one value in two arguments: see above
			}
			if len(top) > 0 && top[0].score >= minOptional {
				optNames = append(optNames, a.name)
				optVals = append(optVals, top[0])
				score += top[0].score / 2
			}
		}
		names := make([]string, 0, len(req)+len(optNames))
		for _, a := range req {
			names = append(names, a.name)
		}
		names = append(names, optNames...)
		all := append(vals, optVals...)
		cands = append(cands, cand{t.name, object(names, all), score})
		if firstAlt != nil && !slices.ContainsFunc(all[1:], func(v value) bool { return v.json == firstAlt.json }) {
			alt := slices.Clone(all)
			alt[0] = *firstAlt
			cands = append(cands, cand{t.name, object(names, alt), score - (vals[0].score - firstAlt.score)})
		}
	}
	if len(cands) == 0 {
		return nil
	}
	z := math.Exp(scoreNone)
	for _, c := range cands {
		z += math.Exp(c.score)
	}
	slices.SortStableFunc(cands, func(a, b cand) int { return cmp.Compare(b.score, a.score) })
	out := make([]predict.Prediction, 0, min(max, len(cands)))
	for _, c := range cands[:min(max, len(cands))] {
		p := min(maxP, math.Exp(c.score)/z)
		out = append(out, predict.Prediction{Tool: c.tool, Args: c.args, P: p, Origin: predict.OriginMessage})
	}
	return out
}

// object is the JSON object of names and values.
func object(names []string, vals []value) json.RawMessage {
	b := []byte{'{'}
	for i, n := range names {
		if i > 0 {
			b = append(b, ',')
		}
		k, _ := json.Marshal(n)
		b = append(b, k...)
		b = append(b, ':')
		b = append(b, vals[i].json...)
	}
	return append(b, '}')
}

// values returns argument a's two best values in the window, best first.
func (s *session) values(t *tool, a *arg, latest int) []value {
	var best [2]value
	n := 0
	add := func(v value) {
		switch {
		case n > 0 && best[0].json == v.json:
			best[0].score = max(best[0].score, v.score)
		case n > 1 && best[1].json == v.json:
			best[1].score = max(best[1].score, v.score)
			if best[1].score > best[0].score {
				best[0], best[1] = best[1], best[0]
			}
		case n < 2:
			best[n] = v
			n++
			if n == 2 && best[1].score > best[0].score {
				best[0], best[1] = best[1], best[0]
			}
		case v.score > best[1].score:
			best[1] = v
			if best[1].score > best[0].score {
				best[0], best[1] = best[1], best[0]
			}
		}
	}
	rank := 0
	for mi := len(s.msgs) - 1; mi >= max(0, len(s.msgs)-maxScan) && rank < maxCands; mi-- {
		m := &s.msgs[mi]
		role := 0.0
		switch m.role {
		case trace.RoleUser:
			role = wUser
			if mi == latest {
				role += wLatest
			}
		case trace.RoleSystem:
			role = wSystem
		}
		if len(a.enum) > 0 {
			for i, e := range a.enumText {
				if at := wordIndex(m.lower, e); at >= 0 {
					add(value{string(a.enum[i]), wEnum + role + wRecency*math.Log1p(float64(rank)) + near(lastWordBefore(m.lower, at), t, a), mi, at})
				}
			}
			rank++
			continue
		}
		for ti := len(m.toks) - 1; ti >= 0 && rank < maxCands; ti-- {
			tk := &m.toks[ti]
			ev, ok := a.evidence(tk)
			if !ok {
				continue
			}
			near := near(tk.prev, t, a)
			if ev < 0 && near < wNear {
				// A plain word is the value only right after the
				// argument's own words ("search for programmer").
				continue
			}
			ev = max(ev, 0)
			js := tk.text
			if a.typ == "string" || a.typ == "" {
				js = tk.js
			}
			if a.list {
				js = "[" + js + "]"
			}
			add(value{js, ev + role + wRecency*math.Log1p(float64(rank)) + near, mi, tk.start})
			rank++
		}
	}
	return best[:n]
}

// evidence is how much a token's own look says it is a value of a, and
// false when it cannot be one; negative for a plain word, which only the
// argument's words just before it make a value.
func (a *arg) evidence(tk *token) (float64, bool) {
	tok := tk.text
	switch a.typ {
	case "integer", "number":
		f, ok := tk.num, tk.isNum
		if a.typ == "integer" {
			ok = tk.isInt
		}
		if !ok || (a.minimum != nil && f < *a.minimum) || (a.maximum != nil && f > *a.maximum) {
			return 0, false
		}
		return wNumber, true
	}
	if a.pattern != nil {
		loc := a.pattern.FindStringIndex(tok)
		switch {
		case loc == nil:
			return 0, false
		case loc[0] == 0 && loc[1] == len(tok):
			return wPattern, true
		}
		return wPartial, true
	}
	if a.format != "" {
		if ok, known := matchesFormat(a.format, tok); known {
			if !ok {
				return 0, false
			}
			return wFormat, true
		}
	}
	ev := 0.0
	if len(a.shapes) > 0 && slices.Contains(a.shapes, shape(tok)) {
		ev = wExample
	}
	if kind := a.implied; kind != "" {
		if looksLike(kind, tok) {
			return max(ev, wImplied), true
		}
		if kind != "path" {
			return 0, false // an email argument is no email's place for a word
		}
	}
	if ev == 0 && tk.plain {
		if tk.stop {
			return 0, false
		}
		// A plain word ("programmer", "Please"): see values.
		return -1, true
	}
	return ev, true
}

// hasValueLook reports whether a token looks like a value rather than a
// word of a sentence: it has a digit, a symbol, or a capital past its
// first letter.
func hasValueLook(tok string) bool {
	for i, r := range tok {
		if unicode.IsDigit(r) || (!unicode.IsLetter(r) && r != '-' && r != '\'') || (i > 0 && unicode.IsUpper(r)) {
			return true
		}
	}
	return false
}

// lastWordBefore is the last content word in the nearBytes of text
// before offset at.
func lastWordBefore(text string, at int) string {
	from := max(0, at-nearBytes)
	for from > 0 && !utf8.RuneStart(text[from]) {
		from++
	}
	return lastWord(text[from:at])
}

// near is the score of w, the last word said before a value ("the file
// X", "order X", "search for X"; stopwords are no words here): one of
// the argument's words, or of the tool's name.
func near(w string, t *tool, a *arg) float64 {
	if w == "" {
		return 0
	}
	switch {
	case slices.Contains(a.words, w):
		return wNear
	case slices.Contains(t.nameWords, w):
		return wToolNear
	}
	return 0
}

// wordIndex returns where phrase occurs in s as whole words, or -1.
func wordIndex(s, phrase string) int {
	for off := 0; off < len(s); {
		i := strings.Index(s[off:], phrase)
		if i < 0 {
			return -1
		}
		i += off
		end := i + len(phrase)
		if (i == 0 || !isWordByte(s, i-1, true)) && (end == len(s) || !isWordByte(s, end, false)) {
			return i
		}
		off = i + 1
	}
	return -1
}

func isWordByte(s string, i int, before bool) bool {
	var r rune
	if before {
		r, _ = utf8.DecodeLastRuneInString(s[:i+1])
	} else {
		r, _ = utf8.DecodeRuneInString(s[i:])
	}
	return unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_'
}

// inOrder gives arguments that nothing but their order tells apart (the
// same kind of value, no constraint of their own) the values said in one
// message in the order they were said, in the order the schema declares
// the arguments: "the sum of 17 and 25" is a=17, b=25, whichever the
// recency of mentions ranked first.
func inOrder(args []*arg, vals []value) {
	for i := range args {
		var same []int
		for j := i; j < len(args); j++ {
			if alike(args[i], args[j]) && vals[j].mi == vals[i].mi && vals[j].mi >= 0 {
				same = append(same, j)
			}
		}
		if len(same) < 2 || same[0] != i {
			continue
		}
		vs := make([]value, len(same))
		for k, j := range same {
			vs[k] = vals[j]
		}
		slices.SortStableFunc(vs, func(x, y value) int { return cmp.Compare(x.at, y.at) })
		for k, j := range same {
			vals[j] = vs[k]
		}
	}
}

// alike reports whether two arguments take the same kind of value with
// nothing of their own to tell them apart.
func alike(a, b *arg) bool {
	return a.typ == b.typ && a.list == b.list && len(a.enum) == 0 && len(b.enum) == 0 && a.format == b.format &&
		a.implied == b.implied && (a.pattern == nil) == (b.pattern == nil) && (a.pattern == nil || a.pattern.String() == b.pattern.String())
}
