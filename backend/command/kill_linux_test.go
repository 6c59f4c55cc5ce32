package command

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/ahead-dev/ahead/backend"
)

// waitGone blocks until process pid has terminated (a zombie counts: it
// runs nothing), or fails the test after ten seconds. A pidfd becomes
// readable when its process terminates, so this waits on the kernel, not
// on a clock.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return // already reaped
	}
	if err != nil {
		t.Fatalf("pidfd_open(%d): %v", pid, err)
	}
	defer unix.Close(fd)
	for {
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, 10000)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			t.Fatalf("poll(pidfd %d): %v", pid, err)
		}
		if n == 0 {
			t.Fatalf("process %d (%s) still running 10 s after its call ended", pid, procState(pid))
		}
		return
	}
}

func procState(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "gone"
	}
	return string(b)
}

// readPIDs reads one line of process ids from r.
func readPIDs(t *testing.T, r *bufio.Reader) []int {
	t.Helper()
	line, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("reading pids: %v", err)
	}
	var pids []int
	for _, f := range strings.Fields(line) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("bad pid %q", f)
		}
		pids = append(pids, pid)
	}
	return pids
}

// TestCancelKillsProcessGroup cancels a call whose command has a child
// with a grandchild, none of which hold the output pipes, and checks that
// all three are killed.
func TestCancelKillsProcessGroup(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "pids")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// The leader starts a child shell that starts a grandchild sleep; the
	// child reports "leader child grandchild" through the fifo (opening
	// it blocks until the test reads), then everyone waits forever.
	b, err := New([]string{script(t, `
leader=$$
sh -c 'sleep 1000 & echo "$1 $$ $!"; wait' _ "$leader" > "$1" 2>/dev/null </dev/null &
wait
`), fifo}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := b.Call(ctx, backend.Request{Tool: "t"})
		errc <- err
	}()
	f, err := os.Open(fifo)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	pids := readPIDs(t, bufio.NewReader(f))
	if len(pids) != 3 {
		t.Fatalf("got pids %v, want leader, child and grandchild", pids)
	}
	for _, pid := range pids[1:] {
		if pgid, _ := syscall.Getpgid(pid); pgid != pids[0] {
			t.Fatalf("process %d is in group %d, want the leader's %d", pid, pgid, pids[0])
		}
	}
	cancel()
	if err := <-errc; err != context.Canceled {
		t.Fatalf("Call = %v, want context.Canceled", err)
	}
	// The leader was reaped by Call: no zombie of ours remains.
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", pids[0])); err == nil {
		if st := procState(pids[0]); !strings.Contains(st, ") Z") {
			t.Errorf("leader %d still exists: %s", pids[0], st)
		} else {
			t.Errorf("leader %d left as a zombie", pids[0])
		}
	}
	for _, pid := range pids[1:] {
		waitGone(t, pid)
	}
}

// TestExitKillsLeftovers checks that processes a command leaves running in
// the background are killed once it exits, whether or not they hold its
// output pipe.
func TestExitKillsLeftovers(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pids")
	b, err := New([]string{script(t, `
sleep 1000 &
a=$!
sleep 1000 >/dev/null 2>&1 </dev/null &
echo "$a $!" > "$1"
echo done
`), pidFile}, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := b.Call(t.Context(), backend.Request{Tool: "t"})
	if err != nil || resp.Output != "done\n" {
		t.Fatalf("Call = %+v, %v", resp, err)
	}
	data, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pids := readPIDs(t, bufio.NewReader(strings.NewReader(string(data))))
	if len(pids) != 2 {
		t.Fatalf("pids %v", pids)
	}
	for _, pid := range pids {
		waitGone(t, pid)
	}
}

// TestTimeoutKillsProcessGroup checks the timeout path kills the group too.
func TestTimeoutKillsProcessGroup(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pids")
	b, err := New([]string{script(t, `
sh -c 'sleep 1000' &
echo "$!" > "$1.tmp" && mv "$1.tmp" "$1"
wait
`), pidFile}, &Options{Timeout: 50e6})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Call(t.Context(), backend.Request{Tool: "t"}); !errors.Is(err, ErrTimeout) {
		t.Fatalf("Call = %v, want ErrTimeout", err)
	}
	data, err := os.ReadFile(pidFile)
	if err != nil {
		// The script did not get as far as writing the pid within 50 ms
		// on a loaded machine; then its child may not exist either, and
		// the group kill has nothing more to prove.
		t.Logf("no pid file (%v): the command was killed before it started its child", err)
		return
	}
	for _, pid := range readPIDs(t, bufio.NewReader(strings.NewReader(string(data)))) {
		waitGone(t, pid)
	}
}

// Issue 23: processes that leave the call's process group on purpose
// (setsid), one holding the output pipe and one not, are killed when the
// call ends too, and the call does not wait for the pipe's holder.
func TestExitKillsSetsidEscapees(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pids")
	// Each escapee writes its pid once it has left the group; the script
	// waits for both (the second holds the output pipe).
	b, err := New([]string{script(t, `
setsid sh -c 'echo $$ > "$1.a"; exec sleep 1000' _ "$1" >/dev/null 2>&1 </dev/null &
setsid sh -c 'sleep 1000 & echo "$$ $!" > "$1.b"; wait' _ "$1" &
while [ ! -s "$1.a" ] || [ ! -s "$1.b" ]; do sleep 0.01; done
echo $(cat "$1.a" "$1.b") > "$1"
echo done
`), pidFile}, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := b.Call(t.Context(), backend.Request{Tool: "t"})
	if err != nil || resp.Output != "done\n" {
		t.Fatalf("Call = %+v, %v", resp, err)
	}
	data, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pids := readPIDs(t, bufio.NewReader(strings.NewReader(string(data))))
	if len(pids) != 3 {
		t.Fatalf("pids %v, want two setsid processes and a child", pids)
	}
	for _, pid := range pids {
		waitGone(t, pid)
	}
}

// BenchmarkSweep is what looking for a call's escapees adds to every call
// on Linux: one pass over /proc that finds none.
func BenchmarkSweep(b *testing.B) {
	for b.Loop() {
		sweep(map[string]bool{"no-such-call": true})
	}
}
