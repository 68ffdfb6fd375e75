// Package natstest runs real NATS servers with JetStream for tests:
// nats-server v2.15 (the internal/testservers/natsserver command, built from
// the nats-server module on first use) in child processes on 127.0.0.1
// with free ports and temporary storage: one server (Start) or a cluster of
// several (StartCluster). Faults are real: Kill ends a process as a crash
// would, Pause stops it (SIGSTOP), Restart starts it again on the same ports
// and storage.
//
// The package needs only the standard library, so the modules whose tests
// use it (backends/nats, cmd/kvbreaker, bench) never require the NATS
// server: it is built from its own module in this repository's workspace.
package natstest

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
	"sync"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/internal/testservers/launcher"
	"github.com/kvbreaker/kvbreaker/internal/testservers/tlstest"
)

// configEnv and readyLine are shared with internal/testservers/natsserver.
const (
	configEnv = "KVBREAKER_NATSTEST"
	readyLine = "natstest: ready"
)

// startTimeout bounds how long a start or restart waits for the server
// (a cluster member waits for its JetStream meta leader too).
const startTimeout = 3 * time.Minute

// stopGrace bounds a graceful stop before the process is killed.
const stopGrace = 10 * time.Second

// Server is a running (or stopped) NATS test server. Its methods are safe
// for concurrent use.
type Server struct {
	// Server is the process's lifecycle: PID, Running, Stop (graceful,
	// keeping ports and storage for Restart), Kill (as a crash), Pause and
	// Resume (SIGSTOP: a hung server).
	launcher.Server
	dir  string // temp dir holding the JetStream storage, removed by Close
	cfg  config
	port int
}

// config is what natsserver reads from configEnv.
type config struct {
	Name        string
	Port        int
	StoreDir    string
	Cluster     string   `json:",omitempty"`
	ClusterPort int      `json:",omitempty"`
	Routes      []string `json:",omitempty"`
	TLSCert     string   `json:",omitempty"`
	TLSKey      string   `json:",omitempty"`
	TLSCA       string   `json:",omitempty"`
	TLSVerify   bool     `json:",omitempty"`
	HTTPPort    int      `json:",omitempty"`
	Users       []User   `json:",omitempty"`
}

// User is a client account of a single server: its name, password and
// the subjects it may not publish to (every other subject it may).
type User struct {
	Name, Password string
	DenyPublish    []string `json:",omitempty"`
}

// Options are a single server's security settings.
type Options struct {
	// TLS, when set, makes the server speak TLS only, with TLS's server
	// certificate; URL is then tls://.
	TLS *tlstest.PKI
	// ClientCerts makes the server require a client certificate TLS's
	// authority signed.
	ClientCerts bool
	// Monitor serves the server's monitoring endpoints on 127.0.0.1
	// (MonitorURL): its own counts of the messages clients sent.
	Monitor bool
	// Users, when set, makes the server require one of them (user and
	// password in the client's URL or options).
	Users []User
}

// Start starts a single server; Close stops it and removes its storage.
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

