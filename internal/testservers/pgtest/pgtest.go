// Package pgtest runs a real PostgreSQL server for tests: Debian's
// PostgreSQL (initdb and postgres from /usr/lib/postgresql/<version>/bin, or
// $KVBREAKER_PG_BIN) in a child process, listening only on 127.0.0.1 on a
// free port and on a unix socket in its temporary directory, with fsync off
// for speed. Faults are real: Kill ends the server's processes as a crash
// would (SIGKILL to each), Pause stops them (SIGSTOP) and Restart starts the
// server again on the same port and data. StartWith serves TLS with
// tlstest's certificates and refuses TCP without it.
//
// PostgreSQL refuses to run as root. When the tests run as root, the server
// runs as the unprivileged "postgres" user (the Debian package's), which
// owns the temporary directory; otherwise it runs as the current user.
//
// The server must not outlive the test binary: the postmaster is started
// with a parent-death signal (SIGKILL, Linux), and its backends exit when
// the postmaster dies (unless they are paused then). The package needs only the standard library.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/internal/testservers/tlstest"
)

// BinEnv names a directory holding initdb and postgres, overriding the
// search under /usr/lib/postgresql.
const BinEnv = "KVBREAKER_PG_BIN"

// User is the database superuser the server is initialised with; it
// authenticates by trust on loopback only.
const User = "postgres"

// startTimeout bounds how long a start or restart waits for the server.
const startTimeout = 3 * time.Minute

// stopGrace bounds a fast shutdown before the processes are killed.
const stopGrace = 10 * time.Second

// Server is a running (or stopped) PostgreSQL test server. Its methods are
// safe for concurrent use.
type Server struct {
	dir  string // temp dir holding data/ and the socket, removed by Close
	port int
	bin  string
	cred *syscall.Credential // nil: run as the current user
	opts Options

	mu   sync.Mutex
	cmd  *exec.Cmd     // nil while stopped
	done chan struct{} // closed when cmd has been waited for
	log  *tail
}

// Options are a server's security settings.
type Options struct {
	// TLS, when set, turns TLS on with TLS's server certificate and makes
	// the server refuse TCP connections without it (pg_hba.conf's
	// hostnossl … reject); the unix socket stays plain.
	TLS *tlstest.PKI
	// Settings are extra server settings, each "name=value" (postgres
	// -c), such as "synchronous_standby_names=*".
	Settings []string
}

// Start initialises a database cluster in a temporary directory and starts
// a server on it; Close stops it and removes the directory.
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
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	cred, err := credential()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return nil, fmt.Errorf("pgtest: temp dir: %w", err)
	}
	s := &Server{dir: dir, bin: bin, cred: cred, opts: o}
	if err := s.initdb(ctx); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := s.setupTLS(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := s.startOnFreePort(ctx); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

// startOnFreePort starts the server on a port picked free. Another
// process can take that port before the server binds it (tests run
// side by side), so a few are tried.
func (s *Server) startOnFreePort(ctx context.Context) error {
	var err error
	for range 3 {
		if s.port, err = pickPort(); err != nil {
			return err
		}
		if err = s.Restart(ctx); err == nil {
			return nil
		}
	}
	return err
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

// URL returns a connection URL for database "postgres" as User over TCP:
// without TLS, or with TLS verified against the authority's certificate
// (sslmode=verify-full, sslrootcert) when the server has TLS.
func (s *Server) URL() string { return s.URLFor(s.Addr()) }

// URLFor is URL with another address in its place (a fault proxy's).
func (s *Server) URLFor(addr string) string {
	if s.opts.TLS != nil {
		return "postgres://" + User + "@" + addr + "/postgres?sslmode=verify-full&sslrootcert=" + url.QueryEscape(s.opts.TLS.CAFile)
	}
	return "postgres://" + User + "@" + addr + "/postgres?sslmode=disable"
}

// setupTLS copies the server's certificate and key where the server's user
// owns them (PostgreSQL refuses a key others can read) and makes
// pg_hba.conf refuse plain TCP.
func (s *Server) setupTLS() error {
	p := s.opts.TLS
	if p == nil {
		return nil
	}
	for _, f := range []struct{ from, to string }{{p.ServerCertFile, "server.crt"}, {p.ServerKeyFile, "server.key"}} {
		b, err := os.ReadFile(f.from)
		if err != nil {
			return fmt.Errorf("pgtest: %w", err)
		}
		to := filepath.Join(s.dir, f.to)
		if err := os.WriteFile(to, b, 0o600); err != nil {
			return fmt.Errorf("pgtest: %w", err)
		}
		if s.cred != nil {
			if err := os.Chown(to, int(s.cred.Uid), int(s.cred.Gid)); err != nil {
				return fmt.Errorf("pgtest: %w", err)
			}
		}
	}
	hba := filepath.Join(s.DataDir(), "pg_hba.conf")
	old, err := os.ReadFile(hba)
	if err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	return os.WriteFile(hba, append([]byte("hostnossl all all all reject\n"), old...), 0o600)
}

// DataDir returns the data directory, kept across Stop and Restart.
func (s *Server) DataDir() string { return filepath.Join(s.dir, "data") }

// PID returns the postmaster's process id, or 0 while it is stopped.
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

func (s *Server) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(s.bin, name), args...)
	cmd.Dir = s.dir
	cmd.Env = append(os.Environ(), "LC_ALL=C", "TZ=UTC")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	return cmd
}

