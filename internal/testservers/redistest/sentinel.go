package redistest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/internal/testservers/launcher"
)

// SentinelBin is Debian's redis-sentinel (package redis-sentinel, a link to
// the redis-server binary); without it the Sentinels run as
// "redis-server <conf> --sentinel", which is the same program.
var SentinelBin = "redis-sentinel"

// MasterName is the name the Sentinels monitor the primary under.
const MasterName = "kvbreaker"

// ReplicatedOptions configures StartReplicated. Zero fields take the
// defaults given.
type ReplicatedOptions struct {
	// Replicas is the number of replicas of the primary (default 1).
	Replicas int
	// Sentinels is the number of Sentinels (default 3; the quorum is a
	// majority of them).
	Sentinels int
	// DownAfter is the Sentinels' down-after-milliseconds: how long the
	// primary must not answer before a failover starts (default 1 s).
	DownAfter time.Duration
	// ServerArgs are extra redis-server arguments for every server, such
	// as "--min-replicas-to-write", "1".
	ServerArgs []string
}

// Replicated is a primary with replicas, watched by Sentinels that fail
// over to a replica when the primary stops answering. Replication is
// Redis's own: asynchronous.
type Replicated struct {
	// Servers are the data servers; Servers[0] started as the primary.
	Servers []*Server
	// Sentinels watch them under MasterName.
	Sentinels []*Sentinel
}

// Sentinel is a running (or stopped) Redis Sentinel; it keeps its
// configuration file (which it rewrites with what it learns) across
// Restart.
type Sentinel struct {
	launcher.Server
	dir  string
	port int
}

