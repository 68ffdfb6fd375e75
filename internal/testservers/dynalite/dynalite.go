// Package dynalite runs dynalite, a DynamoDB-compatible server (npm
// dynalite@4.0.0, pinned in this directory's package.json and
// package-lock.json), on 127.0.0.1 for tests and benchmarks.
//
// The first Start in a fresh checkout runs `npm ci` here (node_modules is
// git-ignored); it needs node and npm on PATH and the npm registry. A missing
// tool fails the test with the fix in the message, never a skip.
//
//	srv := dynalite.MustStart(t)            // stopped by t.Cleanup
//	endpoint := srv.Endpoint            // http://127.0.0.1:port, for a DynamoDB client
//	srv.Kill(); srv.Restart(ctx)        // fault injection, same endpoint
//
// In TestMain, where there is no testing.TB, use Start and Stop.
//
// dynalite's gaps, which adapters must not rely on: no TTL API
// (UpdateTimeToLive / DescribeTimeToLive are unknown operations, and nothing
// is ever deleted by TTL), and a failed condition never returns the old item
// (ReturnValuesOnConditionCheckFailure=ALL_OLD is accepted and ignored).
package dynalite

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/internal/testservers/launcher"
)

// DirEnv overrides the directory holding launch.js and package.json (by
// default found from this source file's path, which -trimpath removes).
const DirEnv = "KVBREAKER_DYNALITE_DIR"

// startTimeout bounds npm-less startup: node loading dynalite and
// listening. The wait ends as soon as it listens; the bound only catches a
// server that never will, so it leaves room for a loaded machine (on 2
// shared cores at a load average of 52, dynalite was not listening after
// 30 s).
const startTimeout = 3 * time.Minute

// Server is a running dynalite process. Its methods are safe for concurrent
// use.
type Server struct {
	// Endpoint is the base URL, http://127.0.0.1:PORT; it stays the same
	// across Restart.
	Endpoint string

	port    int
	dataDir string // "" for in-memory

	mu   sync.Mutex
	proc *launcher.Process // nil before the first start
}

// Option configures Start and MustStart.
type Option func(*Server)

// Persistent keeps the data in dir (LevelDB) instead of memory, so tables and
// items survive Kill and Restart.
func Persistent(dir string) Option { return func(s *Server) { s.dataDir = dir } }

// MustStart launches dynalite, fails tb if it cannot, and stops it in
// tb.Cleanup.
func MustStart(tb testing.TB, opts ...Option) *Server {
	tb.Helper()
	s, err := Start(tb.Context(), opts...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Stop)
	return s
}

// Start installs dynalite if needed and starts it on a free port. The caller
// must call Stop.
func Start(ctx context.Context, opts ...Option) (*Server, error) {
	s := &Server{}
	for _, o := range opts {
		o(s)
	}
	if err := Install(ctx); err != nil {
		return nil, err
	}
	if err := s.start(ctx); err != nil {
		return nil, err
	}
	s.Endpoint = "http://127.0.0.1:" + strconv.Itoa(s.port)
	return s, nil
}

// Dir returns the fixture directory (launch.js, package.json).
func Dir() (string, error) {
	_, file, _, _ := runtime.Caller(0)
	return launcher.Dir("dynalite", DirEnv, file)
}

// Install runs `npm ci` in the fixture directory if node_modules/dynalite is
// missing; concurrent test binaries serialise on a lock file.
func Install(ctx context.Context) error {
	dir, err := Dir()
	if err != nil {
		return err
	}
	return launcher.Install(ctx, "dynalite", dir, "dynalite")
}

// start launches the process on s.port (0 the first time) and waits until it
// answers HTTP.
func (s *Server) start(ctx context.Context) error {
	dir, err := Dir()
	if err != nil {
		return err
	}
	args := []string{filepath.Join(dir, "launch.js"), "--port", strconv.Itoa(s.port)}
	if s.dataDir != "" {
		args = append(args, "--path", s.dataDir)
	}
	cmd := exec.Command("node", args...)
	cmd.Dir = dir
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	proc, port, err := launcher.Start(ctx, "dynalite", cmd, listening, startTimeout)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.proc = proc
	s.mu.Unlock()
	s.port, _ = strconv.Atoi(port)
	if err := waitHTTP(ctx, "http://127.0.0.1:"+port); err != nil {
		s.Kill()
		return fmt.Errorf("dynalite fixture: %w; stderr: %s", err, proc.Stderr())
	}
	return nil
}

// listening recognises the launcher's "LISTENING <port>" line.
func listening(line []byte) (string, bool) {
	p, ok := bytes.CutPrefix(line, []byte("LISTENING "))
	if !ok {
		return "", false
	}
	n, err := strconv.Atoi(string(p))
	if err != nil {
		return "", false
	}
	return strconv.Itoa(n), true
}

// waitHTTP polls url until any HTTP answer comes back.
func waitHTTP(ctx context.Context, url string) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			_ = resp.Body.Close()
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no HTTP answer from %s: %w", url, err)
		case <-tick.C:
		}
	}
}

// PID returns the running process's id, or 0 when stopped.
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return 0
	}
	return s.proc.PID()
}

// Done is closed when the current process exits, for whatever reason.
func (s *Server) Done() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		c := make(chan struct{})
		close(c)
		return c
	}
	return s.proc.Done()
}

// Kill ends the process abruptly (SIGKILL by PID), as a crash would, and
// waits for it. In-memory data is lost; see Persistent.
func (s *Server) Kill() { s.halt(true) }

// Stop asks the process to exit (its stdin closes), kills it after a second
// if it has not, and waits. Stop is idempotent.
func (s *Server) Stop() { s.halt(false) }

func (s *Server) halt(kill bool) {
	s.mu.Lock()
	proc := s.proc
	s.mu.Unlock()
	if proc == nil {
		return
	}
	if sigCont != nil {
		_ = proc.Signal(sigCont) // a paused process cannot exit
	}
	if kill {
		proc.Kill()
	} else {
		proc.Stop(time.Second)
	}
}

// Pause freezes the process (SIGSTOP): connections are accepted by the
// kernel but never answered, as with a hung server or a network partition.
// Resume undoes it; Stop and Kill resume first. On systems without
// SIGSTOP both return an error matching errors.ErrUnsupported.
func (s *Server) Pause() error { return s.signal(sigStop) }

// Resume continues a paused process (SIGCONT).
func (s *Server) Resume() error { return s.signal(sigCont) }

func (s *Server) signal(sig os.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sig == nil {
		return fmt.Errorf("dynalite fixture: pause/resume: %w on this OS", errors.ErrUnsupported)
	}
	if s.proc == nil {
		return errors.New("dynalite fixture: not running")
	}
	return s.proc.Signal(sig)
}

// Restart starts a stopped or killed server again on the same port, so
// clients built for Endpoint reconnect. It stops a running one first.
func (s *Server) Restart(ctx context.Context) error {
	s.Stop()
	var err error
	// The port was ours a moment ago; retry briefly if the kernel has not
	// released it yet.
	for range 20 {
		if err = s.start(ctx); err == nil || !strings.Contains(err.Error(), "EADDRINUSE") {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
	return err
}

// Addr returns host:port.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Stderr returns what the server process has written to stderr so far (its
// crash message, if it died), or "" before the first start.
func (s *Server) Stderr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return ""
	}
	return s.proc.Stderr()
}