func (s *Server) initdb(ctx context.Context) error {
	if s.cred != nil {
		if err := os.Chown(s.dir, int(s.cred.Uid), int(s.cred.Gid)); err != nil {
			return fmt.Errorf("pgtest: give %s to the postgres user: %w", s.dir, err)
		}
	}
	if err := os.Chmod(s.dir, 0o700); err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	cmd := s.command(ctx, "initdb", "-D", s.DataDir(), "-U", User, "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync")
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("pgtest: initdb not done %v after it started, when the start's context ended (%v): give the start more time on a loaded machine\n%s", time.Since(start).Round(time.Second), ctx.Err(), out)
		}
		return fmt.Errorf("pgtest: initdb: %v\n%s", err, out)
	}
	return nil
}

// Restart starts a stopped server on the same port and data directory (after
// Kill, PostgreSQL recovers from its log first). Restarting a running server
// does nothing.
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
	_ = os.Remove(filepath.Join(s.DataDir(), "postmaster.pid")) // a killed server's
	cmd := s.command(context.Background(), "postgres",
		"-D", s.DataDir(),
		"-p", strconv.Itoa(s.port),
		"-k", s.dir,
		"-c", "listen_addresses=127.0.0.1",
		"-c", "fsync=off",
		// synchronous_commit stays on: with fsync off a commit is a
		// write(2) to the OS, cheap, and survives Kill (SIGKILL).
		"-c", "full_page_writes=off",
		"-c", "max_connections=300",
		"-c", "dynamic_shared_memory_type=mmap",
		"-c", "logging_collector=off",
	)
	for _, kv := range s.opts.Settings {
		cmd.Args = append(cmd.Args, "-c", kv)
	}
	if s.opts.TLS != nil {
		cmd.Args = append(cmd.Args, "-c", "ssl=on",
			"-c", "ssl_cert_file="+filepath.Join(s.dir, "server.crt"),
			"-c", "ssl_key_file="+filepath.Join(s.dir, "server.key"))
	}
	// Each backend makes itself a session of its own (setsid), so signals
	// for the whole server go to the postmaster's children one by one.
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	lg := &tail{}
	cmd.Stdout, cmd.Stderr = lg, lg
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("pgtest: start postgres: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	if err := waitReady(ctx, filepath.Join(s.DataDir(), "postmaster.pid"), done); err != nil {
		_ = signalAll(cmd.Process.Pid, syscall.SIGKILL)
		<-done
		return fmt.Errorf("pgtest: postgres on %s: %w\n%s", s.Addr(), err, lg.String())
	}
	s.cmd, s.done, s.log = cmd, done, lg
	return nil
}

