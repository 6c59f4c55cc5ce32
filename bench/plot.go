package bench

import (
	"fmt"
	"html"
	"io"
	"math"
	"slices"
	"strings"
)

var modeColors = map[Mode]string{
	Serial:   "#444444",
	Ahead:    "#d62728",
	Oracle:   "#2ca02c",
	Orion:    "#9467bd",
	SpecFaaS: "#1f77b4",
	AllWrong: "#ff7f0e",
	AA:       "#999999",
}

// WritePlot writes an SVG with two charts: the CDF of session time per mode,
// and each mode's tool stall split by how the step-ending call was served,
// next to the stall it hid compared with serial.
func (r *Report) WritePlot(w io.Writer) error {
	const (
		width  = 960
		left   = 90
		right  = 200
		cdfTop = 84
		cdfH   = 320
	)
	modes := r.sortedModes()
	plotW := float64(width - left - right)
	barTop := cdfTop + cdfH + 90
	barH, barGap := 22, 10
	height := barTop + len(modes)*(barH+barGap) + 70

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	c := r.Config
	fmt.Fprintf(&b, `<text x="%d" y="24" font-size="16" font-weight="bold">ahead bench: %d sessions, %d calls, tool latency %s</text>`+"\n",
		left, c.Sessions, c.Calls, html.EscapeString(c.Latency))
	fmt.Fprintf(&b, `<text x="%d" y="44" fill="#555">%s</text>`+"\n", left, html.EscapeString(r.Verdict()))

	// CDF of session times.
	maxT := 0.0
	for _, m := range modes {
		maxT = math.Max(maxT, m.E2E.Max)
	}
	xmax, step := niceAxis(maxT / 1000)
	x := func(msv float64) float64 { return left + plotW*(msv/1000)/xmax }
	y := func(f float64) float64 { return cdfTop + cdfH*(1-f) }
	fmt.Fprintf(&b, `<text x="%d" y="%d" font-weight="bold">Session time, CDF</text>`+"\n", left, cdfTop-8)
	for t := 0.0; t <= xmax+1e-9; t += step {
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
	for i, m := range modes {
		s := slices.Clone(m.SessionMS)
		slices.Sort(s)
		var pts []string
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(0), y(0)))
		for j, v := range s {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(v), y(float64(j)/float64(len(s)))))
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(v), y(float64(j+1)/float64(len(s)))))
		}
		dash := ""
		if m.Mode == AA {
			dash = ` stroke-dasharray="4 3"`
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.6"%s points="%s"/>`+"\n", modeColors[m.Mode], dash, strings.Join(pts, " "))
		ly := cdfTop + 14 + i*18
		lx := left + int(plotW) + 16
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="3"%s/>`+"\n", lx, ly-4, lx+22, ly-4, modeColors[m.Mode], dash)
		fmt.Fprintf(&b, `<text x="%d" y="%d">%s (mean %s)</text>`+"\n", lx+28, ly, m.Mode, secs(m.E2E.Mean))
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
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="12" height="12" fill="%s"/><text x="%d" y="%d">%s</text>`+"\n", lx, barTop-22, sg.color, lx+16, barTop-12, sg.label)
		lx += 16 + 7*len(sg.label) + 24 // about 7 px a character at 12 px
	}
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="12" height="12" fill="#cfe8cf" stroke="#2ca02c" stroke-dasharray="2 2"/><text x="%d" y="%d">hidden vs serial</text>`+"\n",
		lx, barTop-22, lx+16, barTop-12)
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
