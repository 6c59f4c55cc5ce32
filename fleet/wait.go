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
	if !f.spawn(func() { done <- fn(ctx) }) {
		return ErrClosed
	}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// spawn runs fn in a goroutine of the fleet's (Close waits for it), unless
// the fleet is closed. fn must end promptly once its caller's context is
// done.
func (f *Fleet) spawn(fn func()) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return false
	}
	// Started under the lock: Close waits for the group only once closed
	// is set, so nothing is added to it after.
	f.wg.Go(fn)
	return true
}
