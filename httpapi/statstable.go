package httpapi

import (
	"cmp"
	"fmt"
	"io"
	"iter"
	"maps"
	"slices"
	"text/tabwriter"

	"github.com/ahead-dev/ahead/trace"
)

// StatsFromTraces computes, from recorded traces, the figures /v1/stats
// gives for a running server: the agents' calls by source (their call
// lines), and the speculative executions by outcome (speculative lines).
// Saved time is the run time of the speculative executions that served a
// call (reused or promoted), as the engine counts it. Sessions, entries
// and bytes are a live server's and stay zero; the mean think time is
// that of the calls that recorded one.
func StatsFromTraces(events iter.Seq2[trace.Event, error]) (Stats, error) {
	st := Stats{Outcomes: map[string]int64{}, Tools: map[string]ToolStats{}}
	type means struct {
		dur, think   float64
		nDur, nThink int
	}
	acc := map[string]*means{}
	for ev, err := range events {
		if err != nil {
			return Stats{}, err
		}
		ts := st.Tools[ev.Tool]
		m := acc[ev.Tool]
		if m == nil {
			m = &means{}
			acc[ev.Tool] = m
		}
		dur := 0.0
		if ev.DurationMS != nil {
			dur = *ev.DurationMS
		}
		switch {
		case ev.Kind == trace.KindSpeculative:
			st.SpeculativeStarted++
			ts.SpeculativeStarted++
			st.Outcomes[ev.Outcome]++
			switch ev.Outcome {
			case "reused", "promoted":
				st.SavedMS += dur
				ts.SavedMS += dur
			case "warmed":
			default:
				ts.Wasted++
				st.WastedMS += dur
				ts.WastedMS += dur
			}
		case ev.IsCall():
			st.Calls++
			ts.Calls++
			switch ev.Source {
			case "reused":
				st.Reused++
				ts.Reused++
			case "promoted":
				st.Promoted++
				ts.Promoted++
			default: // executed, or a trace from another recorder
				st.Executed++
				ts.Executed++
			}
			if ev.DurationMS != nil {
				m.dur += dur
				m.nDur++
			}
			if ev.LLMMS != nil {
				m.think += *ev.LLMMS
				m.nThink++
			}
		default:
			continue
		}
		st.Tools[ev.Tool] = ts
	}
	for tool, m := range acc {
		ts, ok := st.Tools[tool]
		if !ok {
			continue
		}
		if m.nDur > 0 {
			ts.MeanDurationMS = m.dur / float64(m.nDur)
		}
		if m.nThink > 0 {
			ts.MeanThinkMS = m.think / float64(m.nThink)
		}
		st.Tools[tool] = ts
	}
	return st, nil
}

// WriteTable prints the figures as a table, one row per tool (the busiest
// first) and a total row, then the outcomes of speculative executions.
func (st *Stats) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "tool\tcalls\texecuted\treused\tpromoted\tserved ahead\tspec. runs\twasted runs\tsaved\twasted\tmean duration\t")
	tools := slices.SortedFunc(maps.Keys(st.Tools), func(a, b string) int {
		return cmp.Or(cmp.Compare(st.Tools[b].Calls, st.Tools[a].Calls), cmp.Compare(a, b))
	})
	row := func(name string, t ToolStats, mean string) {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\t%d\t%d\t%s\t%s\t%s\t\n", name, t.Calls, t.Executed, t.Reused, t.Promoted,
			share(t.Reused+t.Promoted, t.Calls), t.SpeculativeStarted, t.Wasted, seconds(t.SavedMS), seconds(t.WastedMS), mean)
	}
	var total ToolStats
	for _, name := range tools {
		t := st.Tools[name]
		row(name, t, fmt.Sprintf("%.0fms", t.MeanDurationMS))
		total.Wasted += t.Wasted
	}
	total.Calls, total.Executed, total.Reused, total.Promoted = st.Calls, st.Executed, st.Reused, st.Promoted
	total.SpeculativeStarted, total.SavedMS, total.WastedMS = st.SpeculativeStarted, st.SavedMS, st.WastedMS
	row("total", total, "")
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(st.Outcomes) > 0 {
		fmt.Fprint(w, "\nspeculative outcomes:")
		for _, o := range slices.Sorted(maps.Keys(st.Outcomes)) {
			fmt.Fprintf(w, " %s %d", o, st.Outcomes[o])
		}
		fmt.Fprintln(w)
	}
	if st.Calls > 0 {
		_, err := fmt.Fprintf(w, "%.2f speculative executions per call\n", float64(st.SpeculativeStarted)/float64(st.Calls))
		return err
	}
	return nil
}

func share(n, of int64) string {
	if of == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", 100*float64(n)/float64(of))
}

func seconds(ms float64) string { return fmt.Sprintf("%.1fs", ms/1000) }
