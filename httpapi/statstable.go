package httpapi

import (
	"cmp"
	"fmt"
	"io"
	"iter"
	"maps"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/ahead-dev/ahead/trace"
)

// StatsFromTraces computes, from recorded traces, the figures /v1/stats
// gives for a running server: the agents' calls by source (their call
// lines), and the speculative executions by outcome (speculative lines).
// Saved time is counted as the engine counts it (issue 27: ahead stats and
// the exit summary of the same run disagreed): a reused execution saved
// its whole run time; a promoted one only the part it ran before the
// agent's call came (its call line's ts minus its speculative line's ts),
// or its whole run time if the trace lacks the call. Sessions, entries
// and bytes are a live server's and stay zero; the mean think time is
// that of the calls that recorded one.
func StatsFromTraces(events iter.Seq2[trace.Event, error]) (Stats, error) {
	st := Stats{Outcomes: map[string]int64{}, Tools: map[string]ToolStats{}}
	type means struct {
		dur, think   float64
		nDur, nThink int
	}
	acc := map[string]*means{}
	// Promoted speculative runs waiting for their call line (recorded
	// just after theirs, so this holds a handful at any time).
	type runKey struct{ session, tool, args string }
	type run struct {
		start time.Time
		dur   float64
	}
	waiting := map[runKey][]run{}
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
			case "promoted":
				k := runKey{ev.Session, ev.Tool, string(ev.Args)}
				start, _ := time.Parse(time.RFC3339Nano, ev.TS)
				waiting[k] = append(waiting[k], run{start, dur})
			case "reused":
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
				k := runKey{ev.Session, ev.Tool, string(ev.Args)}
				if rs := waiting[k]; len(rs) > 0 {
					saved := rs[0].dur
					if arrive, err := time.Parse(time.RFC3339Nano, ev.TS); err == nil && !rs[0].start.IsZero() {
						saved = min(max(float64(arrive.Sub(rs[0].start).Microseconds())/1000, 0), rs[0].dur)
					}
					st.SavedMS += saved
					ts.SavedMS += saved
					if waiting[k] = rs[1:]; len(waiting[k]) == 0 {
						delete(waiting, k)
					}
				}
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
	for k, rs := range waiting {
		for _, r := range rs {
			st.SavedMS += r.dur
			ts := st.Tools[k.tool]
			ts.SavedMS += r.dur
			st.Tools[k.tool] = ts
		}
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
		if _, err := fmt.Fprintf(w, "%.2f speculative executions per call\n", float64(st.SpeculativeStarted)/float64(st.Calls)); err != nil {
			return err
		}
	}
	for _, u := range st.Upstreams {
		how := fmt.Sprintf("%d connections, one per session", u.Connections)
		switch {
		case u.Revision == "":
			how = "not reached yet"
		case u.Shared:
			how = "stateless: one connection for every session"
		}
		if _, err := fmt.Fprintf(w, "MCP upstream %s: %s, %s\n", u.Name, cmp.Or(u.Revision, "-"), how); err != nil {
			return err
		}
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
