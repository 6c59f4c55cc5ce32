package main

import "context"

func runInit(ctx context.Context, e *env, args []string) error { return nil }
