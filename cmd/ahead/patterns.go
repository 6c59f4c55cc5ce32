package main

import (
	"context"
	"errors"
)

// runPatterns is being written (see its issue).
func runPatterns(ctx context.Context, e *env, args []string) error {
	return errors.New("not implemented yet")
}
