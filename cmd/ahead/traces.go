package main

import (
	"context"
	"errors"
)

// runTraces is being written (see its issue).
func runTraces(ctx context.Context, e *env, args []string) error {
	return errors.New("not implemented yet")
}
