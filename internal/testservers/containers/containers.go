// Package containers runs kvbreaker's real-server backends in Docker
// containers with testcontainers-go (its modules/etcd and modules/dynamodb),
// for CI that has Docker: the container mode of the integration tests.
//
// The package's tests run the conformance suite and a Breaker end to end
// against an etcd container and a DynamoDB-compatible container when
// KVBREAKER_CONTAINERS=1; otherwise they skip and say why. The in-process and
// npm-started servers of the backend packages are the default matrix; this
// mode checks the same adapters against the images users deploy.
//
// Environment (read by ConfigFromEnv):
//
//	KVBREAKER_CONTAINERS=1          run the container tests (default: skip them)
//	KVBREAKER_ETCD_IMAGE            etcd image (default DefaultEtcdImage)
//	KVBREAKER_DYNAMODB_IMAGE        DynamoDB image (default DefaultDynamoDBImage)
//	KVBREAKER_DYNAMODB_SERVER       dynamodb-local or dynalite: the image's command
//	                                line (default: dynalite when the image name
//	                                contains "dynalite", else dynamodb-local)
//	KVBREAKER_CONTAINERS_NETWORK    bridge (default: published ports, as the
//	                                modules do) or host (the container shares the
//	                                host's network and listens on 127.0.0.1 at a
//	                                free port; for daemons without a bridge)
//
// testcontainers' own variables apply too (DOCKER_HOST,
// TESTCONTAINERS_RYUK_DISABLED, TESTCONTAINERS_HOST_OVERRIDE); see
// DEVELOPERS.md and scripts/containers.sh, which builds local images and
// runs this mode on a private Docker daemon.
package containers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/testcontainers/testcontainers-go"
	tcdynamodb "github.com/testcontainers/testcontainers-go/modules/dynamodb"
	tcetcd "github.com/testcontainers/testcontainers-go/modules/etcd"
	"github.com/testcontainers/testcontainers-go/wait"
)

// Environment variables of the container mode.
const (
	EnvEnable         = "KVBREAKER_CONTAINERS"
	EnvEtcdImage      = "KVBREAKER_ETCD_IMAGE"
	EnvDynamoDBImage  = "KVBREAKER_DYNAMODB_IMAGE"
	EnvDynamoDBServer = "KVBREAKER_DYNAMODB_SERVER"
	EnvNetwork        = "KVBREAKER_CONTAINERS_NETWORK"
)

// Default images: the public ones a user's CI would pull.
const (
	DefaultEtcdImage     = "gcr.io/etcd-development/etcd:v3.6.4"
	DefaultDynamoDBImage = "amazon/dynamodb-local:2.2.1"
)

// Network modes (EnvNetwork).
const (
	// NetworkBridge publishes the container's ports on the host, as the
	// testcontainers modules do by default.
	NetworkBridge = "bridge"
	// NetworkHost runs the container in the host's network namespace,
	// listening on 127.0.0.1 at a port picked free, for daemons started
	// without a bridge (dockerd --bridge=none).
	NetworkHost = "host"
)

// DynamoDB servers (EnvDynamoDBServer): which command line the image takes.
const (
	// ServerDynamoDBLocal is Amazon's DynamoDB Local (amazon/dynamodb-local):
	// the module's java command line, plus -inMemory.
	ServerDynamoDBLocal = "dynamodb-local"
	// ServerDynalite is dynalite (npm), as in the image scripts/containers.sh
	// builds: node dynalite/cli.js --port N.
	ServerDynalite = "dynalite"
)

// StartTimeout bounds how long a container may take to answer after it
// starts.
const StartTimeout = 2 * time.Minute

// Config is the container mode's configuration.
type Config struct {
	// Enabled: the container tests run (EnvEnable).
	Enabled bool
	// EtcdImage and DynamoDBImage are the images to run.
	EtcdImage, DynamoDBImage string
	// DynamoDBServer is ServerDynamoDBLocal or ServerDynalite.
	DynamoDBServer string
	// Network is NetworkBridge or NetworkHost.
	Network string
}

