package launcher

import (
	"context"
	"errors"
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
// nothing, as a hung server. Resume continues it.
func (s *Server) Pause() error { return s.signal(syscall.SIGSTOP) }

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
