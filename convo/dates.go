package convo

import (
	"strings"
	"time"
)

// Dates: the normalisation agents apply most between what people write
// and what tools take. A user writes "May 24", "the 24th of May" or
// "May 24, 2024"; the agent sends "2024-05-24" (ISO 8601, the format of
// dates in JSON APIs). A date written so in a message becomes one more
// token of its segment, its text the ISO date, placed after the words it
// was read from (so the words around it are theirs); values are then
// found in it, and scored, as in any other token. A date without a year
// takes the latest year the session's text named (a current date in the
// system prompt, a year in an earlier message); without one, none is made.
// English month names only.
//
// Two more normalisations shift an ISO date by a day ("the day after my
// flight", "one day later"): tfNextDay and tfPrevDay, learned per
// argument as the others are.

// months maps a month's name or abbreviation, lower-cased, to its number.
var months = map[string]time.Month{
	"january": 1, "february": 2, "march": 3, "april": 4, "may": 5, "june": 6, "july": 7,
	"august": 8, "september": 9, "october": 10, "november": 11, "december": 12,
	"jan": 1, "feb": 2, "mar": 3, "apr": 4, "jun": 6, "jul": 7, "aug": 8,
	"sep": 9, "sept": 9, "oct": 10, "nov": 11, "dec": 12,
}

// monthOf returns the month a token names, or 0.
func monthOf(t string) time.Month {
	if len(t) < 3 || len(t) > 9 {
		return 0
	}
	switch t[0] | 0x20 { // the months' initials: most tokens stop here
	case 'j', 'f', 'm', 'a', 's', 'o', 'n', 'd':
	default:
		return 0
	}
	var b [9]byte
	for i := 0; i < len(t); i++ {
		c := t[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		b[i] = c
	}
	return months[string(b[:len(t)])]
}

// dayOf returns the day of the month a token names: "24", "24th",
// "1st", "02"; 0 if none.
func dayOf(t string) int {
	n, i := 0, 0
	for i < len(t) && i < 2 && t[i] >= '0' && t[i] <= '9' {
		n = n*10 + int(t[i]-'0')
		i++
	}
	if i == 0 || n < 1 || n > 31 {
		return 0
	}
	switch strings.ToLower(t[i:]) {
	case "", "st", "nd", "rd", "th":
		return n
	}
	return 0
}

// yearOf returns the year a token names (a four-digit year from 1900 to
// 2099, alone or leading an ISO date), or 0.
func yearOf(t string) int {
	if len(t) < 4 || (len(t) > 4 && t[4] != '-') {
		return 0
	}
	n := 0
	for i := range 4 {
		if t[i] < '0' || t[i] > '9' {
			return 0
		}
		n = n*10 + int(t[i]-'0')
	}
	if n < 1900 || n > 2099 {
		return 0
	}
	if len(t) > 4 {
		if _, err := time.Parse(time.DateOnly, t); err != nil {
			return 0
		}
	}
	return n
}

// between reports whether only spaces and commas (and at most one "of")
// separate tokens i and j of seg.
func (seg *segment) between(i, j int) bool {
	a := seg.toks[i]
	b := seg.toks[j]
	gap := seg.text[a.off+uint32(a.n) : b.off]
	gap = strings.TrimSpace(strings.ReplaceAll(gap, ",", " "))
	return gap == ""
}

// date is a date read from a segment's words: its ISO text and the
// index of the last token it was read from.
type date struct {
	iso  string
	last int
}

// readDates returns the dates a message's tokens write in words, and
// the latest year the text names (year if it names none). Patterns:
// "May 24", "May 24th, 2024", "24 May", "24th of May 2024"; "May" only
// capitalised (the verb is not a date), any other month in any case.
func readDates(seg *segment, year int) ([]date, int) {
	var out []date
	n := len(seg.toks)
	for i := 0; i < n; i++ {
		t := seg.str(int32(i))
		if y := yearOf(t); y > 0 {
			year = y
			continue
		}
		m := monthOf(t)
		if m == 0 || t == "may" {
			continue
		}
		day, last := 0, i
		// Month day [year]
		if i+1 < n && seg.between(i, i+1) {
			if d := dayOf(seg.str(int32(i + 1))); d > 0 {
				day, last = d, i+1
			}
		}
		// day [of] month [year]
		if day == 0 && i > 0 {
			j := i - 1
			ok := seg.between(j, i)
			if ok && strings.EqualFold(seg.str(int32(j)), "of") && j > 0 {
				j--
				ok = seg.between(j, j+1)
			}
			if ok {
				day = dayOf(seg.str(int32(j)))
			}
		}
		if day == 0 {
			continue
		}
		y := 0
		if last+1 < n && seg.between(last, last+1) {
			if y = yearOf(seg.str(int32(last + 1))); y > 0 && len(seg.str(int32(last+1))) == 4 {
				last++
				year = y
			} else {
				y = 0
			}
		}
		if y == 0 {
			y = year
		}
		if y == 0 {
			continue
		}
		d := time.Date(y, m, day, 0, 0, 0, 0, time.UTC)
		if d.Day() != day { // 31 April
			continue
		}
		out = append(out, date{d.Format(time.DateOnly), last})
		i = last
	}
	return out, year
}

// addDates adds to a message's segment a token for each date it writes
// in words (readDates), after the last token it was read from.
func (st *state) addDates(seg *segment) {
	dates, year := readDates(seg, st.year)
	st.year = year
	if len(dates) == 0 {
		return
	}
	var b strings.Builder
	b.Grow(len(seg.text) + 11*len(dates))
	b.WriteString(seg.text)
	offs := make([]int, len(dates))
	for k, d := range dates {
		b.WriteByte('\n')
		offs[k] = b.Len()
		b.WriteString(d.iso)
	}
	seg.text = b.String()
	seg.size = len(seg.text)
	toks := make([]token, 0, len(seg.toks)+len(dates))
	k := 0
	for i, tk := range seg.toks {
		toks = append(toks, tk)
		for k < len(dates) && dates[k].last == i {
			toks = append(toks, st.dateToken(dates[k].iso, offs[k]))
			k++
		}
	}
	seg.toks = toks
}

// dateToken is the token of an ISO date at offset off of its segment's
// text.
func (st *state) dateToken(iso string, off int) token {
	bits := classBits(iso)
	tk := token{off: uint32(off), n: uint8(len(iso)), bits: bits, word: -1, shape: -1}
	if st.c.readsClass(bits) {
		tk.h = hashString(iso)
		tk.shape = st.shapeOf(iso, bits)
	}
	return tk
}

// shiftDate returns ISO date t moved by days, if t is one.
func shiftDate(t string, days int) (string, bool) {
	if len(t) != 10 || t[4] != '-' || t[7] != '-' {
		return "", false
	}
	d, err := time.Parse(time.DateOnly, t)
	if err != nil {
		return "", false
	}
	return d.AddDate(0, 0, days).Format(time.DateOnly), true
}
