package launcher

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"
)

// Server is the lifecycle a test server of ours shares: its current
// Process (nil while stopped), started again by Restart, stopped gracefully
// or killed, paused and resumed by signal. Its methods are safe for
// concurrent use; embed it and give it the start function.
type Server struct {
	// Name prefixes errors ("redis: server is stopped").
	Name string
	// Grace bounds a graceful Stop before the process is killed.
	Grace time.Duration

	mu   sync.Mutex
	proc *Process
}

// PID returns the process id, or 0 while the server is stopped.
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return 0
	}
	return s.proc.PID()
}

// Running reports whether the server is started.
func (s *Server) Running() bool { return s.PID() != 0 }

// Stderr returns what the process wrote to stderr, or "" while stopped.
func (s *Server) Stderr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return ""
	}
	return s.proc.Stderr()
}

// Restart calls start unless the server is running (a process that died
// on its own counts as stopped), and keeps the process it returns.
func (s *Server) Restart(ctx context.Context, start func(context.Context) (*Process, error)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil {
		select {
		case <-s.proc.Done():
			s.proc = nil
		default:
			return nil
		}
	}
	p, err := start(ctx)
	if err != nil {
		return err
	}
	s.proc = p
	return nil
}

// Stop ends the server gracefully (SIGTERM; SIGCONT first, since a paused
// process cannot act on it), killing it after Grace. Stopping a stopped
// server does nothing.
func (s *Server) Stop() { s.halt(false) }

// Kill ends the server abruptly (SIGKILL), as a crash would.
func (s *Server) Kill() { s.halt(true) }

func (s *Server) halt(kill bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return
	}
	if kill {
		s.proc.Kill()
	} else {
		_ = s.proc.Signal(syscall.SIGCONT)
		_ = s.proc.Signal(syscall.SIGTERM)
		s.proc.Stop(s.Grace)
	}
	s.proc = nil
}

// Pause stops the process (SIGSTOP): it keeps its connections but answers
// nothing, as a hung server. Resume continues it. It returns once the
// process is stopped (where /proc shows it), not when the signal is sent:
// a request made right after must not be answered.
func (s *Server) Pause() error {
	if err := s.signal(syscall.SIGSTOP); err != nil {
		return err
	}
	pid := s.PID()
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return nil // no /proc here: the signal is all we can wait for
		}
		// The state follows the command in parentheses: "pid (comm) T ...".
		if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) && (b[i+2] == 'T' || b[i+2] == 't') {
			return nil
		}
		time.Sleep(time.Millisecond) // waiting for the kernel, not for logic
	}
	return fmt.Errorf("%s: pid %d not stopped 2 s after SIGSTOP", s.Name, pid)
}

// Resume continues a paused server (SIGCONT).
func (s *Server) Resume() error { return s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig os.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return errors.New(s.Name + ": server is stopped")
	}
	return s.proc.Signal(sig)
}
