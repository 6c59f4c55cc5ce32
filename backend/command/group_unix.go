//go:build unix

package command

import (
	"os"
	"os/exec"
	"syscall"
)

// newGroup starts cmd in a process group of its own, so that killGroup
// reaches whatever it starts.
func newGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// killGroup kills the process group of cmd (led by pid).
func killGroup(_ *exec.Cmd, pid int) {
	syscall.Kill(-pid, syscall.SIGKILL)
}

// signalled returns the signal that killed the process, if one did.
func signalled(ee *exec.ExitError) (os.Signal, bool) {
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return ws.Signal(), true
	}
	return nil, false
}
