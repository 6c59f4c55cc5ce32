package backend

import (
	"context"
	"errors"
	"io"
)

// A Budget counts the bytes of a tool's output as a backend reads them
// (issue 23): ahead serve's budget of bytes held for answers (tool outputs
// being read and answers being written, max_answer_bytes), so that many
// calls producing large outputs at once cannot hold more than it, as
// max_response_bytes alone per call in flight could not bound. Grow
// returns once n more bytes may be held, or with ctx's error; the front
// that put the Budget in the context releases what it counted when the
// call's answer has been written.
type Budget interface {
	Grow(ctx context.Context, n int64) error
}

type budgetKey struct{}

// WithBudget returns ctx carrying b, for the backends called under it.
func WithBudget(ctx context.Context, b Budget) context.Context {
	return context.WithValue(ctx, budgetKey{}, b)
}

// BudgetOf returns the Budget ctx carries, or nil: the output is not
// counted (a speculative execution, bounded by the engine's own budget, or
// a call not served over HTTP).
func BudgetOf(ctx context.Context) Budget {
	b, _ := ctx.Value(budgetKey{}).(Budget)
	return b
}

// ReadCounted reads r to its end or to max bytes (max+1 to tell an
// overflow), counting the bytes it keeps in b (nil: uncounted) before it
// reads them: a buffer sized from hint (a declared length, or 0), doubled
// as needed. What it counted is the buffer's capacity, which the returned
// bytes use.
func ReadCounted(ctx context.Context, b Budget, r io.Reader, hint, max int64) ([]byte, error) {
	c := min(int64(64<<10), max+1)
	if hint > 0 {
		c = min(hint+1, max+1)
	}
	if b != nil {
		if err := b.Grow(ctx, c); err != nil {
			return nil, err
		}
	}
	buf := make([]byte, 0, c)
	for {
		if len(buf) == cap(buf) {
			if int64(len(buf)) > max {
				return buf, nil
			}
			nc := int(min(int64(2*cap(buf)), max+1))
			if b != nil {
				if err := b.Grow(ctx, int64(nc-cap(buf))); err != nil {
					return nil, err
				}
			}
			buf = append(make([]byte, 0, nc), buf...)
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err != nil {
			if errors.Is(err, io.EOF) {
				return buf, nil
			}
			return buf, err
		}
	}
}
