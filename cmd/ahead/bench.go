package main

import (
	"context"
	"errors"
)

// runBench is being written (see its issue).
func runBench(ctx context.Context, e *env, args []string) error {
	return errors.New("not implemented yet")
}
