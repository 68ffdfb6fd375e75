// Package redistest runs real Redis servers for tests: Debian's
// redis-server (7.x; Valkey's valkey-server takes the same flags) in a
// child process on 127.0.0.1 with a free port and a temporary directory,
// persistence off; a three-master Cluster made with redis-cli --cluster
// create, with or without a replica per master; and a primary with
// replicas watched by three Sentinels (StartReplicated). Faults are real:
// Kill ends the process as a crash would (SIGKILL), Pause stops it
// (SIGSTOP), Restart starts it again on the same port (empty: nothing is
// persisted), RestartAsReplica brings a failed primary back as a replica.
// StartWith adds TLS (tlstest's certificates) and ACL users. On Linux the
// server dies with the test binary
// (PR_SET_PDEATHSIG), so a crashed test leaves nothing behind.
//
// The package needs only the standard library.
package redistest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/internal/testservers/launcher"
	"github.com/kvbreaker/kvbreaker/internal/testservers/tlstest"
)

// Binaries, found on PATH (or in /usr/bin).
var (
	ServerBin = "redis-server"
	CLIBin    = "redis-cli"
)

const (
	startTimeout = 3 * time.Minute
	stopGrace    = 5 * time.Second
)

// Server is a running (or stopped) redis-server. Its methods are safe for
// concurrent use.
type Server struct {
	// Server is the process's lifecycle: PID, Running, Stderr (startup
	// failures; redis logs to stdout), Stop (SIGTERM, keeping the port for
	// Restart), Kill (as a crash), Pause and Resume (SIGSTOP: a hung
	// server).
	launcher.Server
	dir     string
	port    int
	cluster bool
	opts    Options

	// args are extra redis-server arguments for every (re)start: a
	// replica's --replicaof, a configuration the test chose.
	mu   sync.Mutex
	args []string
}

// Options are a standalone server's security settings.
type Options struct {
	// TLS, when set, makes the server speak TLS only, on its one port
	// (tls-port; port 0), with TLS's server certificate, and accept the
	// client certificates TLS's authority signed: required when
	// ClientCerts, optional otherwise.
	TLS         *tlstest.PKI
	ClientCerts bool
	// Users are ACL rules, one user each, as redis.conf's "user" lines
	// without the word: "app on >password ~app:* +@read". The default user
	// (no password, every command) stays for the test's own set-up.
	Users []string
}

// Start starts a standalone server; Close stops it and removes its
// directory.
func Start(ctx context.Context) (*Server, error) { return start(ctx, false, Options{}) }

// StartWith starts a standalone server with o's TLS and users.
func StartWith(ctx context.Context, o Options) (*Server, error) { return start(ctx, false, o) }

func start(ctx context.Context, cluster bool, o Options, args ...string) (*Server, error) {
	dir, err := os.MkdirTemp("", "redistest-")
	if err != nil {
		return nil, fmt.Errorf("redistest: temp dir: %w", err)
	}
	var lastErr error
	// A port picked free can be taken before redis binds it: try a few.
	for range 3 {
		port, err := freePort()
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		s := &Server{Server: launcher.Server{Name: "redistest", Grace: stopGrace}, dir: dir, port: port, cluster: cluster, opts: o, args: args}
		if lastErr = s.Restart(ctx); lastErr == nil {
			return s, nil
		}
	}
	os.RemoveAll(dir)
	return nil, lastErr
}

// MustStart starts a standalone server for tb and closes it when tb
// finishes; it fails tb if the server cannot start.
func MustStart(tb testing.TB) *Server {
	tb.Helper()
	s, err := Start(tb.Context())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Close)
	return s
}

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

// Addr returns host:port, the same across Stop and Restart.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// URL returns redis://host:port/0, or rediss://… when the server speaks
// TLS.
func (s *Server) URL() string {
	if s.opts.TLS != nil {
		return "rediss://" + s.Addr() + "/0"
	}
	return "redis://" + s.Addr() + "/0"
}

