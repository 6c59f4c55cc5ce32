package pattern

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

// Describe formats how a mapping derives its argument, e.g.
// `order_id = out(get_user_details)/orders/0` or
// `command = "python " + tok(args(#0)/command, line 0, token -1)`.
// Events are named #j (the context element j back from the latest) or by
// their signature (the session's most recent event with it).
func (m *Mapping) Describe(list *ListSource) string {
	if m.Const != nil {
		return m.Arg + " = " + string(m.Const)
	}
	var src string
	switch m.Part {
	case PartItem:
		src = describeSource(list.From, list.Part, list.Path)
		if list.Every {
			src = "every " + src
		}
		if list.Lines {
			src = "lines of " + src
		}
		src = "each(" + src + ")" + m.Path
	default:
		src = describeSource(*m.From, m.Part, m.Path)
	}
	if m.Text != nil {
		src = describeText(src, m.Text)
	}
	if m.Norm != "" {
		src = m.Norm + "(" + src + ")"
	}
	parts := []string{src}
	if m.Prefix != "" {
		parts = append([]string{strconv.Quote(m.Prefix)}, parts...)
	}
	if m.Suffix != "" {
		parts = append(parts, strconv.Quote(m.Suffix))
	}
	if b := m.Base; b != nil {
		base := "base " + describePart(b.Part) + b.Path // of the event the rest is read from
		if b.From != nil {
			base = "base " + describeSource(*b.From, b.Part, b.Path)
		}
		if b.Text != nil {
			base = "base " + describeText(strings.TrimPrefix(base, "base "), b.Text)
		}
		parts = append([]string{base}, parts...)
	}
	return m.Arg + " = " + strings.Join(parts, " + ")
}

func describeText(src string, sel *TextSel) string {
	s := "line " + strconv.Itoa(sel.Line)
	if sel.Token != nil {
		s += ", token " + strconv.Itoa(*sel.Token)
	}
	return "text(" + src + ", " + s + ")"
}

func describeSource(r Ref, part, path string) string {
	ev := "#" + strconv.Itoa(r.Ctx)
	if r.Sig != nil {
		ev = r.Sig.String()
		if r.Nth > 0 {
			ev += ", " + strconv.Itoa(r.Nth) + " before"
		}
	}
	return describePart(part) + "(" + ev + ")" + path
}

func describePart(part string) string {
	if part == PartArgs {
		return "args"
	}
	return "out"
}

// Describe formats the pattern as "context → tool(arg = source, ...)".
func (pt *Pattern) Describe() string {
	var b strings.Builder
	b.WriteString(FormatContext(pt.Context))
	b.WriteString(" → ")
	b.WriteString(pt.Tool)
	if !pt.Exact {
		b.WriteString("(…)")
		return b.String()
	}
	b.WriteByte('(')
	for i := range pt.Args {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(pt.Args[i].Describe(pt.List))
	}
	b.WriteByte(')')
	return b.String()
}

// ShowOptions select the patterns WriteTable prints. The zero value prints
// all of them.
type ShowOptions struct {
	Top        int    // at most this many; 0 means all
	Tool       string // only patterns predicting this tool; "" means any
	MinSupport int    // only patterns with at least this support
	ExactOnly  bool   // only patterns that predict arguments
}

// WriteTable prints the strongest patterns of a pool as a table: those
// that predicted the most calls first (Hits[0]), then by p.
func WriteTable(w io.Writer, p *Pool, o ShowOptions) error {
	var ps []*Pattern
	for i := range p.Patterns {
		pt := &p.Patterns[i]
		if (o.Tool != "" && pt.Tool != o.Tool) || pt.Support < o.MinSupport || (o.ExactOnly && !pt.Exact) {
			continue
		}
		ps = append(ps, pt)
	}
	slices.SortStableFunc(ps, func(a, b *Pattern) int {
		if c := cmp.Compare(b.Hits[0], a.Hits[0]); c != 0 {
			return c
		}
		return cmp.Compare(b.P, a.P)
	})
	if o.Top > 0 && len(ps) > o.Top {
		ps = ps[:o.Top]
	}
	exact := 0
	for i := range p.Patterns {
		if p.Patterns[i].Exact {
			exact++
		}
	}
	fmt.Fprintf(w, "pool: %s (%d with arguments), mined from %s, %s (k=%d, σ=%d, τ=%g)\n",
		plural(len(p.Patterns), "pattern"), exact, plural(p.Mined.Sessions, "session"), plural(p.Mined.Calls, "call"),
		p.Mined.MaxContext, p.Mined.MinSupport, p.Mined.MinConfidence)
	for _, d := range p.Discriminators {
		fmt.Fprintf(w, "discriminator: %s by %s of %q (%d values, %.2f bits)\n", d.Tool, d.Kind, d.Arg, len(d.Values), d.Gain)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "p\tsupport\thits\t  %s\n", "pattern")
	for _, pt := range ps {
		fmt.Fprintf(tw, "%.3f\t%d\t%d\t  %s\n", pt.P, pt.Support, pt.Hits[0], pt.Describe())
	}
	return tw.Flush()
}

// plural is "1 session", "2 sessions".
func plural(n int, word string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", word)
	}
	return fmt.Sprintf("%d %ss", n, word)
}