// waitReady waits until the postmaster records "ready" in its pid file (its
// eighth line), it exits, or the start bound passes.
func waitReady(ctx context.Context, pidFile string, done <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if b, err := os.ReadFile(pidFile); err == nil {
			if lines := strings.Split(string(b), "\n"); len(lines) >= 8 && strings.TrimSpace(lines[7]) == "ready" {
				return nil
			}
		}
		select {
		case <-done:
			return errors.New("exited before it was ready")
		case <-ctx.Done():
			return fmt.Errorf("not ready: %w", ctx.Err())
		case <-tick.C:
		}
	}
}

// Stop ends the server with a fast shutdown (SIGINT), killing it if it has
// not exited after a grace period, and keeps its port and data for Restart.
// Stopping a stopped server does nothing.
func (s *Server) Stop() { s.halt(false) }

// Kill ends the server's processes abruptly (SIGKILL to the postmaster and
// every child), as a crash would: clients see their connections reset.
func (s *Server) Kill() { s.halt(true) }

func (s *Server) halt(kill bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	pid := s.cmd.Process.Pid
	if !kill {
		_ = signalAll(pid, syscall.SIGCONT) // a paused server cannot shut down
		_ = syscall.Kill(pid, syscall.SIGINT)
		select {
		case <-s.done:
		case <-time.After(stopGrace):
		}
	}
	_ = signalAll(pid, syscall.SIGKILL)
	<-s.done
	s.cmd = nil
}

// Pause stops the server's processes (SIGSTOP to each of them): they
// keep their connections but answer nothing, as a hung server. Resume
// continues them.
func (s *Server) Pause() error { return s.signal(syscall.SIGSTOP) }

// Resume continues a paused server (SIGCONT).
func (s *Server) Resume() error { return s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return errors.New("pgtest: server is stopped")
	}
	return signalAll(s.cmd.Process.Pid, sig)
}

// signalAll sends sig to the postmaster pid and its children. The
// postmaster is stopped first (and continued last), so it forks no child
// while they are listed.
func signalAll(pid int, sig syscall.Signal) error {
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return err
	}
	var errs []error
	for _, c := range children(pid) {
		if err := syscall.Kill(c, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
			errs = append(errs, err)
		}
	}
	if err := syscall.Kill(pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		errs = append(errs, err)
	}
	if sig != syscall.SIGSTOP && sig != syscall.SIGKILL {
		_ = syscall.Kill(pid, syscall.SIGCONT)
	}
	return errors.Join(errs...)
}

// children returns the pids whose parent is pid, from /proc.
func children(pid int) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		c, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid …; comm may hold spaces and parentheses.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) >= 2 && f[1] == strconv.Itoa(pid) {
			out = append(out, c)
		}
	}
	return out
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
		fmt.Fprintf(os.Stderr, "pgtest: remove %s: %v\n", s.dir, err)
	}
}

// binDir finds the directory holding initdb and postgres: $KVBREAKER_PG_BIN,
// else the newest /usr/lib/postgresql/<version>/bin.
func binDir() (string, error) {
	if d := os.Getenv(BinEnv); d != "" {
		return d, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool {
		vi, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[i])))
		vj, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[j])))
		return vi > vj
	})
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "postgres")); err == nil {
			return d, nil
		}
	}
	if p, err := exec.LookPath("postgres"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", fmt.Errorf("pgtest: no PostgreSQL server found (install Debian's postgresql, or set $%s to the directory holding initdb and postgres)", BinEnv)
}

// credential returns the unprivileged user to run the server as when this
// process is root (PostgreSQL refuses root), or nil.
func credential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("pgtest: running as root, and PostgreSQL refuses root: need the unprivileged \"postgres\" user (Debian's postgresql package creates it): %w", err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("pgtest: user postgres: %w", err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}, nil
}

// pickPort is freePort; a test makes it return a taken port first.
var pickPort = freePort

// freePort returns a TCP port that was free on 127.0.0.1.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pgtest: pick a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// tail keeps the last 16 KiB of the server's output, for errors.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if n := len(t.buf) - 16<<10; n > 0 {
		t.buf = append(t.buf[:0], t.buf[n:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.buf))
}
