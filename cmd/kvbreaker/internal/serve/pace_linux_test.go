package serve

import (
	"os"
	"syscall"
	"time"
	"unsafe"
)

// waiters are the ways the open loop's clients can wait for an arrival.
var waiters = []waiter{
	{"sleep", sleepWait},
	{"nanosleep", func() (func(time.Time), func()) { return nanosleepUntil, func() {} }},
	{"timerfd", timerfdWait},
}

// nanosleepUntil returns at t or soon after. The runtime's timers wake an
// idle process on whole milliseconds (its poller's timeout), late by up
// to a millisecond, which would be the harness's delay counted as
// serve's; so the last stretch is a nanosleep, which the kernel's
// high-resolution timers end within microseconds. The bulk is a
// runtime sleep so that no thread sits long in a system call.
func nanosleepUntil(t time.Time) {
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

// timerfdWait waits on a timerfd of its own, read through the runtime's
// network poller: the kernel's high-resolution timer makes it readable
// at the instant, and a goroutine waiting on it holds no thread and no
// P. Where a timerfd cannot be made it waits as sleepWait.
func timerfdWait() (func(time.Time), func()) {
	const clockMonotonic = 1
	fd, _, errno := syscall.Syscall(syscall.SYS_TIMERFD_CREATE, clockMonotonic, syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if errno != 0 {
		return sleepWait()
	}
	// A non-blocking descriptor: os registers it with the poller. Its
	// Fd method would make it blocking again, so fd is kept instead.
	f := os.NewFile(fd, "timerfd")
	var buf [8]byte
	return func(t time.Time) {
		d := time.Until(t)
		if d <= 0 {
			return
		}
		// struct itimerspec: it_interval 0 (one expiry), it_value d.
		spec := [2]syscall.Timespec{{}, syscall.NsecToTimespec(int64(d))}
		if _, _, errno := syscall.Syscall6(syscall.SYS_TIMERFD_SETTIME, fd, 0, uintptr(unsafe.Pointer(&spec)), 0, 0, 0); errno != 0 {
			time.Sleep(time.Until(t))
			return
		}
		_, _ = f.Read(buf[:])
	}, func() { _ = f.Close() }
}
