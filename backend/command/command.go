// Package command is the exec backend: each tool call runs a local command
// with the arguments JSON on its standard input; its standard output is the
// tool's output.
//
// A non-zero exit is the tool's own failure: an error result with the exit
// status and the tail of standard error. Failing to run the command at all,
// the per-call timeout and the caller's context ending are errors.
//
// Every call runs in a process group of its own, and the whole group is
// killed when the call ends, whichever way it ends: on cancellation (how
// ahead preempts speculative work), on timeout, when the output grows past
// its limit, and after a normal exit (so a tool cannot leave background
// processes behind). The group is killed before the command's process is
// reaped, so its id cannot have been reused by then. Processes that leave
// the group on purpose (setsid, a daemon's double fork) are found on Linux
// by a mark in their environment (AHEAD_CALL, one per call) and killed
// too (sweep_linux.go); elsewhere, and for a process that replaced its
// environment, they are beyond reach. A call never waits for them for more
// than a short grace period, nor for the sweep that finds them when its
// pipes are closed: Close waits for those.
package command

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/ahead-dev/ahead/backend"
)

// ErrTimeout is wrapped by the error returned when a command does not
// finish within Options.Timeout.
var ErrTimeout = fmt.Errorf("command: %w", backend.ErrTimeout)

// Defaults for the zero Options fields.
const (
	DefaultTimeout        = 30 * time.Second
	DefaultMaxOutputBytes = 8 << 20
	DefaultMaxStderrBytes = 4 << 10
	// grace is how long a finished call waits for processes that left the
	// group but still hold its output pipes open.
	grace = 2 * time.Second
)

// markVar names the environment variable that marks every process a call
// starts, and what they start in turn, with the call (see sweep): ahead's
// pid and 64 random bits.
const markVar = "AHEAD_CALL"

// Options configure a Backend. The zero value is usable.
type Options struct {
	// Timeout bounds each call. Zero means DefaultTimeout; negative means
	// no timeout (only the caller's context).
	Timeout time.Duration
	// MaxOutputBytes bounds standard output. A command that writes more is
	// killed and the call gets an error result. Zero means
	// DefaultMaxOutputBytes.
	MaxOutputBytes int64
	// MaxStderrBytes is how much of the end of standard error an error
	// result keeps. Zero means DefaultMaxStderrBytes.
	MaxStderrBytes int
	// Dir is the working directory; "" means ahead's.
	Dir string
	// Env is the environment; nil means ahead's own. AHEAD_TOOL,
	// AHEAD_SESSION and AHEAD_CALL (the call's mark) are always added, and AHEAD_SPECULATIVE=1 on
	// speculative executions (work no agent asked for yet).
	Env []string
}

// Backend runs a command per tool call. It is safe for concurrent use.
type Backend struct {
	argv     []string
	usesTool bool
	opts     Options
	sweeps   sweeper
}

var _ backend.Backend = (*Backend)(nil)

// toolName is what may be put on a command line: MCP's tool-name alphabet,
// without a leading '-' or '.' (an option, or a relative path such as ..).
var toolName = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)

// New returns a backend that runs argv. Every {tool} in argv is replaced by
// the tool's name, which must then be a plain name (letters, digits, '_',
// '-' and '.', not starting with '-' or '.'): it cannot become an option,
// a path or shell syntax. opts may be nil.
func New(argv []string, opts *Options) (*Backend, error) {
	if len(argv) == 0 || argv[0] == "" {
		return nil, errors.New("command: no command")
	}
	b := &Backend{argv: append([]string(nil), argv...), sweeps: sweeper{pass: sweep}}
	if opts != nil {
		b.opts = *opts
	}
	if b.opts.Timeout == 0 {
		b.opts.Timeout = DefaultTimeout
	}
	if b.opts.MaxOutputBytes <= 0 {
		b.opts.MaxOutputBytes = DefaultMaxOutputBytes
	}
	if b.opts.MaxStderrBytes <= 0 {
		b.opts.MaxStderrBytes = DefaultMaxStderrBytes
	}
	b.opts.Env = append([]string(nil), b.opts.Env...)
	if opts == nil || opts.Env == nil {
		b.opts.Env = nil
	}
	for _, a := range argv {
		b.usesTool = b.usesTool || strings.Contains(a, "{tool}")
	}
	if !strings.Contains(argv[0], "{tool}") {
		// Fail at start-up, not on the first call.
		if _, err := exec.LookPath(argv[0]); err != nil {
			return nil, fmt.Errorf("command: %w", err)
		}
	}
	return b, nil
}

