// Package mariadbtest runs a real MariaDB server for tests: Debian's
// mariadbd (10.11; mariadb-install-db makes its data directory) in a
// child process, listening only on 127.0.0.1 on a free port and on a unix
// socket in its temporary directory, with the binary log off and the redo
// log written but not flushed at each commit. A database named Database
// exists from the start. Faults are real: Kill ends the server as a crash
// would (SIGKILL), Pause stops it (SIGSTOP) and Restart starts it again on
// the same port and data (after Kill, InnoDB recovers from its redo log).
//
// MariaDB refuses to run as root. When the tests run as root, the server
// runs as the unprivileged "mysql" user (the Debian package's), which owns
// the temporary directory; otherwise it runs as the current user.
//
// StartWith serves TLS with tlstest's certificates and refuses TCP
// connections without it (require_secure_transport).
//
// The server must not outlive the test binary: it is started with a
// parent-death signal (SIGKILL, Linux). The package needs only the
// standard library.
package mariadbtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/internal/testservers/tlstest"
)

// BinEnv names a directory holding mariadbd and mariadb-install-db,
// overriding the search on PATH, /usr/sbin and /usr/bin.
const BinEnv = "KVBREAKER_MARIADB_BIN"

// User is the server's superuser; mariadb-install-db gives it no password
// and the server admits it from 127.0.0.1 only (it listens nowhere else).
const User = "root"

// Database is the database the server creates at start.
const Database = "kvbreaker"

const (
	startTimeout = 3 * time.Minute
	stopGrace    = 10 * time.Second
)

// Server is a running (or stopped) MariaDB test server. Its methods are
// safe for concurrent use.
type Server struct {
	dir    string // temp dir holding data/, the socket and init.sql; removed by Close
	port   int
	server string // mariadbd's path
	cred   *syscall.Credential
	opts   Options

	mu   sync.Mutex
	cmd  *exec.Cmd     // nil while stopped
	done chan struct{} // closed when cmd has been waited for
	log  *tail
}

// Options are a server's security settings.
type Options struct {
	// TLS, when set, turns TLS on with TLS's server certificate, trusts
	// the client certificates TLS's authority signed (for a user created
	// REQUIRE X509), and makes the server refuse TCP connections without
	// TLS (require_secure_transport); the unix socket stays plain.
	TLS *tlstest.PKI
}

// Start initialises a data directory in a temporary directory and starts a
// server on it; Close stops it and removes the directory.
func Start(ctx context.Context) (*Server, error) { return StartWith(ctx, Options{}) }

// MustStartWith is StartWith for tb, closed when tb finishes.
func MustStartWith(tb testing.TB, o Options) *Server {
	tb.Helper()
	s, err := StartWith(tb.Context(), o)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Close)
	return s
}

// StartWith is Start with o's TLS settings.
func StartWith(ctx context.Context, o Options) (*Server, error) {
	server, install, err := binaries()
	if err != nil {
		return nil, err
	}
	cred, err := credential()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "mariadbtest-")
	if err != nil {
		return nil, fmt.Errorf("mariadbtest: temp dir: %w", err)
	}
	s := &Server{dir: dir, server: server, cred: cred, opts: o}
	if err := s.install(ctx, install); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := s.setupTLS(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	var lastErr error
	// A port picked free can be taken by someone else before the server
	// binds it; try a few.
	for range 3 {
		if s.port, err = freePort(); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		if lastErr = s.Restart(ctx); lastErr == nil {
			return s, nil
		}
	}
	os.RemoveAll(dir)
	return nil, lastErr
}

// MustStart starts a server for tb and closes it when tb finishes; it fails
// tb if the server cannot start.
func MustStart(tb testing.TB) *Server {
	tb.Helper()
	s, err := Start(tb.Context())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Close)
	return s
}

// Addr returns the server's TCP address, 127.0.0.1:port, the same across
// Stop and Restart.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// DSN returns a go-sql-driver/mysql data source name for Database as User
// over TCP.
func (s *Server) DSN() string { return s.DSNFor(s.Addr()) }

// DSNFor is DSN with another address in its place (a fault proxy's).
func (s *Server) DSNFor(addr string) string {
	return User + "@tcp(" + addr + ")/" + Database
}

// Version returns what the server said it is at its last start
// ("10.11.19-MariaDB-0+deb12u1"), or "" if it has not said yet.
func (s *Server) Version() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.log == nil {
		return ""
	}
	return s.log.version()
}

// DataDir returns the data directory, kept across Stop and Restart.
func (s *Server) DataDir() string { return filepath.Join(s.dir, "data") }

