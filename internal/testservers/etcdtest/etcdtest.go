// Package etcdtest runs a real etcd server for tests: etcd v3.7 (the
// internal/testservers/etcdserver command, built from the etcd server module
// on first use) in a child process, on 127.0.0.1 with free ports and a
// temporary data directory, with a short heartbeat and election timeout so
// that one-second leases exist. Faults are real: Kill ends the process as a
// crash would, Pause stops it (SIGSTOP), Restart starts it again on the same
// ports and data. StartWith serves TLS with tlstest's certificates,
// optionally requiring client certificates.
//
// StartCluster runs several members, each behind a client fault proxy and
// a peer proxy, for faults a cluster has: a killed leader, a partitioned
// member.
//
// The package needs only the standard library (and conformance/faultproxy,
// which needs no more), so the modules whose tests use it (backends/etcd,
// cmd/kvbreaker, bench) never require the etcd server: it is built from
// its own module in this repository's workspace.
package etcdtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/internal/testservers/launcher"
	"github.com/kvbreaker/kvbreaker/internal/testservers/tlstest"
)

// Timing of the test server. With a 10 ms heartbeat and a 100 ms election
// timeout the server's minimum lease TTL is ceil(1.5 × 100 ms) = 1 s (etcd's
// default configuration gives 2 s).
const (
	TickMs     = 10
	ElectionMs = 100
)

// configEnv and readyLine are shared with internal/testservers/etcdserver.
const (
	configEnv = "KVBREAKER_ETCDTEST"
	readyLine = "etcdtest: ready"
)

// startTimeout bounds how long a start or restart waits for the server.
const startTimeout = 3 * time.Minute

// stopGrace bounds a graceful stop before the process is killed.
const stopGrace = 10 * time.Second

// Server is a running (or stopped) etcd test server. Its methods are safe
// for concurrent use.
type Server struct {
	// Server is the process's lifecycle: PID, Running, Stop (graceful,
	// keeping ports and data for Restart), Kill (as a crash), Pause and
	// Resume (SIGSTOP: a hung server).
	launcher.Server
	dir    string // temp dir holding data/, removed by Close
	client string // http://127.0.0.1:port, https:// with TLS
	peer   string
	opts   Options
}

// Options are a server's security settings.
type Options struct {
	// TLS, when set, makes the client port speak TLS only (https://) with
	// TLS's server certificate; with ClientCerts it requires a client
	// certificate TLS's authority signed (etcd's --client-cert-auth).
	TLS         *tlstest.PKI
	ClientCerts bool
}

// Start starts a server; Close stops it and removes its data.
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

// StartWith starts a server with o's TLS settings.
func StartWith(ctx context.Context, o Options) (*Server, error) {
	dir, err := os.MkdirTemp("", "etcdtest-")
	if err != nil {
		return nil, fmt.Errorf("etcdtest: temp dir: %w", err)
	}
	var lastErr error
	// A port picked free can be taken by someone else before etcd binds
	// it; try a few fresh pairs.
	for range 3 {
		ports, err := freePorts(2)
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		scheme := "http"
		if o.TLS != nil {
			scheme = "https"
		}
		s := &Server{
			Server: launcher.Server{Name: "etcdtest", Grace: stopGrace},
			dir:    dir,
			client: fmt.Sprintf("%s://127.0.0.1:%d", scheme, ports[0]),
			peer:   fmt.Sprintf("http://127.0.0.1:%d", ports[1]),
			opts:   o,
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

// Endpoints returns the client URLs, the same across Stop and Restart.
func (s *Server) Endpoints() []string { return []string{s.client} }

// DataDir returns the server's data directory, kept across Stop and Restart.
func (s *Server) DataDir() string { return filepath.Join(s.dir, "data") }

// Restart starts a stopped server on the same ports and data directory; the
// keys and leases written before are still there (leases are extended by the
// restart, as on a leader change). Restarting a running server does nothing.
func (s *Server) Restart(ctx context.Context) error {
	return s.Server.Restart(ctx, func(ctx context.Context) (*launcher.Process, error) {
		bin, err := binary(ctx)
		if err != nil {
			return nil, err
		}
		c := map[string]any{"DataDir": s.DataDir(), "Client": s.client, "Peer": s.peer, "TickMs": TickMs, "ElectionMs": ElectionMs}
		if p := s.opts.TLS; p != nil {
			c["TLS"] = map[string]any{"CertFile": p.ServerCertFile, "KeyFile": p.ServerKeyFile, "TrustedCAFile": p.CAFile,
				"ClientCertAuth": s.opts.ClientCerts, "ClientCertFile": p.ClientCertFile, "ClientKeyFile": p.ClientKeyFile}
		}
		cfg, err := json.Marshal(c)
		if err != nil {
			return nil, err
		}
		cmd := exec.Command(bin)
		cmd.Env = append(os.Environ(), configEnv+"="+string(cfg))
		p, _, err := launcher.Start(ctx, "etcd", cmd, func(line []byte) (string, bool) {
			return "", strings.TrimSpace(string(line)) == readyLine
		}, startTimeout)
		if err != nil {
			return nil, fmt.Errorf("etcdtest: start etcd on %s: %w", s.client, err)
		}
		return p, nil
	})
}

// Close stops the server and removes its data directory.
func (s *Server) Close() {
	_ = s.Resume()
	s.Stop()
	if err := os.RemoveAll(s.dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(os.Stderr, "etcdtest: remove %s: %v\n", s.dir, err)
	}
}

// binary builds internal/testservers/etcdserver once per process (launcher.BuildGo).
func binary(ctx context.Context) (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok || !filepath.IsAbs(file) {
		return "", errors.New("etcdtest: cannot locate the repository (built with -trimpath?)")
	}
	bin, err := launcher.BuildGo(ctx, "etcdserver", filepath.Join(filepath.Dir(file), "..", "etcdserver"))
	if err != nil {
		return "", fmt.Errorf("etcdtest: %w", err)
	}
	return bin, nil
}

// freePorts returns n distinct TCP ports that were free on 127.0.0.1.
func freePorts(n int) ([]int, error) {
	ports, err := launcher.FreePorts(n)
	if err != nil {
		return nil, fmt.Errorf("etcdtest: %w", err)
	}
	return ports, nil
}
