package serve

import (
	"syscall"
	"time"
)

// waitUntil returns at t or soon after. The runtime's timers wake an
// idle process on whole milliseconds (its poller's timeout), late by up
// to a millisecond, which would be the harness's delay counted as
// serve's; so the last stretch is a nanosleep, which the kernel's
// high-resolution timers end within microseconds. The bulk is a
// runtime sleep so that no thread sits long in a system call.
func waitUntil(t time.Time) {
	if d := time.Until(t) - 2*time.Millisecond; d > 0 {
		time.Sleep(d)
	}
	for {
		d := time.Until(t)
		if d <= 0 {
			return
		}
		ts := syscall.NsecToTimespec(int64(d))
		_ = syscall.Nanosleep(&ts, nil) // EINTR: the loop sleeps the rest
	}
}
