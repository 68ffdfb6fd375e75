package etcd_test

import (
	"context"
	"crypto/tls"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/kvbreaker/kvbreaker/backends/etcd"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/backendtest"
)

// slack covers scheduling on a loaded 2-core machine under -race.
const slack = time.Second

// TestDialClosedPortFailsFast: against a port where nothing listens, Dial
// with the command's 30 s timeout fails after etcd.ConnectTimeout (2 s)
// saying so, typed, rather than after the whole 30 s with "etcd: grant
// via http://127.0.0.1:…: context deadline exceeded".
func TestDialClosedPortFailsFast(t *testing.T) {
	t.Cleanup(leakCheck(t))
	addr := backendtest.ClosedPort(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	start := time.Now()
	_, err := etcd.Dial(ctx, []string{"http://" + addr})
	took := time.Since(start)
	t.Logf("%v after %v", err, took.Round(time.Millisecond))
	if want := "etcd: dial: cannot reach etcd at http://" + addr + ": connection refused"; err == nil || err.Error() != want {
		t.Fatalf("Dial of a closed port: %v, want %q", err, want)
	}
	if took > etcd.ConnectTimeout+slack {
		t.Errorf("took %v, want about %v", took, etcd.ConnectTimeout)
	}
	if !errors.Is(err, driver.ErrUnreachable) || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("error does not match driver.ErrUnreachable and ECONNREFUSED")
	}
	if !errors.Is(err, driver.ErrUnreachable) {
		t.Errorf("error does not match driver.ErrUnreachable")
	}
	if oe, ok := errors.AsType[*driver.OpError](err); !ok || oe.Op != "dial" {
		t.Errorf("error %T is not a *driver.OpError for dial", err)
	}
	ue, ok := errors.AsType[*driver.UnreachableError](err)
	if !ok || ue.Reason != "connection refused" || len(ue.Endpoints) != 1 {
		t.Errorf("driver.UnreachableError %+v", ue)
	}
}

// TestNewClosedPortFailsFast: New asks the server its minimum TTL the same
// way, over the caller's client, rather than waiting 5 s for "etcd: grant
// via …: context deadline exceeded".
func TestNewClosedPortFailsFast(t *testing.T) {
	addr := backendtest.ClosedPort(t)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"http://" + addr}, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	start := time.Now()
	_, err = etcd.New(cli)
	took := time.Since(start)
	if want := "etcd: new: cannot reach etcd at http://" + addr + ": connection refused"; err == nil || err.Error() != want {
		t.Fatalf("New over a closed port: %v, want %q", err, want)
	}
	if took > etcd.ConnectTimeout+slack {
		t.Errorf("took %v, want about %v", took, etcd.ConnectTimeout)
	}
	// Negative control: with the minimum declared, New asks nothing.
	if _, err := etcd.New(cli, etcd.WithMinTTL(time.Second)); err != nil {
		t.Errorf("New with WithMinTTL: %v", err)
	}
}

// TestDialSilentListener: a listener that accepts but never answers is
// bounded by Dial's context, before and after ConnectTimeout, and the
// error says it did not answer: "etcd: grant via …: context deadline
// exceeded" would not say whether anything listened.
func TestDialSilentListener(t *testing.T) {
	t.Cleanup(leakCheck(t))
	addr, accepted := backendtest.SilentListener(t)
	for _, timeout := range []time.Duration{time.Second, 3 * time.Second} {
		t.Run(timeout.String(), func(t *testing.T) {
			start := time.Now() // before the deadline is set: took cannot undercut it
			ctx, cancel := context.WithTimeout(t.Context(), timeout)
			defer cancel()
			_, err := etcd.Dial(ctx, []string{"http://" + addr})
			took := time.Since(start)
			t.Logf("%v after %v", err, took.Round(time.Millisecond))
			want := "etcd: dial: cannot reach etcd at http://" + addr + ": it accepted the connection but did not answer within "
			if err == nil || !strings.HasPrefix(err.Error(), want) {
				t.Fatalf("Dial of a silent listener: %v, want %q…", err, want)
			}
			if took < timeout || took > timeout+slack {
				t.Errorf("took %v, want the context's %v", took, timeout)
			}
			if !errors.Is(err, driver.ErrUnreachable) || !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("error does not match driver.ErrUnreachable and context.DeadlineExceeded")
			}
		})
	}
	if accepted() == 0 {
		t.Error("the client never connected to the listener")
	}
}

// TestDialReportsEveryEndpoint: with several endpoints, all down for
// different reasons, the error names each.
func TestDialReportsEveryEndpoint(t *testing.T) {
	a, b := backendtest.ClosedPort(t), backendtest.ClosedPort(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, err := etcd.Dial(ctx, []string{"http://" + a, "http://" + b})
	if want := "etcd: dial: cannot reach etcd at http://" + a + ", http://" + b + ": connection refused"; err == nil || err.Error() != want {
		t.Errorf("Dial of two closed ports: %v, want %q", err, want)
	}
	// One endpoint answering is enough.
	s, err := etcd.Dial(ctx, []string{"http://" + a, endpoints[0]})
	if err != nil {
		t.Fatalf("Dial with one live endpoint: %v", err)
	}
	s.Close()
}

// TestDialInvalidArguments: missing endpoints and bad options are all
// reported at once, before any connection, as *driver.OptionError.
func TestDialInvalidArguments(t *testing.T) {
	_, err := etcd.Dial(t.Context(), nil, etcd.WithMaxKeysPerLease(0))
	want := "etcd: invalid endpoints: none: give at least one, e.g. https://etcd-0:2379\n" +
		"etcd: invalid WithMaxKeysPerLease: 0: give 1 or more"
	if err == nil || err.Error() != want {
		t.Fatalf("Dial(nil endpoints, bad option): %v, want:\n%s", err, want)
	}
	if _, ok := errors.AsType[*driver.OptionError](err); !ok {
		t.Errorf("%T is not a *driver.OptionError", err)
	}
	_, err = etcd.Dial(t.Context(), []string{" "})
	if oe, ok := errors.AsType[*driver.OptionError](err); !ok || oe.Option != "endpoint" {
		t.Errorf("blank endpoint: %v", err)
	}
	// WithTLSConfig is Dial's alone (the security tests dial with it): New
	// refuses it, since the caller's client has its own TLS configuration.
	_, err = etcd.New(nil, etcd.WithMinTTL(-time.Second), etcd.WithTLSConfig(&tls.Config{}))
	want = "etcd: invalid client: nil: pass a *clientv3.Client, or call Dial\n" +
		"etcd: invalid WithMinTTL: -1s: give 0 (ask the server) or a positive duration\n" +
		"etcd: invalid WithTLSConfig: given to New: set TLS in the clientv3.Config (New does not make the client), or call Dial"
	if err == nil || err.Error() != want {
		t.Errorf("New(nil, bad options): %v, want:\n%s", err, want)
	}
}

// leakCheck returns a cleanup that fails t if goroutines started during
// the test outlive it (the clients Dial made and closed, the probe).
func leakCheck(t *testing.T) func() {
	ignore := goleak.IgnoreCurrent()
	return func() { goleak.VerifyNone(t, ignore) }
}

// TestStoreString: a Store names the cluster it talks to, its endpoints as
// given to Dial less the user information and query, which may carry a
// credential; what it names is where Dial connected.
func TestStoreString(t *testing.T) {
	ep := strings.Replace(endpoints[0], "://", "://user:string-secret@", 1) + "?token=string-secret"
	s, err := etcd.Dial(t.Context(), []string{ep})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got, want := s.String(), "etcd at "+endpoints[0]; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}
