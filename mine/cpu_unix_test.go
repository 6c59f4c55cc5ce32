//go:build unix

package mine

import "syscall"

// cpuSeconds is the CPU time (user and system) the process has used: on a
// loaded machine, what a benchmark on 2 cores costs is read from it rather
// than from the wall clock.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
