package backend

import (
	"context"
	"errors"
	"strings"
	"testing"
)

type countingBudget struct{ n int64 }

func (c *countingBudget) Grow(_ context.Context, n int64) error {
	c.n += n
	return nil
}

// ReadCounted counts every byte of the buffer it hands over before reading
// into it, and stops one byte past max.
func TestReadCounted(t *testing.T) {
	for _, tc := range []struct {
		name      string
		size      int
		hint, max int64
		wantLen   int
	}{
		{"no length declared", 300 << 10, 0, 1 << 20, 300 << 10},
		{"length declared", 300 << 10, 300 << 10, 1 << 20, 300 << 10},
		{"over the limit", 300 << 10, 0, 100 << 10, 100<<10 + 1},
		{"a declared length that lies", 300 << 10, 10, 1 << 20, 300 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c countingBudget
			got, err := ReadCounted(t.Context(), &c, strings.NewReader(strings.Repeat("x", tc.size)), tc.hint, tc.max)
			if err != nil || len(got) != tc.wantLen {
				t.Fatalf("ReadCounted = %d bytes, %v; want %d", len(got), err, tc.wantLen)
			}
			if c.n != int64(cap(got)) {
				t.Errorf("counted %d bytes, want the buffer's %d", c.n, cap(got))
			}
			if tc.hint == int64(tc.size) && cap(got) != tc.size+1 {
				t.Errorf("buffer of %d bytes for a declared %d, want one allocation of %d", cap(got), tc.size, tc.size+1)
			}
		})
	}
	refused := errors.New("no room")
	_, err := ReadCounted(t.Context(), refuse{refused}, strings.NewReader("x"), 0, 10)
	if !errors.Is(err, refused) {
		t.Errorf("a refused Grow: %v, want its error", err)
	}
}

type refuse struct{ err error }

func (r refuse) Grow(context.Context, int64) error { return r.err }
