package fleet

import (
	"context"
	"time"
)

// bounded runs fn with a context that ends after d (or with ctx), in a
// goroutine of the fleet's, and returns its error, or the context's at the
// deadline, whichever comes first. A request through nats.go may wait for
// the connection's lock beyond its context's deadline (while nats.go dials
// a server that accepts connections but does not answer, a frozen one, for
// up to the connect timeout): the caller must not. fn's goroutine ends
// once it has the lock and sees its context done; Close waits for it.
func (f *Fleet) bounded(ctx context.Context, d time.Duration, fn func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	done := make(chan error, 1)
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return ErrClosed
	}
	// Started under the lock: Close waits for the group only once closed
	// is set, so nothing is added to it after.
	f.wg.Go(func() { done <- fn(ctx) })
	f.mu.Unlock()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}