// PID returns the server's process id, or 0 while it is stopped.
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

func (s *Server) command(ctx context.Context, path string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Dir = s.dir
	// Temporary tables go in the server's own directory, not the shared
	// /tmp: an install there failed deleting its own temporary file while
	// other servers started beside it.
	cmd.Env = append(os.Environ(), "LC_ALL=C", "TMPDIR="+s.dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	return cmd
}

func (s *Server) install(ctx context.Context, install string) error {
	if s.cred != nil {
		if err := os.Chown(s.dir, int(s.cred.Uid), int(s.cred.Gid)); err != nil {
			return fmt.Errorf("mariadbtest: give %s to the mysql user: %w", s.dir, err)
		}
	}
	if err := os.Chmod(s.dir, 0o700); err != nil {
		return fmt.Errorf("mariadbtest: %w", err)
	}
	init := "CREATE DATABASE IF NOT EXISTS `" + Database + "`;\n"
	if err := os.WriteFile(filepath.Join(s.dir, "init.sql"), []byte(init), 0o644); err != nil {
		return fmt.Errorf("mariadbtest: %w", err)
	}
	cmd := s.command(ctx, install, "--no-defaults", "--datadir="+s.DataDir(),
		"--auth-root-authentication-method=normal", "--skip-test-db", "--skip-name-resolve")
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("mariadbtest: %s not done %v after it started, when the start's context ended (%v): give the start more time on a loaded machine\n%s", install, time.Since(start).Round(time.Second), ctx.Err(), out)
		}
		return fmt.Errorf("mariadbtest: %s: %v\n%s", install, err, out)
	}
	return nil
}

// setupTLS copies the authority's certificate and the server's certificate
// and key where the server's user can read them (the test's directory and
// key are the test's user's alone).
func (s *Server) setupTLS() error {
	p := s.opts.TLS
	if p == nil {
		return nil
	}
	for _, f := range []struct{ from, to string }{{p.CAFile, "ca.crt"}, {p.ServerCertFile, "server.crt"}, {p.ServerKeyFile, "server.key"}} {
		b, err := os.ReadFile(f.from)
		if err != nil {
			return fmt.Errorf("mariadbtest: %w", err)
		}
		to := filepath.Join(s.dir, f.to)
		if err := os.WriteFile(to, b, 0o600); err != nil {
			return fmt.Errorf("mariadbtest: %w", err)
		}
		if s.cred != nil {
			if err := os.Chown(to, int(s.cred.Uid), int(s.cred.Gid)); err != nil {
				return fmt.Errorf("mariadbtest: %w", err)
			}
		}
	}
	return nil
}

// Restart starts a stopped server on the same port and data directory.
// Restarting a running server does nothing.
func (s *Server) Restart(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		select {
		case <-s.done:
			s.cmd = nil // died on its own
		default:
			return nil
		}
	}
	cmd := s.command(context.Background(), s.server,
		"--no-defaults",
		"--datadir="+s.DataDir(),
		"--socket="+filepath.Join(s.dir, "mysqld.sock"),
		"--pid-file="+filepath.Join(s.dir, "mysqld.pid"),
		"--port="+strconv.Itoa(s.port),
		"--bind-address=127.0.0.1",
		"--skip-name-resolve",
		"--init-file="+filepath.Join(s.dir, "init.sql"),
		"--skip-log-bin",
		// A commit is written to the OS, not flushed: it survives Kill
		// (SIGKILL), not a power cut, which the tests do not make.
		"--innodb-flush-log-at-trx-commit=2",
		"--innodb-doublewrite=0",
		"--innodb-buffer-pool-size=64M",
		"--max-connections=500",
		"--performance-schema=OFF",
	)
	if s.opts.TLS != nil {
		cmd.Args = append(cmd.Args,
			"--ssl-ca="+filepath.Join(s.dir, "ca.crt"),
			"--ssl-cert="+filepath.Join(s.dir, "server.crt"),
			"--ssl-key="+filepath.Join(s.dir, "server.key"),
			"--require-secure-transport=ON")
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	lg := &tail{ready: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = lg, lg
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("mariadbtest: start %s: %w", s.server, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	if err := waitReady(ctx, lg, done); err != nil {
		_ = cmd.Process.Kill()
		<-done
		return fmt.Errorf("mariadbtest: mariadbd on %s: %w\n%s", s.Addr(), err, lg.String())
	}
	s.cmd, s.done, s.log = cmd, done, lg
	return nil
}

// waitReady waits until the server says it is ready for connections (after
// running the init file), it exits, or the start bound passes.
func waitReady(ctx context.Context, lg *tail, done <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	select {
	case <-lg.ready:
		return nil
	case <-done:
		return errors.New("exited before it was ready")
	case <-ctx.Done():
		return fmt.Errorf("not ready: %w", ctx.Err())
	}
}

// Stop ends the server with a normal shutdown (SIGTERM), killing it if it
// has not exited after a grace period, and keeps its port and data for
// Restart. Stopping a stopped server does nothing.
func (s *Server) Stop() { s.halt(false) }

// Kill ends the server abruptly (SIGKILL), as a crash would: clients see
// their connections reset.
func (s *Server) Kill() { s.halt(true) }

func (s *Server) halt(kill bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	p := s.cmd.Process
	if !kill {
		_ = p.Signal(syscall.SIGCONT) // a paused server cannot shut down
		_ = p.Signal(syscall.SIGTERM)
		select {
		case <-s.done:
		case <-time.After(stopGrace):
		}
	}
	_ = p.Kill()
	<-s.done
	s.cmd = nil
}

// Pause stops the server (SIGSTOP): it keeps its connections but answers
// nothing, as a hung server. It returns once /proc shows the process
// stopped, so a request made right after is not answered. Resume continues
// it.
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
	return fmt.Errorf("mariadbtest: pid %d not stopped 2 s after SIGSTOP", pid)
}

// Resume continues a paused server (SIGCONT).
func (s *Server) Resume() error { return s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return errors.New("mariadbtest: server is stopped")
	}
	return s.cmd.Process.Signal(sig)
}

