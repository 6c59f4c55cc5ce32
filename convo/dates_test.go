package convo

import (
	"slices"
	"testing"

	"github.com/ahead-dev/ahead/trace"
)

// TestDates: dates written in words become ISO date tokens, placed after
// the words they were read from, with the year said or the latest one the
// session named; words that only look like dates do not.
func TestDates(t *testing.T) {
	c := compile(mineTestdata(t))
	tests := []struct {
		before, text string
		want         []string // the ISO tokens, in order
		after        string   // the token before the first ISO one
	}{
		{"", "I fly on May 24, 2024 from JFK", []string{"2024-05-24"}, "2024"},
		{"The current time is 2024-05-15 15:00:00 EST.", "Can you move it to May 24th?", []string{"2024-05-24"}, "24th"},
		{"Today is 2023-12-30.", "on the 3rd of January 2024 and the 5 Feb", []string{"2024-01-03", "2024-02-05"}, "2024"},
		{"It is 2024-05-15.", "between Sept 30 and oct 2", []string{"2024-09-30", "2024-10-02"}, "30"},
		{"", "May 24, with no year known", nil, ""},
		{"It is 2024-05-15.", "you may 3 times; March 32; April 31; May the 4th", nil, ""},
		{"It is 2024-05-15.", "MAY 1", []string{"2024-05-01"}, "1"},
	}
	for _, tt := range tests {
		st := newState(c, DefaultMaxBytes, false)
		if tt.before != "" {
			st.hear(trace.Event{Kind: trace.KindMessage, Role: trace.RoleSystem, Content: tt.before})
		}
		st.hear(trace.Event{Kind: trace.KindMessage, Role: trace.RoleUser, Content: tt.text})
		seg := st.segs[len(st.segs)-1]
		var got []string
		after := ""
		for i := range seg.toks {
			if s := seg.str(int32(i)); len(s) == 10 && int(seg.toks[i].off) > len(tt.text) {
				if got == nil && i > 0 {
					after = seg.str(int32(i - 1))
				}
				got = append(got, s)
			}
		}
		if !slices.Equal(got, tt.want) || after != tt.after {
			t.Errorf("%q: dates %q after %q, want %q after %q", tt.text, got, after, tt.want, tt.after)
		}
	}
}

// TestShiftDate: the day-shift normalisations, across a month and a leap
// day, and nothing for what is not an ISO date.
func TestShiftDate(t *testing.T) {
	for _, tt := range []struct {
		tf, in, want string
		ok           bool
	}{
		{tfNextDay, "2024-05-31", "2024-06-01", true},
		{tfPrevDay, "2024-03-01", "2024-02-29", true},
		{tfNextDay, "2024-13-01", "", false},
		{tfPrevDay, "20240301", "", false},
		{tfNextDay, "HAT123", "", false},
	} {
		if got, ok := apply(tt.tf, tt.in); got != tt.want || ok != tt.ok {
			t.Errorf("apply(%s, %q) = %q, %v; want %q, %v", tt.tf, tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

// FuzzDates: any message tokenises without a panic, every token lies
// within its segment's text, and every date token read from words is a
// valid ISO date placed after the token it was read from.
func FuzzDates(f *testing.F) {
	for _, s := range []string{"May 24, 2024", "the 3rd of January 2024 and the 5 Feb", "Sept 31", "2024-02-29 Feb 29",
		"May", "24 May", "of May", ", , May 1,", "Dec 31 1899", "jan 1 2100", "March 9th\n2024-01-01 april 30th"} {
		f.Add("It is 2024-05-15.", s)
	}
	c := compile(mineTestdata(f))
	f.Fuzz(func(t *testing.T, before, text string) {
		st := newState(c, DefaultMaxBytes, false)
		st.hear(trace.Event{Kind: trace.KindMessage, Role: trace.RoleSystem, Content: before})
		st.hear(trace.Event{Kind: trace.KindMessage, Role: trace.RoleUser, Content: text})
		seg := st.segs[len(st.segs)-1]
		for i, tk := range seg.toks {
			if int(tk.off)+int(tk.n) > len(seg.text) {
				t.Fatalf("token %d (%d+%d) past the text (%d bytes)", i, tk.off, tk.n, len(seg.text))
			}
			if int(tk.off) < len(text) {
				continue
			}
			iso := seg.str(int32(i))
			if _, ok := shiftDate(iso, 0); !ok {
				t.Fatalf("date token %q is not an ISO date", iso)
			}
			if i == 0 {
				t.Fatalf("date token %q first", iso)
			}
		}
	})
}