// Close waits for the sweeps of the calls that ended (processes that left
// their groups, found by the calls' marks), which run after the calls
// have returned. The Backend stays usable: a later call sweeps before it
// returns.
func (b *Backend) Close() { b.sweeps.close() }

// Call runs the command for req.
func (b *Backend) Call(ctx context.Context, req backend.Request) (backend.Response, error) {
	argv := b.argv
	if b.usesTool {
		if !toolName.MatchString(req.Tool) {
			return backend.Response{}, fmt.Errorf("command: tool name %q cannot be put on a command line", req.Tool)
		}
		argv = make([]string, len(b.argv))
		for i, a := range b.argv {
			argv[i] = strings.ReplaceAll(a, "{tool}", req.Tool)
		}
	}
	callCtx, cancel := ctx, context.CancelFunc(func() {})
	if b.opts.Timeout > 0 {
		callCtx, cancel = context.WithTimeoutCause(ctx, b.opts.Timeout, ErrTimeout)
	}
	defer cancel()

	r, err := b.run(callCtx, argv, req)
	switch {
	case ctx.Err() != nil:
		return backend.Response{}, ctx.Err()
	case errors.Is(context.Cause(callCtx), ErrTimeout):
		return backend.Response{}, fmt.Errorf("command: %s: no result within %v: %w", req.Tool, b.opts.Timeout, ErrTimeout)
	case err != nil:
		return backend.Response{}, fmt.Errorf("command: %s: %w", req.Tool, err)
	}
	return r, nil
}

// run starts argv and collects its result. It returns as soon as ctx is
// done, after killing the process group.
func (b *Backend) run(ctx context.Context, argv []string, req backend.Request) (backend.Response, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = b.opts.Dir
	env := b.opts.Env
	if env == nil {
		env = os.Environ()
	}
	mark := strconv.Itoa(os.Getpid()) + "." + strconv.FormatUint(rand.Uint64(), 36)
	cmd.Env = append(env[:len(env):len(env)], "AHEAD_TOOL="+req.Tool, "AHEAD_SESSION="+req.Session, markVar+"="+mark)
	if req.Speculative {
		cmd.Env = append(cmd.Env, "AHEAD_SPECULATIVE=1")
	}
	newGroup(cmd)

	// Our own pipes rather than exec's copying goroutines: exec.Cmd.Wait
	// would wait for every process holding the pipes, including a
	// background grandchild, before we could kill it.
	var files []*os.File
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err == nil {
			files = append(files, r, w)
		}
		return r, w, err
	}
	inR, inW, err := pipe()
	if err != nil {
		return backend.Response{}, err
	}
	outR, outW, err := pipe()
	if err != nil {
		return backend.Response{}, err
	}
	errR, errW, err := pipe()
	if err != nil {
		return backend.Response{}, err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	if err := cmd.Start(); err != nil {
		return backend.Response{}, err
	}
	// The child has its copies; ours would keep the pipes open forever.
	inR.Close()
	outW.Close()
	errW.Close()
	pid := cmd.Process.Pid

	// Counted in the front's budget (if any) as it is read (issue 23):
	// while the budget is full the pipe is not read and the command
	// waits on it, nothing is lost.
	stdout := &limitedBuffer{max: b.opts.MaxOutputBytes, full: make(chan struct{}),
		ctx: ctx, budget: backend.BudgetOf(ctx)}
	stderr := &tailBuffer{max: b.opts.MaxStderrBytes}
	var pumps sync.WaitGroup
	pumps.Go(func() {
		args := req.Args
		if len(args) == 0 {
			args = []byte("{}")
		}
		// A command that does not read its input gets EPIPE here; that
		// is its business, not an error.
		inW.Write(args)
		inW.Close()
	})
	pumps.Go(func() { stdout.readFrom(outR) })
	pumps.Go(func() { stderr.readFrom(errR) })

	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = waitExited(cmd); close(exited) }()
	select {
	case <-exited:
	case <-ctx.Done():
	case <-stdout.full:
	}
	// Kill the group while its leader is unreaped (a zombie at worst), so
	// that the group id still names only our processes. After a normal
	// exit this kills what the command left running in the background.
	killGroup(cmd, pid)
	<-exited
	exitErr := reap(cmd, waitErr)
	// And what left the group (setsid), off the call's path: a call whose
	// pipes close returns without waiting for it; one whose pipes are held
	// waits below for the sweep to kill the holder.
	b.sweeps.add(mark)

	ioDone := make(chan struct{})
	go func() { pumps.Wait(); close(ioDone) }()
	t := time.NewTimer(grace)
	select {
	case <-ioDone:
	case <-t.C:
		// Something outside the group holds a pipe: stop reading.
		outR.Close()
		errR.Close()
		inW.Close()
		<-ioDone
	}
	t.Stop()

	if ctx.Err() != nil {
		return backend.Response{}, ctx.Err()
	}
	if stdout.overflow {
		return backend.Response{IsError: true, Output: fmt.Sprintf("output over the %d-byte limit; command killed", b.opts.MaxOutputBytes)}, nil
	}
	if exitErr == nil {
		// Handed over without another copy: the buffer is not used again.
		var out string
		if len(stdout.buf) > 0 {
			out = unsafe.String(&stdout.buf[0], len(stdout.buf))
		}
		return backend.Response{Output: out}, nil
	}
	if ee, ok := errors.AsType[*exec.ExitError](exitErr); ok {
		return backend.Response{IsError: true, Output: failure(stdout.buf, ee, stderr.String())}, nil
	}
	return backend.Response{}, exitErr
}

