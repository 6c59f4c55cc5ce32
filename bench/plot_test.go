package bench

import (
	"bytes"
	"encoding/xml"
	"io"
	"slices"
	"strings"
	"testing"
)

// svgElement is what the plot test reads of an SVG element.
type svgElement struct {
	name  string
	attrs map[string]string
	text  string
}

func parseSVG(t *testing.T, data []byte) []svgElement {
	t.Helper()
	var out []svgElement
	d := xml.NewDecoder(bytes.NewReader(data))
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("the plot is not well-formed XML: %v", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			el := svgElement{name: tok.Name.Local, attrs: map[string]string{}}
			for _, a := range tok.Attr {
				el.attrs[a.Name.Local] = a.Value
			}
			out = append(out, el)
		case xml.CharData:
			if len(out) > 0 {
				out[len(out)-1].text += string(tok)
			}
		}
	}
}

// TestPlotStructure: one curve and one legend entry per mode that ran, each
// in its own style; nothing for modes that did not run; a log time axis
// when session times spread widely; the run's parameters in the title.
func TestPlotStructure(t *testing.T) {
	serial := []float64{200, 900, 4000, 30000, 60000}
	ahead := []float64{150, 700, 3000, 25000, 50000}
	mode := func(m Mode, ms []float64) *ModeResult {
		return &ModeResult{Mode: m, SessionMS: ms, E2E: newDist(ms), StallMS: ms[len(ms)-1] / 2,
			StallBy: map[string]float64{"executed": ms[len(ms)-1] / 2}}
	}
	rep := &Report{
		Config: ReportConfig{Sessions: 5, Calls: 20, Latency: "lognormal:600ms:1500ms", TimeScale: 0.05, ThinkDefault: "1.8s", Concurrency: 16, Arrival: "closed", Seed: 1},
		Modes:  []*ModeResult{mode(Serial, serial), mode(Ahead, ahead), mode(AA, slices.Clone(serial))},
	}
	var b bytes.Buffer
	if err := rep.WritePlot(&b); err != nil {
		t.Fatal(err)
	}
	els := parseSVG(t, b.Bytes())
	curves := map[string]string{} // mode → style
	var legend []string
	var texts []string
	for _, el := range els {
		switch {
		case el.name == "polyline" && el.attrs["class"] == "cdf":
			m := el.attrs["data-mode"]
			if _, dup := curves[m]; dup {
				t.Errorf("two curves for %s", m)
			}
			curves[m] = el.attrs["stroke"] + "|" + el.attrs["stroke-dasharray"]
		case el.name == "g" && el.attrs["class"] == "legend":
			legend = append(legend, el.attrs["data-mode"])
		case el.name == "text":
			texts = append(texts, el.text)
		}
	}
	ran := []string{"serial", "ahead", "aa"}
	if got := slices.Sorted(func(yield func(string) bool) {
		for m := range curves {
			if !yield(m) {
				return
			}
		}
	}); !slices.Equal(got, slices.Sorted(slices.Values(ran))) {
		t.Errorf("curves for %v, want %v", got, ran)
	}
	if !slices.Equal(legend, ran) {
		t.Errorf("legend entries %v, want %v", legend, ran)
	}
	styles := map[string]bool{}
	for m, st := range curves {
		if styles[st] {
			t.Errorf("%s shares its style %s with another mode", m, st)
		}
		styles[st] = true
	}
	all := strings.Join(texts, "\n")
	for _, want := range []string{
		"ahead bench: 5 sessions, 20 calls; modes serial, ahead, aa",
		"tool latency lognormal:600ms:1500ms; think default 1.8s; closed loop, 16 at once; slots unlimited; time scale 0.05; seed 1",
		"Session time, CDF (log scale)",
		"aa (= serial)", // identical curves say so
		"0.1s", "100s",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("the plot lacks %q", want)
		}
	}
	for _, absent := range []string{"oracle", "failed", "promoted (partly hidden)"} {
		if strings.Contains(all, absent) {
			t.Errorf("the plot mentions %q, which was not drawn", absent)
		}
	}

	// A narrow spread keeps a linear axis.
	for _, m := range rep.Modes {
		for i := range m.SessionMS {
			m.SessionMS[i] = 10000 + float64(i)*1000
		}
	}
	b.Reset()
	if err := rep.WritePlot(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "Session time, CDF (linear)") {
		t.Error("a narrow spread is drawn on a log axis")
	}
}
