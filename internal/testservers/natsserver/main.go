// Command natsserver is the NATS server of kvbreaker's tests, built from the
// nats-server module (github.com/nats-io/nats-server/v2), so the tests need
// no installed nats-server and the modules users import never require the
// server.
//
// Run by internal/testservers/natstest (KVBREAKER_NATSTEST set to a JSON
// config), it serves JetStream on 127.0.0.1 (one server, or one member of a
// cluster whose routes the config names), prints a ready line once it
// accepts clients (and, in a cluster, once JetStream has a meta leader), and
// exits when its stdin closes: a test binary that dies leaves nothing
// behind.
//
// Otherwise it is nats-server's own command line (flags, a config file).
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// configEnv carries the test server's configuration; readyLine is what it
// prints once it answers. Both are shared with internal/testservers/natstest.
const (
	configEnv = "KVBREAKER_NATSTEST"
	readyLine = "natstest: ready"
)

type config struct {
	Name     string
	Port     int
	StoreDir string
	// Cluster is empty for a single server; otherwise its name, this
	// member's route port and every member's route URL.
	Cluster     string
	ClusterPort int
	Routes      []string
	// TLSCert and TLSKey, when set, make clients speak TLS with this
	// certificate; TLSCA is the authority whose client certificates
	// TLSVerify requires.
	TLSCert, TLSKey, TLSCA string
	TLSVerify              bool
	// HTTPPort, when set, serves the server's monitoring endpoints
	// (/varz, /jsz) on 127.0.0.1: its own counts of what clients sent.
	HTTPPort int
	// Users, when set, are the only clients the server accepts, each
	// denied publishing to its DenyPublish subjects.
	Users []struct {
		Name, Password string
		DenyPublish    []string
	}
}

func main() {
	raw := os.Getenv(configEnv)
	if raw == "" {
		runCommand()
		return
	}
	var c config
	if err := json.Unmarshal([]byte(raw), &c); err != nil {
		fmt.Fprintf(os.Stderr, "natsserver: bad %s: %v\n", configEnv, err)
		os.Exit(2)
	}
	s, err := start(c)
	if err != nil {
		fmt.Fprintf(os.Stderr, "natsserver: %v\n", err)
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
	}
	s.Shutdown()
	s.WaitForShutdown()
}

const startTimeout = 2 * time.Minute

func start(c config) (*server.Server, error) {
	opts := &server.Options{
		ServerName: c.Name,
		Host:       "127.0.0.1",
		Port:       c.Port,
		JetStream:  true,
		StoreDir:   c.StoreDir,
		NoSigs:     true,
		// Tests write little; keep JetStream's reservations small.
		JetStreamMaxMemory: 256 << 20,
		JetStreamMaxStore:  1 << 30,
	}
	for _, u := range c.Users {
		user := &server.User{Username: u.Name, Password: u.Password}
		if len(u.DenyPublish) > 0 {
			user.Permissions = &server.Permissions{Publish: &server.SubjectPermission{Deny: u.DenyPublish}}
		}
		opts.Users = append(opts.Users, user)
	}
	if c.HTTPPort != 0 {
		opts.HTTPHost, opts.HTTPPort = "127.0.0.1", c.HTTPPort
	}
	if c.TLSCert != "" {
		tc, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: c.TLSCert, KeyFile: c.TLSKey, CaFile: c.TLSCA, Verify: c.TLSVerify})
		if err != nil {
			return nil, fmt.Errorf("nats-server on port %d: TLS: %w", c.Port, err)
		}
		opts.TLS, opts.TLSConfig, opts.TLSVerify = true, tc, c.TLSVerify
	}
	if c.Cluster != "" {
		opts.Cluster = server.ClusterOpts{Name: c.Cluster, Host: "127.0.0.1", Port: c.ClusterPort}
		for _, r := range c.Routes {
			u, err := url.Parse(r)
			if err != nil {
				return nil, err
			}
			opts.Routes = append(opts.Routes, u)
		}
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("configure nats-server on port %d: %w", c.Port, err)
	}
	go s.Start()
	if !s.ReadyForConnections(startTimeout) {
		s.Shutdown()
		return nil, fmt.Errorf("nats-server on port %d not ready after %v", c.Port, startTimeout)
	}
	if c.Cluster == "" {
		return s, nil
	}
	// A member answers clients before the cluster has elected its
	// JetStream meta leader; wait for that, so the first request of a
	// test does not meet "JetStream system temporarily unavailable".
	deadline := time.Now().Add(startTimeout)
	for !s.JetStreamIsCurrent() {
		if time.Now().After(deadline) {
			s.Shutdown()
			return nil, fmt.Errorf("nats-server %s: no JetStream meta leader after %v", c.Name, startTimeout)
		}
		time.Sleep(50 * time.Millisecond) // polling the server's own state while it elects
	}
	return s, nil
}

// runCommand is nats-server's own main.
func runCommand() {
	fs := flagSet()
	opts, err := server.ConfigureOptions(fs, os.Args[1:], server.PrintServerAndExit, fs.Usage, server.PrintTLSHelpAndDie)
	if err != nil {
		server.PrintAndDie(fmt.Sprintf("%s: %s", os.Args[0], err))
	}
	s, err := server.NewServer(opts)
	if err != nil {
		server.PrintAndDie(fmt.Sprintf("%s: %s", os.Args[0], err))
	}
	s.ConfigureLogger()
	if err := server.Run(s); err != nil {
		server.PrintAndDie(err.Error())
	}
	s.WaitForShutdown()
}