// ConfigFromEnv reads the environment variables above. An unparsable value
// is an error naming the variable, never a silent default.
func ConfigFromEnv() (Config, error) {
	return configFrom(os.Getenv)
}

func configFrom(getenv func(string) string) (Config, error) {
	c := Config{
		EtcdImage:     DefaultEtcdImage,
		DynamoDBImage: DefaultDynamoDBImage,
		Network:       NetworkBridge,
	}
	var errs []error
	if v := strings.TrimSpace(getenv(EnvEnable)); v != "" {
		on, err := strconv.ParseBool(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: want 1 or 0 (true or false)", EnvEnable, v))
		}
		c.Enabled = on
	}
	if v := strings.TrimSpace(getenv(EnvEtcdImage)); v != "" {
		c.EtcdImage = v
	}
	if v := strings.TrimSpace(getenv(EnvDynamoDBImage)); v != "" {
		c.DynamoDBImage = v
	}
	switch v := strings.TrimSpace(getenv(EnvDynamoDBServer)); v {
	case "":
		c.DynamoDBServer = ServerDynamoDBLocal
		if strings.Contains(strings.ToLower(c.DynamoDBImage), "dynalite") {
			c.DynamoDBServer = ServerDynalite
		}
	case ServerDynamoDBLocal, ServerDynalite:
		c.DynamoDBServer = v
	default:
		errs = append(errs, fmt.Errorf("%s=%q: want %s or %s", EnvDynamoDBServer, v, ServerDynamoDBLocal, ServerDynalite))
	}
	switch v := strings.TrimSpace(getenv(EnvNetwork)); v {
	case "":
	case NetworkBridge, NetworkHost:
		c.Network = v
	default:
		errs = append(errs, fmt.Errorf("%s=%q: want %s or %s", EnvNetwork, v, NetworkBridge, NetworkHost))
	}
	if len(errs) > 0 {
		return c, fmt.Errorf("containers: %w", errors.Join(errs...))
	}
	return c, nil
}

// Server is a running container serving one backend.
type Server struct {
	// Endpoint is the URL a client dials: http://host:port.
	Endpoint string
	// Image is the image it runs.
	Image string

	ctr testcontainers.Container
}

// Terminate stops and removes the container. It is safe on a nil Server.
func (s *Server) Terminate(ctx context.Context) error {
	if s == nil || s.ctr == nil {
		return nil
	}
	if err := s.ctr.Terminate(ctx); err != nil {
		return fmt.Errorf("containers: terminate %s: %w", s.Image, err)
	}
	return nil
}

// Logs returns the container's output so far (at most the last 8 KiB), for
// failure messages.
func (s *Server) Logs(ctx context.Context) string {
	if s == nil || s.ctr == nil {
		return ""
	}
	return containerLogs(ctx, s.ctr)
}

func containerLogs(ctx context.Context, c testcontainers.Container) string {
	rc, err := c.Logs(ctx)
	if err != nil {
		return fmt.Sprintf("(logs unavailable: %v)", err)
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, 1<<20))
	if err != nil && len(b) == 0 {
		return fmt.Sprintf("(logs unavailable: %v)", err)
	}
	if len(b) > 8<<10 {
		b = b[len(b)-8<<10:]
	}
	return string(b)
}

// attempts is how many fresh free ports a host-network start tries: a port
// found free can be taken by another process before the server binds it.
// Other failures are not retried.
const attempts = 3

// StartEtcd runs a single-member etcd with testcontainers' modules/etcd and
// waits until its /health answers 200. In NetworkHost mode it listens on
// 127.0.0.1 at free client and peer ports. The caller must Terminate it.
func StartEtcd(ctx context.Context, c Config) (*Server, error) {
	if c.Network != NetworkHost {
		return startEtcd(ctx, c, 0, 0)
	}
	var errs []error
	for range attempts {
		ports, err := FreePorts(2)
		if err != nil {
			return nil, err
		}
		s, err := startEtcd(ctx, c, ports[0], ports[1])
		if err == nil {
			return s, nil
		}
		errs = append(errs, err)
		if !portTaken(err) || ctx.Err() != nil {
			break
		}
	}
	return nil, errors.Join(errs...)
}

