package main

import (
	"context"
	"errors"
)

// runMCP is being written (see its issue).
func runMCP(ctx context.Context, e *env, args []string) error {
	return errors.New("not implemented yet")
}
