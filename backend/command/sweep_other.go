//go:build !linux

package command

// sweep does nothing: without Linux's /proc, processes that left the
// call's process group (setsid) cannot be found, and outlive the call.
func sweep(map[string]bool) {}
