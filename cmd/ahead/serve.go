package main

import (
	"context"
	"errors"
)

// runServe is being written (see its issue).
func runServe(ctx context.Context, e *env, args []string) error {
	return errors.New("not implemented yet")
}