// Log returns the server's recent output.
func (s *Server) Log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.log == nil {
		return ""
	}
	return s.log.String()
}

// Close stops the server and removes its directory.
func (s *Server) Close() {
	s.Stop()
	if err := os.RemoveAll(s.dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(os.Stderr, "mariadbtest: remove %s: %v\n", s.dir, err)
	}
}

// binaries finds mariadbd and mariadb-install-db: in $KVBREAKER_MARIADB_BIN,
// else on PATH, in /usr/sbin or /usr/bin.
func binaries() (server, install string, err error) {
	find := func(name string) (string, bool) {
		if d := os.Getenv(BinEnv); d != "" {
			p := filepath.Join(d, name)
			_, err := os.Stat(p)
			return p, err == nil
		}
		if p, err := exec.LookPath(name); err == nil {
			return p, true
		}
		for _, d := range []string{"/usr/sbin", "/usr/bin"} {
			if _, err := os.Stat(filepath.Join(d, name)); err == nil {
				return filepath.Join(d, name), true
			}
		}
		return "", false
	}
	server, ok1 := find("mariadbd")
	install, ok2 := find("mariadb-install-db")
	if !ok1 || !ok2 {
		return "", "", fmt.Errorf("mariadbtest: no MariaDB server found (install Debian's mariadb-server, or set $%s to the directory holding mariadbd and mariadb-install-db)", BinEnv)
	}
	return server, install, nil
}

// credential returns the unprivileged user to run the server as when this
// process is root (MariaDB refuses root), or nil.
func credential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("mysql")
	if err != nil {
		return nil, fmt.Errorf("mariadbtest: running as root, and MariaDB refuses root: need the unprivileged \"mysql\" user (Debian's mariadb-server package creates it): %w", err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("mariadbtest: user mysql: %w", err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}, nil
}

// freePort returns a TCP port that was free on 127.0.0.1.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("mariadbtest: pick a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// readyLine is what mariadbd writes once it accepts connections, after its
// init file ran.
var readyLine = []byte("ready for connections")

// tail keeps the last 16 KiB of the server's output, for errors, and
// closes ready when the server says it is ready.
type tail struct {
	mu      sync.Mutex
	buf     []byte
	ready   chan struct{}
	isReady bool
	ver     string
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if !t.isReady && bytes.Contains(t.buf, readyLine) {
		t.isReady = true
		close(t.ready)
	}
	if t.isReady && t.ver == "" {
		// "Version: '10.11.19-MariaDB-0+deb12u1'  socket: ..." follows.
		if _, after, ok := bytes.Cut(t.buf, []byte("Version: '")); ok {
			if v, _, ok := bytes.Cut(after, []byte("'")); ok {
				t.ver = string(v)
			}
		}
	}
	if n := len(t.buf) - 16<<10; n > 0 {
		t.buf = append(t.buf[:0], t.buf[n:]...)
	}
	return len(p), nil
}

func (t *tail) version() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.ver
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.buf))
}
