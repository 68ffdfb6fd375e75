package containers

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	dyn "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/dynamodb"
	"github.com/kvbreaker/kvbreaker/backends/etcd"
	"github.com/kvbreaker/kvbreaker/conformance"
	"github.com/kvbreaker/kvbreaker/driver"
)

// What TestMain started; a test needing a server that failed to start fails
// with the reason.
var (
	cfg     Config
	cfgErr  error
	etcdSrv *Server
	etcdErr error
	dynSrv  *Server
	dynErr  error
)

// table is the DynamoDB table every container test shares, each store under
// its own key prefix.
const table = "kvbreaker"

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	cfg, cfgErr = ConfigFromEnv()
	if cfgErr != nil || !cfg.Enabled {
		return m.Run() // the container tests report why they did not run
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*StartTimeout)
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() { etcdSrv, etcdErr = StartEtcd(ctx, cfg) })
	wg.Go(func() {
		if dynSrv, dynErr = StartDynamoDB(ctx, cfg); dynErr == nil {
			if err := dynamodb.CreateTable(ctx, newClient(dynSrv.Endpoint), table); err != nil {
				dynErr = fmt.Errorf("containers: dynamodb (%s): %w\ncontainer output:\n%s", dynSrv.Image, err, dynSrv.Logs(ctx))
			}
		}
	})
	wg.Wait()
	defer func() {
		stop, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, s := range []*Server{etcdSrv, dynSrv} {
			if err := s.Terminate(stop); err != nil {
				fmt.Fprintln(os.Stderr, err)
			}
		}
	}()
	return m.Run() // the tests needing a server that did not start fail with its error
}

// need returns the server a test uses, skipping the test when the container
// mode is off (the only skip: CI runs this mode explicitly, through
// scripts/containers.sh) and failing it when the mode is on but the server
// did not start.
func need(t *testing.T, srv *Server, err error) *Server {
	t.Helper()
	if cfgErr != nil {
		t.Fatal(cfgErr)
	}
	if !cfg.Enabled {
		t.Skipf("container mode is off: set %s=1 to run it (needs Docker; scripts/containers.sh builds the images and starts a daemon)", EnvEnable)
	}
	if err != nil {
		t.Fatal(err)
	}
	if srv == nil {
		t.Fatal("containers: the server was not started")
	}
	return srv
}

var prefixes atomic.Int64

func uniquePrefix(t testing.TB) string {
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	return fmt.Sprintf("containers/%s/%d/", name, prefixes.Add(1))
}

