package progress

import (
	"bytes"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// clock is a fake clock the test moves by hand.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func TestLines(t *testing.T) {
	c := &clock{t: time.Unix(0, 0)}
	var b bytes.Buffer
	m := New(&b, "ahead bench", &Options{Every: 10 * time.Second, Now: c.now})
	m.Update("serial", 0, 40) // a new phase: printed
	for i := 1; i < 40; i++ {
		c.t = c.t.Add(time.Second)
		m.Update("serial", i, 40) // every 10s
	}
	c.t = c.t.Add(time.Second)
	m.Update("serial", 40, 40) // the end of a phase: printed
	m.Update("ahead", 0, 40)
	m.Done()
	want := `ahead bench: serial 0/40 (0s)
ahead bench: serial 10/40 (10s)
ahead bench: serial 20/40 (20s)
ahead bench: serial 30/40 (30s)
ahead bench: serial 40/40 (40s)
ahead bench: ahead 0/40 (40s)
`
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("lines (-want +got):\n%s", diff)
	}
}

func TestTerminal(t *testing.T) {
	c := &clock{t: time.Unix(0, 0)}
	var b bytes.Buffer
	m := New(&b, "mine", &Options{Terminal: true, Now: c.now})
	m.Update("contexts", 0, 3)
	m.Update("contexts", 1, 3) // within 100ms: not redrawn
	c.t = c.t.Add(time.Second)
	m.Update("contexts", 3, 3)
	m.Done()
	want := "\r\033[Kmine: contexts [..............................] 0/3 0s" +
		"\r\033[Kmine: contexts [##############################] 3/3 1s" +
		"\r\033[K"
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("bar (-want +got):\n%q", diff)
	}
}
