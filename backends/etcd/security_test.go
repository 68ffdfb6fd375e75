package etcd_test

import (
	"context"
	"crypto/tls"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/etcd"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/fleettest"
	"github.com/kvbreaker/kvbreaker/internal/testservers/etcdtest"
	"github.com/kvbreaker/kvbreaker/internal/testservers/tlstest"
	"github.com/kvbreaker/kvbreaker/tlsdiag"
)

// TestClientCertificates: an etcd that speaks TLS only and requires a
// client certificate its authority signed (--client-cert-auth), reached
// through Dial with a tls.Config holding that authority and a client
// certificate: a fleet of Breakers, each with its own client, runs a
// circuit's life, and Follow delivers a change and Synced.
func TestClientCertificates(t *testing.T) {
	pki := tlstest.MustNew(t, "etcd test CA")
	srv := etcdtest.MustStartWith(t, etcdtest.Options{TLS: pki, ClientCerts: true})
	prefix := uniquePrefix(t)
	var stores []driver.Store
	for range 4 {
		s, err := etcd.Dial(t.Context(), srv.Endpoints(), etcd.WithTLSConfig(pki.ClientConfig()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		p, err := kvbreaker.Prefixed(s, prefix)
		if err != nil {
			t.Fatal(err)
		}
		stores = append(stores, p)
	}
	f := fleettest.New(t, stores, kvbreaker.Settings{FailureThreshold: 3, FailureWindow: time.Minute, RecoveryDelay: 10 * time.Minute})
	f.Cycle(t, "inbox.example", 16)

	s, err := etcd.Dial(t.Context(), srv.Endpoints(), etcd.WithTLSConfig(pki.ClientConfig()))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	got := make(chan driver.Change, 16)
	done := make(chan error, 1)
	go func() {
		done <- s.Follow(ctx, prefix+"follow/", 200*time.Millisecond, func(c driver.Change) {
			if c.Kind == driver.ChangePut || c.Kind == driver.ChangeSynced {
				select {
				case got <- c:
				default:
				}
			}
		})
	}()
	put, written := false, false
	for !put {
		select {
		case c := <-got:
			// One write, at the first Synced: under load a second Synced
			// can come before the write's Put, and writing again would
			// conflict with the first.
			if c.Kind == driver.ChangeSynced && !written {
				written = true
				if _, err := s.CompareAndSwap(ctx, prefix+"follow/k", 0, []byte("v"), time.Minute); err != nil {
					t.Fatal(err)
				}
			}
			put = c.Kind == driver.ChangePut && c.Key == prefix+"follow/k"
		case <-ctx.Done():
			t.Fatal("Follow over TLS delivered no change")
		}
	}
	cancel()
	<-done
}

// TestTLSMismatchProbedAgain: a first TLS probe that cannot tell (here
// bounded by 1 ns; on a loaded machine, a handshake slower than its
// bound) does not leave Dial waiting for its context to end: it probes
// again after another ConnectTimeout and names the mismatch then.
func TestTLSMismatchProbedAgain(t *testing.T) {
	pki := tlstest.MustNew(t, "etcd test CA")
	other := tlstest.MustNew(t, "another CA")
	srv := etcdtest.MustStartWith(t, etcdtest.Options{TLS: pki, ClientCerts: true})
	etcd.SetFirstProbeTimeout(t, time.Nanosecond)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	start := time.Now()
	s, err := etcd.Dial(ctx, srv.Endpoints(), etcd.WithTLSConfig(other.ClientConfig()))
	if err == nil {
		s.Close()
		t.Fatal("Dial succeeded")
	}
	if te, ok := errors.AsType[*tlsdiag.Error](err); !ok || te.Kind != tlsdiag.Untrusted {
		t.Errorf("Dial: %v, want a TLSError of kind %d", err, tlsdiag.Untrusted)
	}
	// The context's end, 30 s, is what Dial waited for before; a second
	// probe ends it after about 2 × ConnectTimeout.
	if d := time.Since(start); d > 2*etcd.ConnectTimeout+15*time.Second {
		t.Errorf("took %v, want about 2 × ConnectTimeout (%v): the second probe was not made", d, etcd.ConnectTimeout)
	}
}

// TestTLSMismatch: Dial against an etcd that requires TLS and a client
// certificate reports each mismatch as a *tlsdiag.Error of its kind, after
// ConnectTimeout rather than when its context ends (clientv3 retries a
// failed handshake and says only that the context ended), naming the fix:
// a client that trusts another authority, one without a client
// certificate, and a plain-text client.
func TestTLSMismatch(t *testing.T) {
	pki := tlstest.MustNew(t, "etcd test CA")
	other := tlstest.MustNew(t, "another CA")
	srv := etcdtest.MustStartWith(t, etcdtest.Options{TLS: pki, ClientCerts: true})
	plain := "http://" + strings.TrimPrefix(srv.Endpoints()[0], "https://")
	for _, tc := range []struct {
		name string
		eps  []string
		cfg  *tls.Config
		kind tlsdiag.Problem
		want string
	}{
		{"another CA", srv.Endpoints(), other.ClientConfig(), tlsdiag.Untrusted, `signed by an authority the client does not trust ("etcd test CA"): give the client the authority that signed it (tls.Config.RootCAs)`},
		{"no client certificate", srv.Endpoints(), pki.ServerOnlyConfig(), tlsdiag.ClientCertRefused, "tls.Config.Certificates"},
		{"plain text", []string{plain}, nil, tlsdiag.ServerSpeaksTLS, "the server speaks TLS and the client plain text"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			start := time.Now()
			s, err := etcd.Dial(ctx, tc.eps, etcd.WithTLSConfig(tc.cfg))
			if err == nil {
				s.Close()
				t.Fatal("Dial succeeded")
			}
			te, ok := errors.AsType[*tlsdiag.Error](err)
			if !ok || te.Kind != tc.kind || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Dial: %v, want a TLSError of kind %d saying %q", err, tc.kind, tc.want)
			}
			if d := time.Since(start); d > etcd.ConnectTimeout+5*time.Second {
				t.Errorf("took %v, want about ConnectTimeout (%v)", d, etcd.ConnectTimeout)
			}
		})
	}
}
