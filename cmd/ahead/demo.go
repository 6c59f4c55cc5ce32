package main

import (
	"context"
	"errors"
)

// runDemo is being written (see its issue).
func runDemo(ctx context.Context, e *env, args []string) error {
	return errors.New("not implemented yet")
}
