//go:build !linux

package command

import "os/exec"

// waitExited reaps cmd's process: without waitid's WNOWAIT there is a
// short window, after the reaping and before the group is killed, in which
// the group id could be reused.
func waitExited(cmd *exec.Cmd) error { return cmd.Wait() }

// reap returns the status waitExited collected.
func reap(_ *exec.Cmd, err error) error { return err }