func etcdClient(t testing.TB, endpoint string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("etcd client for %s: %v", endpoint, err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// etcdHarness makes etcd stores on the container, each under a fresh prefix,
// over one client; Close closes them.
type etcdHarness struct {
	t   *testing.T
	cli *clientv3.Client

	mu     sync.Mutex
	stores []*etcd.Store
}

func (h *etcdHarness) MakeStore(context.Context) (driver.Store, error) {
	s, err := etcd.New(h.cli)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	h.stores = append(h.stores, s)
	h.mu.Unlock()
	return kvbreaker.Prefixed(s, uniquePrefix(h.t))
}

func (h *etcdHarness) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, s := range h.stores {
		_ = s.Close()
	}
}

// dynamoHarness makes DynamoDB stores over the shared table, each under a
// fresh key prefix.
type dynamoHarness struct {
	t      *testing.T
	client *dyn.Client
}

func (h dynamoHarness) MakeStore(context.Context) (driver.Store, error) {
	s, err := dynamodb.New(h.client, table)
	if err != nil {
		return nil, err
	}
	return kvbreaker.Prefixed(s, uniquePrefix(h.t))
}

func (dynamoHarness) Close() {}

// TestConformanceEtcd runs the conformance suite on etcd in a container.
func TestConformanceEtcd(t *testing.T) {
	srv := need(t, etcdSrv, etcdErr)
	t.Logf("etcd image %s at %s", srv.Image, srv.Endpoint)
	conformance.Run(t, func(_ context.Context, t *testing.T) (conformance.Harness, error) {
		return &etcdHarness{t: t, cli: etcdClient(t, srv.Endpoint)}, nil
	}, append(verifiedByBackend("backends/etcd"),
		// etcd declares Late 1m0.5s (a lease's expiry is only checked on
		// its leader's ticks), so telling two TTLs apart in real time
		// takes a 65 s wait, which this run does not make.
		conformance.Waive("write-replaces-ttl", "without a lifetime reader the TTLs cannot be told apart short of a 65 s wait; backends/etcd's TestConformance verifies it through LeaseTimeToLive"),
		conformance.Waive("follow-lost", "the container harness has no fault proxy to break the feed; backends/etcd's TestConformance verifies it through one"))...)
}

// TestConformanceDynamoDB runs the conformance suite on the DynamoDB
// container (DynamoDB Local or dynalite).
func TestConformanceDynamoDB(t *testing.T) {
	srv := need(t, dynSrv, dynErr)
	t.Logf("dynamodb image %s (%s) at %s", srv.Image, cfg.DynamoDBServer, srv.Endpoint)
	conformance.Run(t, func(_ context.Context, t *testing.T) (conformance.Harness, error) {
		return dynamoHarness{t: t, client: newClient(srv.Endpoint)}, nil
	}, verifiedByBackend("backends/dynamodb")...)
}

// TestBreakerEtcd runs two Breakers (two workers, each with its own client)
// over the etcd container through a whole open / probe / close cycle.
func TestBreakerEtcd(t *testing.T) {
	srv := need(t, etcdSrv, etcdErr)
	prefix := uniquePrefix(t)
	var stores [2]driver.Store
	for i := range stores {
		s, err := etcd.New(etcdClient(t, srv.Endpoint))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		if stores[i], err = kvbreaker.Prefixed(s, prefix); err != nil {
			t.Fatal(err)
		}
	}
	breakerCycle(t, stores)
}

// TestBreakerDynamoDB is TestBreakerEtcd on the DynamoDB container.
func TestBreakerDynamoDB(t *testing.T) {
	srv := need(t, dynSrv, dynErr)
	prefix := uniquePrefix(t)
	var stores [2]driver.Store
	for i := range stores {
		s, err := dynamodb.New(newClient(srv.Endpoint), table)
		if err != nil {
			t.Fatal(err)
		}
		if stores[i], err = kvbreaker.Prefixed(s, prefix); err != nil {
			t.Fatal(err)
		}
	}
	breakerCycle(t, stores)
}

// breakerCycle drives two workers' Breakers, one per store (both stores see
// the same keys), through closed → open → half-open → closed, on a shared
// simulated clock that starts at the real time (so the stores' real TTLs,
// which are far longer than this test, never expire a record): failures from
// both workers open the circuit once, both then hold, exactly one of two
// concurrent Allows after the recovery delay gets the probe, and its success
// deletes the record.
func breakerCycle(t *testing.T, stores [2]driver.Store) {
	ctx := t.Context()
	var now atomic.Int64
	// Records keep milliseconds: start on a whole one so that instants
	// read back compare equal.
	now.Store(time.Now().Truncate(time.Millisecond).UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()) }
	var mu sync.Mutex
	var changes []string
	settings := kvbreaker.Settings{
		FailureThreshold: 3,
		FailureWindow:    time.Minute,
		RecoveryDelay:    time.Minute,
		Clock:            clock,
		OnStateChange: func(host string, from, to kvbreaker.State) {
			mu.Lock()
			defer mu.Unlock()
			changes = append(changes, fmt.Sprintf("%s: %s -> %s", host, from, to))
		},
	}
	var workers [2]*kvbreaker.Breaker
	for i, s := range stores {
		b, err := kvbreaker.New(s, settings)
		if err != nil {
			t.Fatalf("kvbreaker.New: %v", err)
		}
		workers[i] = b
	}
	const host = "inbox.example"

	if v, err := workers[0].Allow(ctx, host, time.Time{}); err != nil || v.Decision != kvbreaker.Send {
		t.Fatalf("a fresh host: Allow = %v, %v; want send", v.Decision, err)
	}
	for i := range 3 {
		if err := workers[i%2].Failure(ctx, host); err != nil {
			t.Fatalf("worker %d: Failure %d: %v", i%2, i+1, err)
		}
	}
	st, err := workers[1].Inspect(ctx, host)
	if err != nil || !st.Found || st.State != kvbreaker.StateOpen || len(st.Failures) != 3 {
		t.Fatalf("after 3 failures from two workers: Inspect = %+v, %v; want an open record with 3 failures", st, err)
	}
	for i, w := range workers {
		v, err := w.Allow(ctx, host, time.Time{})
		if err != nil || v.Decision != kvbreaker.Hold || !v.RetryAt.Equal(clock().Add(time.Minute)) {
			t.Fatalf("worker %d while open: Allow = %+v, %v; want hold until the recovery delay ends", i, v, err)
		}
	}

	now.Add(int64(time.Minute))
	var verdicts [2]kvbreaker.Verdict
	var errs [2]error
	var wg sync.WaitGroup
	for i, w := range workers {
		wg.Go(func() { verdicts[i], errs[i] = w.Allow(ctx, host, time.Time{}) })
	}
	wg.Wait()
	if err := errors.Join(errs[:]...); err != nil {
		t.Fatalf("concurrent Allow after the recovery delay: %v", err)
	}
	prober := -1
	for i, v := range verdicts {
		if v.Decision == kvbreaker.Probe {
			if prober >= 0 {
				t.Fatalf("both workers got the probe: the store let two swaps of one version through")
			}
			prober = i
		} else if v.Decision != kvbreaker.Hold {
			t.Fatalf("worker %d after the recovery delay: %v; want probe or hold", i, v.Decision)
		}
	}
	if prober < 0 {
		t.Fatalf("neither worker got the probe: verdicts %v, %v", verdicts[0].Decision, verdicts[1].Decision)
	}
	if st, err := workers[1-prober].Inspect(ctx, host); err != nil || st.State != kvbreaker.StateHalfOpen {
		t.Fatalf("while probing: Inspect = %+v, %v; want half-open", st, err)
	}

	if err := workers[prober].Success(ctx, host); err != nil {
		t.Fatalf("Success: %v", err)
	}
	if st, err := workers[1-prober].Inspect(ctx, host); err != nil || st.Found {
		t.Fatalf("after the probe succeeded: Inspect = %+v, %v; want no record", st, err)
	}
	if v, err := workers[1-prober].Allow(ctx, host, time.Time{}); err != nil || v.Decision != kvbreaker.Send {
		t.Fatalf("after closing: Allow = %v, %v; want send", v.Decision, err)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{host + ": closed -> open", host + ": open -> half-open", host + ": half-open -> closed"}
	if strings.Join(changes, "\n") != strings.Join(want, "\n") {
		t.Errorf("OnStateChange calls:\n%s\nwant (each once, across both workers):\n%s", strings.Join(changes, "\n"), strings.Join(want, "\n"))
	}
}

func TestConfigFromEnv(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     map[string]string
		want    Config
		wantErr string
	}{
		{name: "unset", want: Config{EtcdImage: DefaultEtcdImage, DynamoDBImage: DefaultDynamoDBImage, DynamoDBServer: ServerDynamoDBLocal, Network: NetworkBridge}},
		{
			name: "local images on the host network",
			env:  map[string]string{EnvEnable: "1", EnvEtcdImage: "kvbreaker/etcd:local", EnvDynamoDBImage: "kvbreaker/dynalite:local", EnvNetwork: "host"},
			want: Config{Enabled: true, EtcdImage: "kvbreaker/etcd:local", DynamoDBImage: "kvbreaker/dynalite:local", DynamoDBServer: ServerDynalite, Network: NetworkHost},
		},
		{
			name: "server named explicitly",
			env:  map[string]string{EnvEnable: "true", EnvDynamoDBImage: "registry.example/ddb:1", EnvDynamoDBServer: "dynalite"},
			want: Config{Enabled: true, EtcdImage: DefaultEtcdImage, DynamoDBImage: "registry.example/ddb:1", DynamoDBServer: ServerDynalite, Network: NetworkBridge},
		},
		{name: "off", env: map[string]string{EnvEnable: "0"}, want: Config{EtcdImage: DefaultEtcdImage, DynamoDBImage: DefaultDynamoDBImage, DynamoDBServer: ServerDynamoDBLocal, Network: NetworkBridge}},
		{name: "bad switch", env: map[string]string{EnvEnable: "please"}, wantErr: EnvEnable + `="please"`},
		{name: "bad network", env: map[string]string{EnvNetwork: "overlay"}, wantErr: EnvNetwork + `="overlay"`},
		{name: "bad server", env: map[string]string{EnvDynamoDBServer: "scylla"}, wantErr: EnvDynamoDBServer + `="scylla"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := configFrom(func(k string) string { return tc.env[k] })
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v; want one naming %s", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("configFrom = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestFreePorts(t *testing.T) {
	ports, err := FreePorts(3)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if p <= 0 || p > 65535 || seen[p] {
			t.Fatalf("FreePorts(3) = %v: want 3 distinct ports", ports)
		}
		seen[p] = true
	}
}

// TestEtcdPortTaken starts etcd on the host network on a port another
// process holds: the start must fail, with etcd's own reason, recognised as
// the one failure StartEtcd retries on fresh ports.
func TestEtcdPortTaken(t *testing.T) {
	need(t, etcdSrv, etcdErr)
	if cfg.Network != NetworkHost {
		t.Skipf("the port clash needs %s=%s; this run uses %s", EnvNetwork, NetworkHost, cfg.Network)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	peer, err := FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), StartTimeout)
	defer cancel()
	s, err := startEtcd(ctx, cfg, l.Addr().(*net.TCPAddr).Port, peer[0])
	if err == nil {
		_ = s.Terminate(context.WithoutCancel(ctx))
		t.Fatal("etcd started on a port another process holds")
	}
	if !portTaken(err) {
		t.Fatalf("start on a taken port: %v\nwant an error saying the address is in use", err)
	}
}

// newClient returns a DynamoDB client for a local endpoint (dynalite, or
// DynamoDB Local) with static fake credentials and region us-east-1.
func newClient(endpoint string, opts ...func(*dyn.Options)) *dyn.Client {
	cfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("AKIDFAKEFORTESTS", "fake-secret-for-tests", "")}
	return dyn.NewFromConfig(cfg, append([]func(*dyn.Options){func(o *dyn.Options) { o.BaseEndpoint = aws.String(endpoint) }}, opts...)...)
}

// verifiedByBackend waives what these harnesses give the suite no way to
// verify (lifetimes, lost answers, foreign values): the container run
// checks the adapter against the image you deploy, and the backend's own
// TestConformance, whose harness has those capabilities, verifies them for
// the same adapter against its test server.
func verifiedByBackend(pkg string) []conformance.Option {
	why := "the container harness has no lifetime reader, fault proxy or foreign planter; " + pkg + "'s TestConformance verifies this for the same adapter"
	var opts []conformance.Option
	for _, p := range []conformance.PromiseID{"state-ttl", "skewed-reader", "foreign-value-replaced",
		"lost-answer-cas", "lost-answer-delete", "lost-answer-breaker"} {
		opts = append(opts, conformance.Waive(p, why))
	}
	return opts
}