// StartWith starts a single server with o's TLS settings.
func StartWith(ctx context.Context, o Options) (*Server, error) {
	c := config{Users: o.Users}
	if p := o.TLS; p != nil {
		c.TLSCert, c.TLSKey = p.ServerCertFile, p.ServerKeyFile
		if o.ClientCerts {
			c.TLSCA, c.TLSVerify = p.CAFile, true
		}
	} else if o.ClientCerts {
		return nil, errors.New("natstest: ClientCerts needs TLS")
	}
	var lastErr error
	// A port picked free can be taken by someone else before the server
	// binds it; try a few.
	for range 3 {
		ports, err := freePorts(2)
		if err != nil {
			return nil, err
		}
		if o.Monitor {
			c.HTTPPort = ports[1]
		}
		s, err := newServer("natstest", ports[0], c)
		if err != nil {
			return nil, err
		}
		if lastErr = s.Restart(ctx); lastErr == nil {
			return s, nil
		}
		s.Close()
	}
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

// StartCluster starts n servers routed to each other as one JetStream
// cluster, and returns once every member is ready (its JetStream current
// with the meta leader). Close each one, or call CloseAll.
func StartCluster(ctx context.Context, n int) ([]*Server, error) {
	if n < 1 {
		return nil, fmt.Errorf("natstest: a cluster of %d servers", n)
	}
	ports, err := freePorts(2 * n)
	if err != nil {
		return nil, err
	}
	routes := make([]string, n)
	for i := range n {
		routes[i] = fmt.Sprintf("nats://127.0.0.1:%d", ports[n+i])
	}
	servers := make([]*Server, n)
	for i := range n {
		s, err := newServer(fmt.Sprintf("natstest-%d", i+1), ports[i], config{Cluster: "natstest", ClusterPort: ports[n+i], Routes: routes})
		if err != nil {
			CloseAll(servers[:i])
			return nil, err
		}
		servers[i] = s
	}
	// The members elect a meta leader only once a quorum is up: start
	// them together.
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, s := range servers {
		wg.Go(func() { errs[i] = s.Restart(ctx) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		CloseAll(servers)
		return nil, err
	}
	return servers, nil
}

// MustStartCluster is StartCluster for tb, closing the servers when tb
// finishes.
func MustStartCluster(tb testing.TB, n int) []*Server {
	tb.Helper()
	servers, err := StartCluster(tb.Context(), n)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { CloseAll(servers) })
	return servers
}

// CloseAll closes every server (nil ones skipped).
func CloseAll(servers []*Server) {
	for _, s := range servers {
		if s != nil {
			s.Close()
		}
	}
}

// URLs returns the client URLs of servers, comma-separated as nats.Connect
// takes them.
func URLs(servers []*Server) string {
	urls := make([]string, len(servers))
	for i, s := range servers {
		urls[i] = s.URL()
	}
	return strings.Join(urls, ",")
}

func newServer(name string, port int, c config) (*Server, error) {
	dir, err := os.MkdirTemp("", "natstest-")
	if err != nil {
		return nil, fmt.Errorf("natstest: temp dir: %w", err)
	}
	c.Name, c.Port, c.StoreDir = name, port, filepath.Join(dir, "jetstream")
	return &Server{Server: launcher.Server{Name: name, Grace: stopGrace}, dir: dir, cfg: c, port: port}, nil
}

// URL returns the client URL, nats://127.0.0.1:port (tls:// with TLS), the
// same across Stop and Restart.
func (s *Server) URL() string {
	if s.cfg.TLSCert != "" {
		return fmt.Sprintf("tls://127.0.0.1:%d", s.port)
	}
	return fmt.Sprintf("nats://127.0.0.1:%d", s.port)
}

// MonitorURL returns the monitoring endpoints' URL, http://127.0.0.1:port
// (Options.Monitor), or "" without them.
func (s *Server) MonitorURL() string {
	if s.cfg.HTTPPort == 0 {
		return ""
	}
	return fmt.Sprintf("http://127.0.0.1:%d", s.cfg.HTTPPort)
}

// Addr returns the client address, 127.0.0.1:port.
func (s *Server) Addr() string { return fmt.Sprintf("127.0.0.1:%d", s.port) }

// StoreDir returns the server's JetStream storage, kept across Stop and
// Restart.
func (s *Server) StoreDir() string { return s.cfg.StoreDir }

// Restart starts a stopped server on the same ports and storage; the
// streams and messages written before are still there. Restarting a
// running server does nothing.
func (s *Server) Restart(ctx context.Context) error {
	return s.Server.Restart(ctx, func(ctx context.Context) (*launcher.Process, error) {
		bin, err := binary(ctx)
		if err != nil {
			return nil, err
		}
		cfg, err := json.Marshal(s.cfg)
		if err != nil {
			return nil, err
		}
		cmd := exec.Command(bin)
		cmd.Env = append(os.Environ(), configEnv+"="+string(cfg))
		p, _, err := launcher.Start(ctx, "nats-server", cmd, func(line []byte) (string, bool) {
			return "", strings.TrimSpace(string(line)) == readyLine
		}, startTimeout)
		if err != nil {
			return nil, fmt.Errorf("natstest: start nats-server %s on %s: %w", s.cfg.Name, s.URL(), err)
		}
		return p, nil
	})
}

// Close stops the server and removes its storage.
func (s *Server) Close() {
	_ = s.Resume()
	s.Stop()
	if err := os.RemoveAll(s.dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(os.Stderr, "natstest: remove %s: %v\n", s.dir, err)
	}
}

// binary builds internal/testservers/natsserver once per process (launcher.BuildGo).
func binary(ctx context.Context) (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok || !filepath.IsAbs(file) {
		return "", errors.New("natstest: cannot locate the repository (built with -trimpath?)")
	}
	bin, err := launcher.BuildGo(ctx, "natsserver", filepath.Join(filepath.Dir(file), "..", "natsserver"))
	if err != nil {
		return "", fmt.Errorf("natstest: %w", err)
	}
	return bin, nil
}

// freePorts returns n distinct TCP ports that were free on 127.0.0.1.
func freePorts(n int) ([]int, error) {
	ports, err := launcher.FreePorts(n)
	if err != nil {
		return nil, fmt.Errorf("natstest: %w", err)
	}
	return ports, nil
}
