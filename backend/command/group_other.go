//go:build !unix

package command

import (
	"os"
	"os/exec"
)

// newGroup does nothing: without Unix process groups (Windows), only the
// command itself is killed, not what it starts.
// TODO: a Windows job object would reach the children too.
func newGroup(*exec.Cmd) {}

// killGroup kills the command's process.
func killGroup(cmd *exec.Cmd, _ int) {
	cmd.Process.Kill()
}

// signalled reports no signal: there are none to report.
func signalled(*exec.ExitError) (os.Signal, bool) { return nil, false }
