// Package etcdtest starts a real, embedded, single-member etcd server for
// tests: on 127.0.0.1 with free ports, in a temporary data directory, with a
// short heartbeat and election timeout so that one-second leases exist. The
// server can be stopped and restarted on the same ports and data directory,
// for fault tests.
//
// Use Start from a test or benchmark, or New (with Close) from TestMain to
// share one server across a package's tests.
package etcdtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// Timing of the embedded server. With a 10 ms heartbeat and a 100 ms election
// timeout the server's minimum lease TTL is ceil(1.5 × 100 ms) = 1 s (etcd's
// default configuration gives 2 s).
const (
	TickMs     = 10
	ElectionMs = 100
)

// startTimeout bounds how long a start or restart waits for the server to
// become ready.
const startTimeout = 30 * time.Second

// Server is an embedded etcd server. Its methods are safe for concurrent use.
type Server struct {
	dir     string // parent temp dir, removed by Close when owned
	ownsDir bool
	client  string // http://127.0.0.1:port
	peer    string

	// proc: the server runs in a child process (StartProcess); else in
	// this one.
	proc bool

	mu   sync.Mutex
	etcd *embed.Etcd // in-process server; nil while stopped
	cmd  *exec.Cmd   // child process; nil while stopped
	// stdin is the child's standard input: closing it stops the child,
	// and the child stops on its own if this process dies.
	stdin io.WriteCloser
}

// Start starts a server for tb and stops it (and removes its data) when tb
// finishes. It fails tb if the server cannot start.
func Start(tb testing.TB) *Server {
	tb.Helper()
	s, err := newServer(tb.TempDir(), false, false)
	if err != nil {
		tb.Fatalf("etcdtest: %v", err)
	}
	tb.Cleanup(s.Close)
	return s
}

// StartProcess is Start with the server in a child process (this test
// binary, run again), so that stopping it is a real process exit and none of
// the server's goroutines live in the test's process: use it for fault
// tests that check for goroutine leaks. The package's TestMain must call
// Main first. Stop ends the child gracefully, Kill abruptly.
func StartProcess(tb testing.TB) *Server {
	tb.Helper()
	s, err := newServer(tb.TempDir(), false, true)
	if err != nil {
		tb.Fatalf("etcdtest: %v", err)
	}
	tb.Cleanup(s.Close)
	return s
}

// New starts a server in a new temporary directory; Close stops it and
// removes the directory. Use it from TestMain, where there is no testing.TB.
func New() (*Server, error) {
	dir, err := os.MkdirTemp("", "etcdtest-")
	if err != nil {
		return nil, fmt.Errorf("etcdtest: temp dir: %w", err)
	}
	s, err := newServer(dir, true, false)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

func newServer(dir string, ownsDir, proc bool) (*Server, error) {
	var lastErr error
	// A port picked free can be taken by someone else before etcd binds
	// it; try a few fresh pairs.
	for range 3 {
		ports, err := freePorts(2)
		if err != nil {
			return nil, err
		}
		s := &Server{
			dir:     dir,
			ownsDir: ownsDir,
			proc:    proc,
			client:  fmt.Sprintf("http://127.0.0.1:%d", ports[0]),
			peer:    fmt.Sprintf("http://127.0.0.1:%d", ports[1]),
		}
		if lastErr = s.Restart(); lastErr == nil {
			return s, nil
		}
	}
	return nil, lastErr
}

// freePorts returns n distinct TCP ports that were free on 127.0.0.1.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("etcdtest: pick a free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// Endpoints returns the client URLs, the same across Stop and Restart.
func (s *Server) Endpoints() []string { return []string{s.client} }

// DataDir returns the server's data directory, kept across Stop and Restart.
func (s *Server) DataDir() string { return s.dir + "/data" }

// Client returns a client of the server with a short dial timeout and no
// logging; tb closes it at the end.
func (s *Server) Client(tb testing.TB) *clientv3.Client {
	tb.Helper()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   s.Endpoints(),
		DialTimeout: 2 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		tb.Fatalf("etcdtest: client: %v", err)
	}
	tb.Cleanup(func() { cli.Close() })
	return cli
}

// Running reports whether the server is started.
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.etcd != nil || s.cmd != nil
}

// Stop stops the server, keeping its ports and data for Restart. Clients see
// their calls fail until then. Stopping a stopped server does nothing.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		s.stopProcess(false)
		return
	}
	if s.etcd == nil {
		return
	}
	e := s.etcd
	s.etcd = nil
	e.Close()
	// Close waits for the server's goroutines; drain its error channel,
	// which Close closes.
	for range e.Err() {
	}
}

// Restart starts a stopped server again on the same ports and data
// directory; the keys and leases written before Stop are still there
// (leases are extended by the restart, as on a leader change). Restarting a
// running server does nothing.
func (s *Server) Restart() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.etcd != nil || s.cmd != nil {
		return nil
	}
	if s.proc {
		return s.startProcess()
	}
	e, err := startEmbedded(s.DataDir(), s.client, s.peer)
	if err != nil {
		return err
	}
	s.etcd = e
	return nil
}

// startEmbedded starts an embedded etcd and waits until it is ready.
func startEmbedded(dataDir, clientURL, peerURL string) (*embed.Etcd, error) {
	cfg := embed.NewConfig()
	cfg.Name = "etcdtest"
	cfg.Dir = dataDir
	cfg.TickMs = TickMs
	cfg.ElectionMs = ElectionMs
	cu, err := url.Parse(clientURL)
	if err != nil {
		return nil, err
	}
	pu, err := url.Parse(peerURL)
	if err != nil {
		return nil, err
	}
	cfg.ListenClientUrls = []url.URL{*cu}
	cfg.AdvertiseClientUrls = []url.URL{*cu}
	cfg.ListenPeerUrls = []url.URL{*pu}
	cfg.AdvertisePeerUrls = []url.URL{*pu}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.ListenMetricsUrls = nil
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	// Tests write little; keep the space quota small.
	cfg.QuotaBackendBytes = 256 << 20
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("etcdtest: start etcd on %s (data %s): %w", clientURL, cfg.Dir, err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("etcdtest: etcd on %s failed while starting: %w", clientURL, err)
	case <-time.After(startTimeout):
		e.Server.Stop()
		e.Close()
		return nil, fmt.Errorf("etcdtest: etcd on %s not ready after %v", clientURL, startTimeout)
	}
	// Ready means raft is up; the client handlers (and their goroutines)
	// start just after. Wait for a real answer, so that a goroutine
	// snapshot taken after Start sees the whole server.
	if err := roundTrip(clientURL); err != nil {
		e.Close()
		return nil, fmt.Errorf("etcdtest: etcd on %s does not answer: %w", clientURL, err)
	}
	return e, nil
}

// roundTrip reads a key from the server at clientURL.
func roundTrip(clientURL string) error {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{clientURL}, DialTimeout: startTimeout, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	_, err = cli.Get(ctx, "etcdtest/ready")
	return err
}

// Close stops the server and, when New created the directory, removes it.
func (s *Server) Close() {
	s.Stop()
	if s.ownsDir {
		if err := os.RemoveAll(s.dir); err != nil && !errors.Is(err, os.ErrNotExist) {
			fmt.Fprintf(os.Stderr, "etcdtest: remove %s: %v\n", s.dir, err)
		}
	}
}