// Restart starts a stopped server on the same port, empty. Restarting a
// running server does nothing.
func (s *Server) Restart(ctx context.Context) error {
	return s.Server.Restart(ctx, func(ctx context.Context) (*launcher.Process, error) {
		args := []string{"--port", strconv.Itoa(s.port)}
		if p := s.opts.TLS; p != nil {
			auth := "optional"
			if s.opts.ClientCerts {
				auth = "yes"
			}
			args = []string{"--port", "0", "--tls-port", strconv.Itoa(s.port),
				"--tls-cert-file", p.ServerCertFile, "--tls-key-file", p.ServerKeyFile,
				"--tls-ca-cert-file", p.CAFile, "--tls-auth-clients", auth}
			if s.cluster {
				// The bus speaks TLS too; a node dials its peers with the
				// client certificate, which a peer that requires one takes
				// (the server's is for server authentication only).
				args = append(args, "--tls-cluster", "yes",
					"--tls-client-cert-file", p.ClientCertFile, "--tls-client-key-file", p.ClientKeyFile)
			}
		}
		for _, u := range s.opts.Users {
			// redis-server joins the words after --user into one line.
			args = append(append(args, "--user"), strings.Fields(u)...)
		}
		args = append(args, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
			"--dir", s.dir, "--daemonize", "no", "--logfile", "", "--protected-mode", "yes")
		if s.cluster {
			// A restarted node forgets its cluster: nodes.conf is removed so it
			// starts as a fresh, empty node.
			_ = os.Remove(filepath.Join(s.dir, "nodes.conf"))
			args = append(args, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000")
		}
		s.mu.Lock()
		args = append(args, s.args...)
		s.mu.Unlock()
		cmd := exec.Command(binPath(ServerBin), args...)
		dieWithParent(cmd)
		p, _, err := launcher.Start(ctx, "redis", cmd, func(line []byte) (string, bool) {
			return "", bytes.Contains(line, []byte("Ready to accept connections"))
		}, startTimeout)
		if err != nil {
			return nil, fmt.Errorf("redistest: start redis-server on %s: %w", s.Addr(), err)
		}
		return p, nil
	})
}

// Close stops the server and removes its directory.
func (s *Server) Close() {
	s.Stop()
	if err := os.RemoveAll(s.dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(os.Stderr, "redistest: remove %s: %v\n", s.dir, err)
	}
}

// Cluster is a Redis Cluster: masters, and replicas of them when started
// with StartClusterWithReplicas.
type Cluster struct {
	Nodes []*Server
}

// StartCluster starts n cluster-enabled servers (at least 3), joins them
// with redis-cli --cluster create (slots spread evenly, no replicas) and
// waits until every node reports cluster_state:ok.
func StartCluster(ctx context.Context, n int) (*Cluster, error) {
	return startCluster(ctx, n, 0, Options{})
}

// StartClusterWith is StartCluster with o's TLS and users on every node;
// with TLS the cluster bus speaks TLS too.
func StartClusterWith(ctx context.Context, n int, o Options) (*Cluster, error) {
	return startCluster(ctx, n, 0, o)
}

// MustStartClusterWith is StartClusterWith for tb, closed when tb
// finishes.
func MustStartClusterWith(tb testing.TB, n int, o Options) *Cluster {
	tb.Helper()
	c, err := StartClusterWith(tb.Context(), n, o)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(c.Close)
	return c
}

// StartClusterWithReplicas starts masters cluster-enabled servers (at
// least 3) and replicas of each, joins them with redis-cli --cluster create
// --cluster-replicas (which picks each replica's master), and waits until
// every node reports cluster_state:ok and every replica's link to its
// master is up. A replica takes over its master's slots when the master
// fails (after the node timeout, 2 s) or on CLUSTER FAILOVER.
func StartClusterWithReplicas(ctx context.Context, masters, replicas int) (*Cluster, error) {
	if replicas < 1 {
		return nil, fmt.Errorf("redistest: %d replicas per master; use StartCluster for none", replicas)
	}
	return startCluster(ctx, masters, replicas, Options{})
}

// MustStartClusterWithReplicas is StartClusterWithReplicas for tb, closed
// when tb finishes.
func MustStartClusterWithReplicas(tb testing.TB, masters, replicas int) *Cluster {
	tb.Helper()
	c, err := StartClusterWithReplicas(tb.Context(), masters, replicas)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(c.Close)
	return c
}

func startCluster(ctx context.Context, masters, replicas int, o Options) (*Cluster, error) {
	if masters < 3 {
		return nil, fmt.Errorf("redistest: a cluster needs at least 3 masters, not %d", masters)
	}
	c := &Cluster{}
	for range masters * (1 + replicas) {
		s, err := start(ctx, true, o)
		if err != nil {
			c.Close()
			return nil, err
		}
		c.Nodes = append(c.Nodes, s)
	}
	args := append(cliTLS(o), "--cluster", "create")
	args = append(args, c.Addrs()...)
	args = append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	if out, err := exec.CommandContext(ctx, binPath(CLIBin), args...).CombinedOutput(); err != nil {
		c.Close()
		return nil, fmt.Errorf("redistest: redis-cli %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	for _, s := range c.Nodes {
		if err := waitClusterOK(ctx, s.Addr(), cliTLS(o)); err != nil {
			c.Close()
			return nil, err
		}
	}
	if replicas > 0 {
		if err := c.WaitReplicasUp(ctx, masters*replicas); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

// WaitReplicasUp waits until n running nodes are replicas whose link to
// their master is up, and every running node reports cluster_state:ok.
func (c *Cluster) WaitReplicasUp(ctx context.Context, n int) error {
	var last string
	err := poll(ctx, 30*time.Second, func() bool {
		up := 0
		for _, s := range c.Nodes {
			if !s.Running() {
				continue
			}
			out, _ := cli(ctx, s.Addr(), "cluster", "info")
			if !strings.Contains(out, "cluster_state:ok") {
				last = s.Addr() + ": " + out
				return false
			}
			info, _ := cli(ctx, s.Addr(), "info", "replication")
			if infoField(info, "role") == "slave" && infoField(info, "master_link_status") == "up" {
				up++
			}
		}
		last = fmt.Sprintf("%d replicas up", up)
		return up == n
	})
	if err != nil {
		return fmt.Errorf("redistest: cluster replicas: %s, want %d: %w", last, n, err)
	}
	return nil
}

// Node returns the node at addr, or nil.
func (c *Cluster) Node(addr string) *Server {
	for _, s := range c.Nodes {
		if s.Addr() == addr {
			return s
		}
	}
	return nil
}

// MustStartCluster is StartCluster for tb, closed when tb finishes.
func MustStartCluster(tb testing.TB, n int) *Cluster {
	tb.Helper()
	c, err := StartCluster(tb.Context(), n)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(c.Close)
	return c
}

// Addrs returns the nodes' host:port.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.Nodes))
	for i, s := range c.Nodes {
		addrs[i] = s.Addr()
	}
	return addrs
}

// Close stops every node and removes their directories.
func (c *Cluster) Close() {
	for _, s := range c.Nodes {
		s.Close()
	}
}

// cliTLS are redis-cli's flags for a server with o's TLS: the authority
// and the client certificate.
func cliTLS(o Options) []string {
	p := o.TLS
	if p == nil {
		return nil
	}
	return []string{"--tls", "--cacert", p.CAFile, "--cert", p.ClientCertFile, "--key", p.ClientKeyFile}
}

// waitClusterOK polls CLUSTER INFO on addr (with redis-cli, given tlsArgs)
// until the node says cluster_state:ok.
func waitClusterOK(ctx context.Context, addr string, tlsArgs []string) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	host, port, _ := net.SplitHostPort(addr)
	var last []byte
	for {
		out, _ := exec.CommandContext(ctx, binPath(CLIBin), append(tlsArgs, "-h", host, "-p", port, "cluster", "info")...).Output()
		if bytes.Contains(out, []byte("cluster_state:ok")) {
			return nil
		}
		last = out
		select {
		case <-ctx.Done():
			return fmt.Errorf("redistest: cluster node %s not ok after %v: %s", addr, startTimeout, last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// binPath finds name on PATH, else in /usr/bin (where Debian installs it).
func binPath(name string) string {
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	return filepath.Join("/usr/bin", name)
}

// freePort returns a TCP port that was free on 127.0.0.1. Redis Cluster
// also binds port+10000 for its bus; the retry in start covers a clash.
func freePort() (int, error) {
	for range 20 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("redistest: pick a free port: %w", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if port+10000 <= 65535 {
			return port, nil
		}
	}
	return 0, errors.New("redistest: no free port below 55536 (the cluster bus needs port+10000)")
}