// Addr returns the Sentinel's host:port.
func (s *Sentinel) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// StartReplicated starts the primary, its replicas (each with --replicaof
// the primary), waits until every replica is in sync, then starts the
// Sentinels and waits until each knows every replica and every other
// Sentinel, so a failover can start at once.
func StartReplicated(ctx context.Context, o ReplicatedOptions) (*Replicated, error) {
	if o.Replicas == 0 {
		o.Replicas = 1
	}
	if o.Sentinels == 0 {
		o.Sentinels = 3
	}
	if o.DownAfter == 0 {
		o.DownAfter = time.Second
	}
	r := &Replicated{}
	primary, err := start(ctx, false, Options{}, o.ServerArgs...)
	if err != nil {
		return nil, err
	}
	r.Servers = append(r.Servers, primary)
	for range o.Replicas {
		args := append(slices.Clone(o.ServerArgs), "--replicaof", "127.0.0.1", strconv.Itoa(primary.port))
		s, err := start(ctx, false, Options{}, args...)
		if err != nil {
			r.Close()
			return nil, err
		}
		r.Servers = append(r.Servers, s)
	}
	if err := r.WaitSynced(ctx, primary); err != nil {
		r.Close()
		return nil, err
	}
	for range o.Sentinels {
		s, err := startSentinel(ctx, primary.port, o.Sentinels/2+1, o.DownAfter)
		if err != nil {
			r.Close()
			return nil, err
		}
		r.Sentinels = append(r.Sentinels, s)
	}
	if err := r.waitSentinelsKnow(ctx, o.Replicas, o.Sentinels-1); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// MustStartReplicated is StartReplicated for tb, closed when tb finishes.
func MustStartReplicated(tb testing.TB, o ReplicatedOptions) *Replicated {
	tb.Helper()
	r, err := StartReplicated(tb.Context(), o)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(r.Close)
	return r
}

// SentinelAddrs returns the Sentinels' host:port, for
// redis.FailoverOptions.SentinelAddrs.
func (r *Replicated) SentinelAddrs() []string {
	addrs := make([]string, len(r.Sentinels))
	for i, s := range r.Sentinels {
		addrs[i] = s.Addr()
	}
	return addrs
}

// Server returns the data server at addr, or nil.
func (r *Replicated) Server(addr string) *Server {
	for _, s := range r.Servers {
		if s.Addr() == addr {
			return s
		}
	}
	return nil
}

// Primary returns the server every running Sentinel names as the
// primary, waiting until they agree and it says role:master.
func (r *Replicated) Primary(ctx context.Context) (*Server, error) {
	return r.waitPrimary(ctx, "")
}

// WaitFailover waits until every running Sentinel names a primary other
// than from (host:port) and that server says role:master, and returns it.
func (r *Replicated) WaitFailover(ctx context.Context, from string) (*Server, error) {
	return r.waitPrimary(ctx, from)
}

func (r *Replicated) waitPrimary(ctx context.Context, not string) (*Server, error) {
	var last string
	err := poll(ctx, 30*time.Second, func() bool {
		addr := ""
		for _, s := range r.Sentinels {
			if !s.Running() {
				continue
			}
			out, err := cli(ctx, s.Addr(), "sentinel", "get-master-addr-by-name", MasterName)
			f := strings.Fields(out)
			if err != nil || len(f) != 2 {
				last = fmt.Sprintf("sentinel %s: %q %v", s.Addr(), out, err)
				return false
			}
			a := net.JoinHostPort(f[0], f[1])
			if addr != "" && a != addr {
				last = fmt.Sprintf("sentinels disagree: %s and %s", addr, a)
				return false
			}
			addr = a
		}
		if addr == "" || addr == not {
			last = "sentinels name " + addr
			return false
		}
		info, _ := cli(ctx, addr, "info", "replication")
		if !strings.Contains(info, "role:master") {
			last = addr + " is not yet a master"
			return false
		}
		last = addr
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("redistest: no primary other than %q: %s: %w", not, last, err)
	}
	s := r.Server(last)
	if s == nil {
		return nil, fmt.Errorf("redistest: sentinels name %s, which is none of the servers", last)
	}
	return s, nil
}

// WaitSynced waits until every running server other than primary is its
// replica with master_link_status:up, and primary counts them all as
// connected replicas.
func (r *Replicated) WaitSynced(ctx context.Context, primary *Server) error {
	var last string
	err := poll(ctx, 30*time.Second, func() bool {
		want := 0
		for _, s := range r.Servers {
			if s == primary || !s.Running() {
				continue
			}
			want++
			info, _ := cli(ctx, s.Addr(), "info", "replication")
			if !strings.Contains(info, "master_port:"+strconv.Itoa(primary.port)) || !strings.Contains(info, "master_link_status:up") {
				last = s.Addr() + ": " + info
				return false
			}
		}
		info, _ := cli(ctx, primary.Addr(), "info", "replication")
		if !strings.Contains(info, "role:master") || !strings.Contains(info, "connected_slaves:"+strconv.Itoa(want)) {
			last = primary.Addr() + ": " + info
			return false
		}
		return true
	})
	if err != nil {
		return fmt.Errorf("redistest: replicas of %s not in sync: %s: %w", primary.Addr(), last, err)
	}
	return nil
}

// RestartAsReplica starts a stopped server again, empty, as a replica of
// primary (host:port), as an operator brings back a failed primary once
// another has taken over. It does not wait for the sync (WaitSynced).
func (s *Server) RestartAsReplica(ctx context.Context, primary string) error {
	host, port, err := net.SplitHostPort(primary)
	if err != nil {
		return fmt.Errorf("redistest: primary %q: %w", primary, err)
	}
	s.mu.Lock()
	args := slices.Clone(s.args)
	if i := slices.Index(args, "--replicaof"); i >= 0 && i+3 <= len(args) {
		args = slices.Delete(args, i, i+3)
	}
	s.args = append(args, "--replicaof", host, port)
	s.mu.Unlock()
	return s.Restart(ctx)
}

// Info returns the server's INFO section (redis-cli's output).
func (s *Server) Info(ctx context.Context, section string) (string, error) {
	return cli(ctx, s.Addr(), "info", section)
}

// Close stops the Sentinels first (so none fails over while the servers
// stop), then the servers, and removes their directories.
func (r *Replicated) Close() {
	for _, s := range r.Sentinels {
		s.Close()
	}
	for _, s := range r.Servers {
		s.Close()
	}
}

// waitSentinelsKnow waits until every Sentinel reports the primary with
// replicas replicas and others other Sentinels.
func (r *Replicated) waitSentinelsKnow(ctx context.Context, replicas, others int) error {
	var last string
	err := poll(ctx, 30*time.Second, func() bool {
		for _, s := range r.Sentinels {
			out, err := cli(ctx, s.Addr(), "sentinel", "master", MasterName)
			if err != nil {
				last = err.Error()
				return false
			}
			f := strings.Fields(out)
			kv := map[string]string{}
			for i := 0; i+1 < len(f); i += 2 {
				kv[f[i]] = f[i+1]
			}
			if kv["num-slaves"] != strconv.Itoa(replicas) || kv["num-other-sentinels"] != strconv.Itoa(others) || kv["flags"] != "master" {
				last = fmt.Sprintf("sentinel %s: flags %s, %s replicas, %s other sentinels", s.Addr(), kv["flags"], kv["num-slaves"], kv["num-other-sentinels"])
				return false
			}
		}
		return true
	})
	if err != nil {
		return fmt.Errorf("redistest: sentinels not ready: %s: %w", last, err)
	}
	return nil
}

func startSentinel(ctx context.Context, primaryPort, quorum int, downAfter time.Duration) (*Sentinel, error) {
	dir, err := os.MkdirTemp("", "redistest-sentinel-")
	if err != nil {
		return nil, fmt.Errorf("redistest: temp dir: %w", err)
	}
	var lastErr error
	for range 3 {
		port, err := freePort()
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		// failover-timeout bounds a failover in progress and how soon
		// another may start: a few times down-after, so a test's second
		// fault is not refused for the default three minutes.
		conf := fmt.Sprintf("port %d\nbind 127.0.0.1\ndaemonize no\nlogfile \"\"\ndir %s\nprotected-mode no\n"+
			"sentinel monitor %s 127.0.0.1 %d %d\n"+
			"sentinel down-after-milliseconds %s %d\n"+
			"sentinel failover-timeout %s %d\n"+
			"sentinel parallel-syncs %s 1\n",
			port, dir, MasterName, primaryPort, quorum,
			MasterName, downAfter.Milliseconds(), MasterName, (4 * downAfter).Milliseconds(), MasterName)
		if err := os.WriteFile(filepath.Join(dir, "sentinel.conf"), []byte(conf), 0o600); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("redistest: %w", err)
		}
		s := &Sentinel{Server: launcher.Server{Name: "redistest sentinel", Grace: stopGrace}, dir: dir, port: port}
		if lastErr = s.Restart(ctx); lastErr == nil {
			return s, nil
		}
	}
	os.RemoveAll(dir)
	return nil, lastErr
}

// Restart starts a stopped Sentinel with its configuration file as it
// left it (what it learnt of the servers and the other Sentinels).
func (s *Sentinel) Restart(ctx context.Context) error {
	return s.Server.Restart(ctx, func(ctx context.Context) (*launcher.Process, error) {
		conf := filepath.Join(s.dir, "sentinel.conf")
		var cmd *exec.Cmd
		if p, err := exec.LookPath(SentinelBin); err == nil {
			cmd = exec.Command(p, conf)
		} else if _, err := os.Stat(filepath.Join("/usr/bin", SentinelBin)); err == nil {
			cmd = exec.Command(filepath.Join("/usr/bin", SentinelBin), conf)
		} else {
			cmd = exec.Command(binPath(ServerBin), conf, "--sentinel")
		}
		dieWithParent(cmd)
		p, _, err := launcher.Start(ctx, "redis-sentinel", cmd, func(line []byte) (string, bool) {
			return "", bytes.Contains(line, []byte("+monitor master"))
		}, startTimeout)
		if err != nil {
			return nil, fmt.Errorf("redistest: start sentinel on %s: %w", s.Addr(), err)
		}
		return p, nil
	})
}

// Close stops the Sentinel and removes its directory.
func (s *Sentinel) Close() {
	s.Stop()
	if err := os.RemoveAll(s.dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(os.Stderr, "redistest: remove %s: %v\n", s.dir, err)
	}
}

// cli runs redis-cli against addr and returns its output.
func cli(ctx context.Context, addr string, args ...string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", err
	}
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	out, err := exec.CommandContext(cctx, binPath(CLIBin), append([]string{"-h", host, "-p", port}, args...)...).Output()
	return strings.TrimSpace(string(out)), err
}

// infoField returns field's value in an INFO answer.
func infoField(info, field string) string {
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), field+":"); ok {
			return v
		}
	}
	return ""
}

// poll calls ok every 50 ms until it is true, ctx ends or limit passes.
// It waits on servers, not on logic of ours.
func poll(ctx context.Context, limit time.Duration, ok func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	for {
		if ok() {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
