//go:build unix

package sim

import (
	"syscall"
	"time"
)

// processCPU returns the CPU time, user and system, this process has used
// in all its threads (the garbage collector's included). On a machine other
// processes share, it leaves out the time spent waiting for a CPU, which
// wall-clock ns/op counts.
func processCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