func startEtcd(ctx context.Context, c Config, clientPort, peerPort int) (*Server, error) {
	port := "2379/tcp"
	opts := []testcontainers.ContainerCustomizer{
		// The module sets no wait strategy; /health answers 200 once the
		// member has a leader.
		testcontainers.WithWaitStrategy(wait.ForHTTP("/health").WithPort(port).
			WithStatusCodeMatcher(func(code int) bool { return code == 200 }).
			WithStartupTimeout(StartTimeout)),
	}
	if c.Network == NetworkHost {
		cu := "http://127.0.0.1:" + strconv.Itoa(clientPort)
		pu := "http://127.0.0.1:" + strconv.Itoa(peerPort)
		port = strconv.Itoa(clientPort) + "/tcp"
		// The module's command line listens on 0.0.0.0:2379 and the default
		// peer port; etcd takes the last of repeated flags, so these win.
		opts = []testcontainers.ContainerCustomizer{
			tcetcd.WithAdditionalArgs(
				"--listen-client-urls="+cu, "--advertise-client-urls="+cu,
				"--listen-peer-urls="+pu, "--initial-advertise-peer-urls="+pu,
				"--initial-cluster=default="+pu,
			),
			hostNetwork(),
			testcontainers.WithWaitStrategy(wait.ForHTTP("/health").WithPort(port).
				WithStatusCodeMatcher(func(code int) bool { return code == 200 }).
				WithStartupTimeout(StartTimeout)),
		}
	}
	ctr, err := tcetcd.Run(ctx, c.EtcdImage, opts...)
	if err != nil {
		return nil, startError(ctx, "etcd", c.EtcdImage, ctr, err)
	}
	s := &Server{Image: c.EtcdImage, ctr: ctr}
	if c.Network == NetworkHost {
		s.Endpoint = "http://127.0.0.1:" + strconv.Itoa(clientPort)
		return s, nil
	}
	if s.Endpoint, err = ctr.ClientEndpoint(ctx); err != nil {
		_ = s.Terminate(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("containers: etcd (%s): client endpoint: %w", c.EtcdImage, err)
	}
	return s, nil
}

// StartDynamoDB runs a DynamoDB-compatible server with testcontainers'
// modules/dynamodb (DynamoDB Local's command line, in memory) or, for
// ServerDynalite, the same module with dynalite's command line, and waits
// until it answers HTTP. The caller must Terminate it.
func StartDynamoDB(ctx context.Context, c Config) (*Server, error) {
	if c.Network != NetworkHost {
		return startDynamoDB(ctx, c, 0)
	}
	var errs []error
	for range attempts {
		ports, err := FreePorts(1)
		if err != nil {
			return nil, err
		}
		s, err := startDynamoDB(ctx, c, ports[0])
		if err == nil {
			return s, nil
		}
		errs = append(errs, err)
		if !portTaken(err) || ctx.Err() != nil {
			break
		}
	}
	return nil, errors.Join(errs...)
}

func startDynamoDB(ctx context.Context, c Config, hostPort int) (*Server, error) {
	listen, port := "8000", "8000/tcp" // the module's port
	addr := "0.0.0.0"
	var opts []testcontainers.ContainerCustomizer
	if c.Network == NetworkHost {
		listen, port, addr = strconv.Itoa(hostPort), strconv.Itoa(hostPort)+"/tcp", "127.0.0.1"
		opts = append(opts, hostNetwork())
	}
	switch c.DynamoDBServer {
	case ServerDynalite:
		opts = append(opts,
			testcontainers.WithEntrypoint("/usr/local/bin/node", "/app/node_modules/dynalite/cli.js"),
			testcontainers.WithCmd("--host", addr, "--port", listen,
				"--createTableMs", "0", "--deleteTableMs", "0", "--updateTableMs", "0"),
		)
	default:
		// The module's entrypoint and -jar DynamoDBLocal.jar stay.
		opts = append(opts, testcontainers.WithCmdArgs("-inMemory", "-port", listen))
	}
	// Any HTTP answer means it is serving (a GET / is a 400 to both). The
	// module's listening-port wait execs a shell in the container, which
	// FROM-scratch images lack, and assumes port 8000.
	opts = append(opts, testcontainers.WithWaitStrategy(wait.ForHTTP("/").WithPort(port).
		WithStatusCodeMatcher(func(int) bool { return true }).
		WithStartupTimeout(StartTimeout)))
	ctr, err := tcdynamodb.Run(ctx, c.DynamoDBImage, opts...)
	if err != nil {
		return nil, startError(ctx, "dynamodb", c.DynamoDBImage, ctr, err)
	}
	s := &Server{Image: c.DynamoDBImage, ctr: ctr}
	if c.Network == NetworkHost {
		s.Endpoint = "http://127.0.0.1:" + listen
		return s, nil
	}
	cs, err := ctr.ConnectionString(ctx)
	if err != nil {
		_ = s.Terminate(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("containers: dynamodb (%s): endpoint: %w", c.DynamoDBImage, err)
	}
	s.Endpoint = "http://" + cs
	return s, nil
}

// portTaken reports whether a start failed because another process bound
// the port picked free first (the server's output says so), the one failure a
// retry on fresh ports can cure.
func portTaken(err error) bool {
	return strings.Contains(err.Error(), "address already in use") || strings.Contains(err.Error(), "EADDRINUSE")
}

// hostNetwork puts the container in the host's network namespace. Published
// ports mean nothing there, so the module's exposed ports are dropped, and so
// is testcontainers' default network: without a "bridge" network it creates
// one (reaper_default) and attaches every container to it, which for a
// host-network container puts the bridge's address on the host and fails
// ("conflicts with existing route") whenever two containers start at once.
func hostNetwork() testcontainers.CustomizeRequestOption {
	return func(req *testcontainers.GenericContainerRequest) error {
		req.ExposedPorts = nil
		if err := testcontainers.WithEndpointSettingsModifier(func(m map[string]*network.EndpointSettings) {
			clear(m)
		})(req); err != nil {
			return err
		}
		return testcontainers.WithHostConfigModifier(func(hc *container.HostConfig) {
			hc.NetworkMode = "host"
			hc.PortBindings = nil
			hc.PublishAllPorts = false
		})(req)
	}
}

// startError describes a failed start with the container's output, removes
// the half-started container, and says how to get Docker when the daemon is
// not reachable.
func startError(ctx context.Context, what, image string, ctr testcontainers.Container, err error) error {
	var logs string
	if ctr != nil && !isNilContainer(ctr) {
		logs = containerLogs(context.WithoutCancel(ctx), ctr)
		_ = testcontainers.TerminateContainer(ctr)
	}
	msg := fmt.Sprintf("containers: start %s (%s): %v", what, image, err)
	if strings.Contains(err.Error(), "Cannot connect to the Docker daemon") ||
		strings.Contains(err.Error(), "docker host") || strings.Contains(err.Error(), "rootless Docker not found") {
		msg += "\n(no Docker daemon reachable: start one, set DOCKER_HOST, or run scripts/containers.sh, which starts its own)"
	}
	if logs != "" {
		msg += "\ncontainer output:\n" + logs
	}
	return errors.New(msg)
}

// isNilContainer reports whether ctr holds no container: the modules return
// their own pointer types, which embed a Container that is itself a typed nil
// when the start failed early.
func isNilContainer(ctr testcontainers.Container) bool {
	switch c := ctr.(type) {
	case *tcetcd.EtcdContainer:
		return c == nil || isNil(c.Container)
	case *tcdynamodb.DynamoDBContainer:
		return c == nil || isNil(c.Container)
	}
	return isNil(ctr)
}

func isNil(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	return rv.Kind() == reflect.Pointer && rv.IsNil()
}

// FreePorts returns n distinct TCP ports that were free on 127.0.0.1 a moment
// ago.
func FreePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("containers: pick a free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
