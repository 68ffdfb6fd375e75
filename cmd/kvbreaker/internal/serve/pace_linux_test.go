package serve

import (
	"os"
	"runtime"
	"runtime/metrics"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// waiters are the ways the open loop's clients can wait for an arrival.
// timerfd is precise and holds nothing while it waits. nanosleep is
// precise too, but a goroutine in a system call keeps its thread and,
// until the runtime's monitor takes it back, its P: with 64 clients
// each in the last stretch of a wait at times, every P was held so for
// 16% of a run, and no network event was handled then, so serve's
// answers waited for a client's sleep to end (in a runtime trace of
// target=serve/wait=nanosleep/rate=10, each decision at or above the
// 99th percentile overlapped such a time). sleep, the runtime's timers,
// holds nothing but wakes an idle process on whole milliseconds.
var waiters = []waiter{
	{"timerfd", timerfdWait},
	{"nanosleep", func() (func(time.Time), func()) { return nanosleepUntil, func() {} }},
	{"sleep", sleepWait},
}

// nanosleepUntil returns at t or soon after: a runtime sleep to within
// 2 ms of t, then a nanosleep, which the kernel's high-resolution
// timers end within microseconds, in a system call that holds the
// goroutine's P (waiters).
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

// TestTimerfdWaitHoldsNoThread: clients waiting in timerfdWait are parked
// goroutines, none in a system call, so they hold no thread and no P.
// The negative control: as many goroutines in a nanosleep are counted
// in system calls by the same check.
func TestTimerfdWaitHoldsNoThread(t *testing.T) {
	const n = 8 // more than GOMAXPROCS on the machines this runs on
	read := func(name string) int {
		s := []metrics.Sample{{Name: name}}
		metrics.Read(s)
		return int(s[0].Value.Uint64())
	}
	const inSyscall = "/sched/goroutines/not-in-go:goroutines"
	const waiting = "/sched/goroutines/waiting:goroutines"
	const span = 500 * time.Millisecond

	// n goroutines wait on timers of their own due in span; once they
	// are all parked, fewer than n goroutines are in system calls.
	base := read(waiting)
	due := time.Now().Add(span)
	var wg sync.WaitGroup
	for range n {
		wait, stop := timerfdWait()
		wg.Go(func() { defer stop(); wait(due) })
	}
	parked, calls := false, 0
	for time.Until(due) > span/4 {
		if read(waiting) >= base+n {
			parked, calls = true, read(inSyscall)
			break
		}
		runtime.Gosched()
	}
	wg.Wait()
	switch {
	case !parked:
		t.Skipf("undecided: %d goroutines in timerfdWait were not all parked within %v (a loaded machine)", n, span*3/4)
	case calls >= n:
		t.Fatalf("%d goroutines in system calls while %d wait in timerfdWait: want fewer than %d (a timerfd wait holds no thread)", calls, n, n)
	}

	// The negative control: n goroutines in nanosleep are seen.
	var started sync.WaitGroup
	started.Add(n)
	for range n {
		wg.Go(func() {
			ts := syscall.NsecToTimespec(int64(span))
			started.Done()
			_ = syscall.Nanosleep(&ts, nil)
		})
	}
	started.Wait()
	seen := 0
	for deadline := time.Now().Add(span / 2); time.Now().Before(deadline) && seen < n; runtime.Gosched() {
		seen = max(seen, read(inSyscall))
	}
	wg.Wait()
	if seen < n {
		t.Fatalf("the check saw at most %d goroutines in system calls while %d were in nanosleep: it cannot tell a wait that holds a thread", seen, n)
	}
}

// processCPU is the CPU time (user and system) this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
