// Command etcdserver is the etcd server of kvbreaker's tests, built from the
// etcd server module (go.etcd.io/etcd/server/v3), so the tests need no
// installed etcd and the modules users import never require the server.
//
// Run by internal/testservers/etcdtest (KVBREAKER_ETCDTEST set to a JSON
// config), it serves a single member on 127.0.0.1 with test timing (10 ms
// heartbeat, 100 ms election timeout, so 1 s leases exist), prints a ready
// line, and exits when its stdin closes: a test binary that dies leaves
// nothing behind.
//
// Otherwise it is etcd's own command, flags and ETCD_* variables unchanged,
// for the container image (scripts/containers.sh):
//
//	CGO_ENABLED=0 go build -trimpath -o etcd ./internal/testservers/etcdserver
package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/etcdmain"
	"go.uber.org/zap"
)

// configEnv carries the test server's configuration; readyLine is what it
// prints once it answers. Both are shared with internal/testservers/etcdtest.
const (
	configEnv = "KVBREAKER_ETCDTEST"
	readyLine = "etcdtest: ready"
)

type config struct {
	DataDir, Client, Peer string
	TickMs, ElectionMs    uint
	// A member of a cluster (etcdtest.StartCluster): its name, the initial
	// cluster ("name=peerURL,…"), and the peer URL the others reach it at
	// (a proxy in front of Peer). Empty: a single member named etcdtest.
	Name, InitialCluster, AdvertisePeer string
	TLS                                 *tlsFiles // nil: plain text
}

// tlsFiles are the client listener's certificate and key, the authority
// whose client certificates it accepts (required with ClientCertAuth), and
// the client certificate the readiness check presents.
type tlsFiles struct {
	CertFile, KeyFile, TrustedCAFile string
	ClientCertAuth                   bool
	ClientCertFile, ClientKeyFile    string
}

func main() {
	raw := os.Getenv(configEnv)
	if raw == "" {
		etcdmain.Main(os.Args)
		return
	}
	var c config
	if err := json.Unmarshal([]byte(raw), &c); err != nil {
		fmt.Fprintf(os.Stderr, "etcdserver: bad %s: %v\n", configEnv, err)
		os.Exit(2)
	}
	e, err := start(c)
	if err != nil {
		fmt.Fprintf(os.Stderr, "etcdserver: %v\n", err)
		os.Exit(1)
	}
	fmt.Println(readyLine)
	done := make(chan struct{})
	go func() {
		io.Copy(io.Discard, os.Stdin)
		close(done)
	}()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	select {
	case <-done:
	case <-sig:
	case err := <-e.Err():
		fmt.Fprintf(os.Stderr, "etcdserver: %v\n", err)
	}
	e.Close()
}

const startTimeout = 2 * time.Minute

// start starts an embedded etcd and waits until it answers a read.
func start(c config) (*embed.Etcd, error) {
	cfg := embed.NewConfig()
	cfg.Name = "etcdtest"
	cfg.Dir = c.DataDir
	cfg.TickMs = c.TickMs
	cfg.ElectionMs = c.ElectionMs
	cu, err := url.Parse(c.Client)
	if err != nil {
		return nil, err
	}
	pu, err := url.Parse(c.Peer)
	if err != nil {
		return nil, err
	}
	cfg.ListenClientUrls = []url.URL{*cu}
	cfg.AdvertiseClientUrls = []url.URL{*cu}
	cfg.ListenPeerUrls = []url.URL{*pu}
	cfg.AdvertisePeerUrls = []url.URL{*pu}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	if c.Name != "" {
		au, err := url.Parse(c.AdvertisePeer)
		if err != nil {
			return nil, err
		}
		cfg.Name = c.Name
		cfg.AdvertisePeerUrls = []url.URL{*au}
		cfg.InitialCluster = c.InitialCluster
		cfg.InitialClusterToken = "etcdtest-cluster"
	}
	cfg.ListenMetricsUrls = nil
	var clientTLS *tls.Config
	if t := c.TLS; t != nil {
		cfg.ClientTLSInfo = transport.TLSInfo{CertFile: t.CertFile, KeyFile: t.KeyFile, TrustedCAFile: t.TrustedCAFile, ClientCertAuth: t.ClientCertAuth}
		ti := transport.TLSInfo{CertFile: t.ClientCertFile, KeyFile: t.ClientKeyFile, TrustedCAFile: t.TrustedCAFile}
		if clientTLS, err = ti.ClientConfig(); err != nil {
			return nil, fmt.Errorf("readiness check's TLS: %w", err)
		}
	}
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	// Tests write little; keep the space quota small.
	cfg.QuotaBackendBytes = 256 << 20
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("start etcd on %s (data %s): %w", c.Client, cfg.Dir, err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("etcd on %s failed while starting: %w", c.Client, err)
	case <-time.After(startTimeout):
		e.Server.Stop()
		e.Close()
		return nil, fmt.Errorf("etcd on %s not ready after %v", c.Client, startTimeout)
	}
	// Ready means raft is up; the client handlers start just after. Wait
	// for a real answer.
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{c.Client}, TLS: clientTLS, DialTimeout: startTimeout, Logger: zap.NewNop()})
	if err != nil {
		e.Close()
		return nil, err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if _, err := cli.Get(ctx, "etcdtest/ready"); err != nil {
		e.Close()
		return nil, fmt.Errorf("etcd on %s does not answer: %w", c.Client, err)
	}
	return e, nil
}
