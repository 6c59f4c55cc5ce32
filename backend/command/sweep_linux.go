package command

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"unsafe"

	"golang.org/x/sys/unix"
)

// sweep kills the processes whose environment carries one of the marks
// of calls that ended (markVar=mark): what the commands started and that
// left their process groups on purpose (setsid, a daemon's double fork),
// beyond the group kill. Its environment is the one trail such a process
// keeps: its parent may be gone (it is then init's, or a subreaper's,
// child) and its group and session are its own. Issue 23.
//
// Why not a child subreaper (PR_SET_CHILD_SUBREAPER): it is process-wide,
// so ahead would adopt every orphan of every process it starts (MCP stdio
// servers' too) and would have to reap them all, beside os/exec waiting
// for its own children by pid; and orphans are still not told apart by
// call. Why not a cgroup: it needs a delegated, writable cgroup v2
// hierarchy, which ahead cannot count on (containers, cgroup v1).
//
// A process that replaced its environment (env -i, execve with another
// one) is beyond reach. Each pass reads /proc/PID/environ of every process
// of the same user (others' are unreadable and skipped): about 1 ms for
// 150 processes, whatever the number of marks (the sweeper hands over
// every call that ended meanwhile at once). Passes repeat while they find
// some, so that a child forked between the read and the kill is found by
// the next one.
func sweep(marks map[string]bool) {
	self := os.Getpid()
	buf := make([]byte, 16<<10)
	path := make([]byte, 0, 32)
	for range 8 {
		dir, err := os.Open("/proc")
		if err != nil {
			return
		}
		names, _ := dir.Readdirnames(-1)
		dir.Close()
		found := false
		for _, name := range names {
			if name[0] < '1' || name[0] > '9' {
				continue // not a process
			}
			pid, err := strconv.Atoi(name)
			if err != nil || pid == self {
				continue
			}
			path = append(append(append(path[:0], "/proc/"...), name...), "/environ\x00"...)
			if mark, ok := markIn(path, marks, &buf); ok && kill(pid, path, map[string]bool{mark: true}, &buf) {
				found = true
			}
		}
		if !found {
			return
		}
	}
}

// kill kills process pid, if its environment (at path) still holds one
// of marks once a pidfd names it: the signal cannot reach another process
// that took the pid meanwhile.
func kill(pid int, path []byte, marks map[string]bool, buf *[]byte) bool {
	fd, err := unix.PidfdOpen(pid, 0)
	switch {
	case err == nil:
		defer unix.Close(fd)
		if _, ok := markIn(path, marks, buf); !ok {
			return false
		}
		unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
	case errors.Is(err, unix.ENOSYS):
		unix.Kill(pid, unix.SIGKILL) // kernels before 5.3: by pid
	default:
		return false // gone already
	}
	return true
}

// markVarAt is how markVar starts in an environment file read with a NUL
// before it.
var markVarAt = []byte("\x00" + markVar + "=")

// markIn reports which of marks the environment file at path
// (NUL-terminated) holds as markVar's value, reading it into *buf (grown
// as needed, up to 1 MiB). It makes no allocations once *buf is large
// enough, but for the mark it finds: it runs for every process after
// calls end.
func markIn(path []byte, marks map[string]bool, buf *[]byte) (string, bool) {
	p := unsafe.String(&path[0], len(path)-1)
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", false // gone, or another user's
	}
	defer unix.Close(fd)
	(*buf)[0] = 0 // the first variable has no NUL before it
	n := 1
	for {
		if n == len(*buf) {
			if len(*buf) >= 1<<20 {
				break
			}
			*buf = append(*buf, make([]byte, len(*buf))...)
		}
		m, err := unix.Read(fd, (*buf)[n:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return "", false
		}
		if m == 0 {
			break
		}
		n += m
	}
	env := (*buf)[:n]
	for {
		i := bytes.Index(env, markVarAt)
		if i < 0 {
			return "", false
		}
		env = env[i+len(markVarAt):]
		v := env
		if end := bytes.IndexByte(v, 0); end >= 0 {
			v = v[:end]
		}
		if marks[string(v)] { // no allocation: a map lookup by bytes
			return string(v), true
		}
	}
}
