package command

import (
	"os/exec"

	"golang.org/x/sys/unix"
)

// waitExited blocks until cmd's process has exited, leaving it unreaped
// (WNOWAIT): while it is a zombie its pid, which is also its group's id,
// cannot be reused, so killing the group afterwards is safe.
func waitExited(cmd *exec.Cmd) error {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, cmd.Process.Pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			return err
		}
	}
}

// reap collects the exit status of the process waitExited saw exit.
func reap(cmd *exec.Cmd, _ error) error { return cmd.Wait() }
