package bench

import (
	"fmt"
	"html"
	"io"
	"math"
	"os"
	"slices"
	"strings"
)

// modeStyles give every mode its own colour and dash pattern, so that
// curves that coincide (serial and aa, usually) stay distinguishable.
var modeStyles = map[Mode]struct{ color, dash string }{
	Serial:   {"#444444", ""},
	Ahead:    {"#d62728", ""},
	Oracle:   {"#2ca02c", ""},
	Orion:    {"#9467bd", "9 3 2 3"},
	SpecFaaS: {"#1f77b4", "6 3"},
	AllWrong: {"#ff7f0e", "2 3"},
	AA:       {"#999999", "4 3"},
}

// logSpread is the ratio of the longest to the shortest session time from
// which the time axis is logarithmic: on a linear one, short sessions
// crowd into the first tick.
const logSpread = 20

// WritePlot writes an SVG with two charts: the CDF of session time per mode
// that ran (one curve and one legend entry each; a curve identical to an
// earlier one says so in the legend), and each mode's tool stall split by
// how the step-ending call was served, next to the stall it hid compared
// with serial. The title gives the run's parameters.
func (r *Report) WritePlot(w io.Writer) error {
	const (
		width  = 1000
		left   = 90
		right  = 240
		cdfTop = 100
		cdfH   = 320
	)
	modes := slices.DeleteFunc(r.sortedModes(), func(m *ModeResult) bool { return len(m.SessionMS) == 0 })
	plotW := float64(width - left - right)
	barTop := cdfTop + cdfH + 90
	barH, barGap := 22, 10
	height := barTop + len(modes)*(barH+barGap) + 70

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text class="title" x="%d" y="24" font-size="16" font-weight="bold">%s</text>`+"\n", left, html.EscapeString(r.plotTitle()))
	fmt.Fprintf(&b, `<text x="%d" y="44" fill="#555">%s</text>`+"\n", left, html.EscapeString(r.plotParams()))
	fmt.Fprintf(&b, `<text x="%d" y="62" fill="#555">%s</text>`+"\n", left, html.EscapeString(r.Verdict()))

	// CDF of session times, on a log axis when they spread widely.
	lo, hi := math.Inf(1), 0.0
	for _, m := range modes {
		for _, v := range m.SessionMS {
			if v > 0 {
				lo = math.Min(lo, v)
			}
			hi = math.Max(hi, v)
		}
	}
	ax := newTimeAxis(lo/1000, hi/1000)
	x := func(msv float64) float64 { return left + plotW*ax.pos(msv/1000) }
	y := func(f float64) float64 { return cdfTop + cdfH*(1-f) }
	scale := "linear"
	if ax.log {
		scale = "log scale"
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" font-weight="bold">Session time, CDF (%s)</text>`+"\n", left, cdfTop-8, scale)
	for _, t := range ax.ticks {
		px := x(t * 1000)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#eee"/>`+"\n", px, cdfTop, px, cdfTop+cdfH)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%gs</text>`+"\n", px, cdfTop+cdfH+16, t)
	}
	for _, f := range []float64{0, 0.25, 0.5, 0.75, 1} {
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#eee"/>`+"\n", left, y(f), left+plotW, y(f))
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%.0f%%</text>`+"\n", left-6, y(f)+4, f*100)
	}
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.0f" height="%d" fill="none" stroke="#888"/>`+"\n", left, cdfTop, plotW, cdfH)
	fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">session time (think + tool stall), trace time</text>`+"\n", left+plotW/2, cdfTop+cdfH+34)
	drawn := make([]*ModeResult, 0, len(modes))
	for i, m := range modes {
		s := slices.Clone(m.SessionMS)
		slices.Sort(s)
		var pts []string
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(ax.min*1000), y(0)))
		for j, v := range s {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(v), y(float64(j)/float64(len(s)))))
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(v), y(float64(j+1)/float64(len(s)))))
		}
		st := modeStyles[m.Mode]
		dash := ""
		if st.dash != "" {
			dash = fmt.Sprintf(` stroke-dasharray="%s"`, st.dash)
		}
		fmt.Fprintf(&b, `<polyline class="cdf" data-mode="%s" fill="none" stroke="%s" stroke-width="1.8"%s points="%s"/>`+"\n",
			m.Mode, st.color, dash, strings.Join(pts, " "))
		label := fmt.Sprintf("%s (mean %s)", m.Mode, secs(m.E2E.Mean))
		if j := slices.IndexFunc(drawn, func(d *ModeResult) bool { return slices.Equal(d.SessionMS, m.SessionMS) }); j >= 0 {
			label = fmt.Sprintf("%s (= %s)", m.Mode, drawn[j].Mode)
		}
		drawn = append(drawn, m)
		ly := cdfTop + 14 + i*18
		lx := left + int(plotW) + 16
		fmt.Fprintf(&b, `<g class="legend" data-mode="%s"><line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="3"%s/><text x="%d" y="%d">%s</text></g>`+"\n",
			m.Mode, lx, ly-4, lx+26, ly-4, st.color, dash, lx+32, ly, html.EscapeString(label))
	}

	// Stall breakdown.
	serial := r.Mode(Serial)
	maxStall := 0.0
	for _, m := range modes {
		maxStall = math.Max(maxStall, m.StallMS)
	}
	if serial != nil {
		maxStall = math.Max(maxStall, serial.StallMS)
	}
	if maxStall <= 0 {
		maxStall = 1
	}
	bx := func(msv float64) float64 { return plotW * msv / maxStall }
	fmt.Fprintf(&b, `<text x="%d" y="%d" font-weight="bold">Tool stall, by how the call that ended each step was served (total %s serial)</text>`+"\n",
		left, barTop-30, secsOr(serial))
	segs := []struct{ key, label, color string }{
		{"executed", "executed", "#555555"},
		{"promoted", "promoted (partly hidden)", "#e6a23c"},
		{"reused", "reused", "#2ca02c"},
		{"failed", "failed", "#d62728"},
	}
	lx := left
	for _, sg := range segs {
		if !slices.ContainsFunc(modes, func(m *ModeResult) bool { return m.StallBy[sg.key] > 0 }) {
			continue // no legend for what is not drawn
		}
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="12" height="12" fill="%s"/><text x="%d" y="%d">%s</text>`+"\n", lx, barTop-22, sg.color, lx+16, barTop-12, sg.label)
		lx += 16 + 7*len(sg.label) + 24 // about 7 px a character at 12 px
	}
	if serial != nil && slices.ContainsFunc(modes, func(m *ModeResult) bool { return m.StallMS < serial.StallMS }) {
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="12" height="12" fill="#cfe8cf" stroke="#2ca02c" stroke-dasharray="2 2"/><text x="%d" y="%d">hidden vs serial</text>`+"\n",
			lx, barTop-22, lx+16, barTop-12)
	}
	for i, m := range modes {
		yy := barTop + i*(barH+barGap)
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end">%s</text>`+"\n", left-6, yy+barH/2+4, m.Mode)
		pos := 0.0
		for _, sg := range segs {
			v := m.StallBy[sg.key]
			if v <= 0 {
				continue
			}
			fmt.Fprintf(&b, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s"><title>%s: %s</title></rect>`+"\n",
				left+pos, yy, bx(v), barH, sg.color, sg.label, secs(v))
			pos += bx(v)
		}
		if serial != nil && serial.StallMS > m.StallMS {
			hidden := serial.StallMS - m.StallMS
			fmt.Fprintf(&b, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="#cfe8cf" stroke="#2ca02c" stroke-dasharray="2 2"><title>hidden: %s</title></rect>`+"\n",
				left+pos, yy, bx(hidden), barH, secs(hidden))
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%d">%s</text>`+"\n", left+plotW+8, yy+barH/2+4, secs(m.StallMS))
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func secsOr(m *ModeResult) string {
	if m == nil {
		return "n/a"
	}
	return secs(m.StallMS)
}

// plotTitle and plotParams say what was run, as the table's header does.
func (r *Report) plotTitle() string {
	modes := make([]string, 0, len(r.Modes))
	for _, m := range r.sortedModes() {
		modes = append(modes, string(m.Mode))
	}
	c := r.Config
	return fmt.Sprintf("ahead bench: %d sessions, %d calls; modes %s", c.Sessions, c.Calls, strings.Join(modes, ", "))
}

func (r *Report) plotParams() string {
	c := r.Config
	load := fmt.Sprintf("closed loop, %d at once", c.Concurrency)
	if c.Arrival != "closed" {
		load = "arrivals " + c.Arrival
	}
	slots := "unlimited"
	if c.Slots > 0 {
		slots = fmt.Sprint(c.Slots)
	}
	return fmt.Sprintf("tool latency %s; think default %s; %s; slots %s; time scale %g; seed %d",
		c.Latency, c.ThinkDefault, load, slots, c.TimeScale, c.Seed)
}

// timeAxis maps seconds to [0, 1] of the plot width: linear from 0, or
// logarithmic from a round value below the shortest session.
type timeAxis struct {
	log      bool
	min, max float64
	ticks    []float64
}

func newTimeAxis(lo, hi float64) timeAxis {
	if hi <= 0 || math.IsInf(lo, 1) || hi/lo < logSpread {
		top, step := niceAxis(hi)
		a := timeAxis{max: top}
		for t := 0.0; t <= top+1e-9; t += step {
			a.ticks = append(a.ticks, t)
		}
		return a
	}
	a := timeAxis{log: true, min: math.Pow(10, math.Floor(math.Log10(lo))), max: math.Pow(10, math.Ceil(math.Log10(hi)))}
	for d := a.min; d < a.max*1.0001; d *= 10 {
		for _, m := range []float64{1, 2, 5} {
			if t := d * m; t <= a.max*1.0001 {
				a.ticks = append(a.ticks, t)
			}
		}
	}
	return a
}

func (a timeAxis) pos(sec float64) float64 {
	if !a.log {
		return sec / a.max
	}
	sec = math.Max(sec, a.min)
	return math.Log(sec/a.min) / math.Log(a.max/a.min)
}

// niceAxis returns an axis maximum at least v and a tick step, both round.
func niceAxis(v float64) (max, step float64) {
	if v <= 0 {
		return 1, 0.25
	}
	raw := v / 5
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if raw <= m*mag {
			step = m * mag
			break
		}
	}
	return math.Ceil(v/step) * step, step
}

// SavePlot writes the plot (WritePlot) to the file name.
func (r *Report) SavePlot(name string) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	if err := r.WritePlot(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