// failure describes a command that exited unsuccessfully: its output, its
// exit status and the end of its standard error.
func failure(stdout []byte, ee *exec.ExitError, stderr string) string {
	var b strings.Builder
	b.Write(stdout)
	if len(stdout) > 0 && stdout[len(stdout)-1] != '\n' {
		b.WriteByte('\n')
	}
	if sig, ok := signalled(ee); ok {
		fmt.Fprintf(&b, "killed by signal %v", sig)
	} else {
		fmt.Fprintf(&b, "exit status %d", ee.ExitCode())
	}
	if stderr != "" {
		b.WriteString("\n")
		b.WriteString(stderr)
	}
	return b.String()
}

// limitedBuffer keeps at most max bytes, counted in budget (nil: not
// counted) as they are read; one more and it closes full.
type limitedBuffer struct {
	max      int64
	ctx      context.Context // the call's: a wait for the budget ends with it
	budget   backend.Budget
	buf      []byte
	overflow bool
	full     chan struct{}
}

func (l *limitedBuffer) readFrom(r io.Reader) {
	buf, err := backend.ReadCounted(l.ctx, l.budget, r, 0, l.max)
	l.buf = buf // what was read, if the pipe failed; nil if the call's context ended
	if err != nil {
		return
	}
	if int64(len(buf)) > l.max {
		l.overflow = true
		close(l.full)
	}
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	max   int
	buf   []byte
	total int64
}

func (t *tailBuffer) readFrom(r io.Reader) {
	var chunk [4096]byte
	for {
		n, err := r.Read(chunk[:])
		t.total += int64(n)
		t.buf = append(t.buf, chunk[:n]...)
		if len(t.buf) > 2*t.max {
			t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.max:]...)
		}
		if err != nil {
			return
		}
	}
}

// String returns the tail, starting on a character boundary, with a note
// of how much came before it.
func (t *tailBuffer) String() string {
	b := t.buf
	if int64(len(b)) == t.total && len(b) <= t.max {
		return string(b)
	}
	b = b[max(0, len(b)-t.max):]
	for i := 0; i < utf8.UTFMax && i < len(b) && !utf8.RuneStart(b[0]); i++ {
		b = b[1:]
	}
	return fmt.Sprintf("(%d earlier bytes of standard error left out)\n%s", t.total-int64(len(b)), b)
}
