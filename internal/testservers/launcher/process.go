package launcher

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// Process is a running launcher (node and whatever it spawns) started by
// Start. The launcher must exit when its stdin closes, so a test binary that
// dies without cleaning up leaves nothing behind. Its methods are safe for
// concurrent use.
type Process struct {
	name        string
	cmd         *exec.Cmd
	stdin       io.WriteCloser
	done        chan struct{} // closed when cmd has been waited for
	stderr      lockedBuffer
	group       bool
	timeoutStop time.Duration // < 0: Kill a launcher not ready in time
}

// Option configures Start.
type Option func(*Process)

// Group runs the launcher in a process group of its own (whose id is its
// PID), so Kill and Stop end everything it spawned by the group id even if
// the launcher dies first. Where there are no process groups it does
// nothing, and only the launcher is killed.
func Group() Option { return func(p *Process) { p.group = true } }

// StopOnTimeout makes Start end a launcher that is not ready in time with
// Stop(grace), giving it a chance to clean up, instead of Kill.
func StopOnTimeout(grace time.Duration) Option {
	return func(p *Process) { p.timeoutStop = grace }
}

// Start starts cmd, an unstarted command (Start sets its stdin, stdout and
// stderr), and waits for the first stdout line for which ready reports
// true, returning the string ready made of it (a port, a URL). name
// prefixes errors ("<name> fixture: ..."). If the launcher exits first,
// the error holds its stderr; if it is not ready after timeout (or ctx
// ends), Start kills it (see StopOnTimeout) and says so. The caller must
// Stop or Kill the returned Process.
func Start(ctx context.Context, name string, cmd *exec.Cmd, ready func(line []byte) (string, bool), timeout time.Duration, opts ...Option) (*Process, string, error) {
	p := &Process{name: name, cmd: cmd, done: make(chan struct{}), timeoutStop: -1}
	for _, o := range opts {
		o(p)
	}
	if p.group {
		ownGroup(cmd)
	}
	stdin, err := cmd.StdinPipe() // the launcher exits when this closes
	if err != nil {
		return nil, "", fmt.Errorf("%s fixture: %w", name, err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, "", fmt.Errorf("%s fixture: %w", name, err)
	}
	p.stdin = stdin
	cmd.Stderr = &p.stderr
	if err := cmd.Start(); err != nil {
		return nil, "", fmt.Errorf("%s fixture: start %s: %w", name, cmd.Args[0], err)
	}
	readyc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if v, ok := ready(sc.Bytes()); ok {
				select {
				case readyc <- v:
				default:
				}
			}
		}
		_ = cmd.Wait()
		close(p.done)
	}()

	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	select {
	case v := <-readyc:
		return p, v, nil
	case <-p.done:
		_ = stdin.Close()
		return nil, "", fmt.Errorf("%s fixture: %s exited before listening: %s", name, cmd.Args[0], p.Stderr())
	case <-ctx.Done():
		if p.timeoutStop >= 0 {
			p.Stop(p.timeoutStop)
		} else {
			p.Kill()
		}
		return nil, "", fmt.Errorf("%s fixture: not listening after %v: %s", name, timeout, p.Stderr())
	}
}

// PID returns the launcher's process id (with Group, also the process
// group's id), or 0 once it has exited.
func (p *Process) PID() int {
	select {
	case <-p.done:
		return 0
	default:
		return p.cmd.Process.Pid
	}
}

// Done is closed once the launcher has exited and been waited for.
func (p *Process) Done() <-chan struct{} { return p.done }

// Stderr returns what the launcher has written to stderr (the first 64 KiB
// or so), without surrounding white space.
func (p *Process) Stderr() string { return strings.TrimSpace(p.stderr.String()) }

// Signal sends sig to the launcher (not to its group).
func (p *Process) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// Stop asks the launcher to exit (its stdin closes), kills it (with Group,
// its process group) if it has not exited after grace, and waits. With
// Group, it then kills the group again, so nothing the launcher spawned
// survives it. Stop is idempotent.
func (p *Process) Stop(grace time.Duration) {
	_ = p.stdin.Close()
	select {
	case <-p.done:
	case <-time.After(grace):
		p.kill()
		<-p.done
	}
	if p.group {
		p.kill()
	}
}

// Kill ends the launcher (with Group, its process group) abruptly, as a
// crash would (SIGKILL by PID), and waits for it.
func (p *Process) Kill() {
	p.kill()
	select {
	case <-p.done:
	case <-time.After(time.Second):
		p.kill()
		<-p.done
	}
	_ = p.stdin.Close()
}

func (p *Process) kill() {
	if p.group {
		killGroup(p.cmd)
	} else {
		_ = p.cmd.Process.Kill()
	}
}

// lockedBuffer collects a launcher's stderr, up to about 64 KiB.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() > 64<<10 {
		return len(p), nil
	}
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
