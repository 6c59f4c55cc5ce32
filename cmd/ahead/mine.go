package main

import (
	"context"
	"errors"
)

// runMine is being written (see its issue).
func runMine(ctx context.Context, e *env, args []string) error {
	return errors.New("not implemented yet")
}
