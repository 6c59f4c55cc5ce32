package main

import (
	"context"
	"errors"
)

// runEval is being written (see its issue).
func runEval(ctx context.Context, e *env, args []string) error {
	return errors.New("not implemented yet")
}
