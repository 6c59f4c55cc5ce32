// Package progress shows how far a long command (ahead demo, bench, mine)
// has got, on stderr: a bar redrawn in place on a terminal, and otherwise
// (a log, CI) a plain line now and then, so that a 20 s to 3 min run is
// never silent. It owns no goroutine: the work reports, the Meter draws.
package progress

import (
	"cmp"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// Options configure a Meter. The zero value of each field means its
// default.
type Options struct {
	// Terminal draws a bar redrawn in place; otherwise lines are printed
	// at most every Every, and at each new phase and at the end.
	Terminal bool
	// Every is the least interval between two lines (not on a terminal);
	// 0 means 10s. A terminal bar is redrawn at most every 100ms.
	Every time.Duration
	// Now reads the clock; nil means time.Now.
	Now func() time.Time
}

// Meter draws the progress of one command. It is safe for concurrent
// use.
type Meter struct {
	w    io.Writer
	name string
	o    Options

	mu        sync.Mutex // protects everything below
	start     time.Time
	last      time.Time // last draw
	phase     string
	drawn     bool // a bar is on the line (terminal)
	lastDone  int
	lastTotal int
}

// New returns a meter for the command name writing to w. opts may be nil.
func New(w io.Writer, name string, opts *Options) *Meter {
	m := &Meter{w: w, name: name}
	if opts != nil {
		m.o = *opts
	}
	m.o.Every = cmp.Or(m.o.Every, 10*time.Second)
	if m.o.Now == nil {
		m.o.Now = time.Now
	}
	m.start = m.o.Now()
	return m
}

const barWidth = 30

// Update reports done of total units of phase.
func (m *Meter) Update(phase string, done, total int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.o.Now()
	newPhase := phase != m.phase
	m.phase, m.lastDone, m.lastTotal = phase, done, total
	end := done >= total
	if m.o.Terminal {
		if !newPhase && !end && now.Sub(m.last) < 100*time.Millisecond {
			return
		}
		m.last = now
		filled := 0
		if total > 0 {
			filled = min(barWidth, done*barWidth/total)
		}
		fmt.Fprintf(m.w, "\r\033[K%s: %s [%s%s] %d/%d %s", m.name, phase,
			strings.Repeat("#", filled), strings.Repeat(".", barWidth-filled), done, total, m.elapsed(now))
		m.drawn = true
		return
	}
	if !newPhase && !end && now.Sub(m.last) < m.o.Every {
		return
	}
	m.last = now
	fmt.Fprintf(m.w, "%s: %s %d/%d (%s)\n", m.name, phase, done, total, m.elapsed(now))
}

// Done ends the meter: a terminal bar is cleared.
func (m *Meter) Done() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.drawn {
		fmt.Fprint(m.w, "\r\033[K")
		m.drawn = false
	}
}

func (m *Meter) elapsed(now time.Time) string {
	return now.Sub(m.start).Round(time.Second).String()
}
