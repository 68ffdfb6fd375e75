package etcd

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/kvbreaker/kvbreaker/adapter"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/tlsdiag"
)

const (
	// connectTimeout is how long Dial (and New, when it asks the server)
	// waits for its first request before it checks whether any endpoint
	// accepts a connection at all: etcdctl's --dial-timeout. Refused
	// everywhere, the call fails then; accepted somewhere, it waits for the
	// answer as long as its context allows.
	connectTimeout = 2 * time.Second
	// checkTimeout bounds the connection check of each endpoint.
	checkTimeout = 500 * time.Millisecond
)

// firstProbeTimeout bounds reach's first TLS probe of each endpoint (a
// variable so that a test can make it too short to tell).
var firstProbeTimeout = checkTimeout

// Dial connects to the etcd cluster at endpoints ("https://host:2379"; user
// information in an endpoint is not sent nor shown in errors), with
// WithTLSConfig's configuration or in plain text, and returns a Store that owns the client: Close
// closes it. Dial confirms the cluster answers (it grants and revokes a
// 1-second lease, learning the server's minimum TTL): against a port where
// nothing listens it fails after 2 s with "cannot reach etcd at
// <endpoint>: connection refused"; against a server that accepts but does
// not answer it fails when ctx ends (adapter.DefaultDialTimeout, 5 s, when
// ctx has no deadline), saying so. Both match driver.ErrUnreachable. ctx
// does not bound the Store's later life. Invalid endpoints and options are *driver.OptionError,
// all of them joined.
func Dial(ctx context.Context, endpoints []string, opts ...Option) (*Store, error) {
	problems := adapter.Problems{Backend: backend}
	if len(endpoints) == 0 {
		problems.Add("endpoints", "none", "give at least one, e.g. https://etcd-0:2379")
	}
	for i, ep := range endpoints {
		if strings.TrimSpace(ep) == "" {
			problems.Add("endpoint", fmt.Sprintf("%q (#%d)", ep, i+1), "give host:port or a URL, e.g. https://etcd-0:2379")
		}
	}
	o, err := newOptions(opts, &problems, true)
	if err != nil {
		return nil, err
	}
	eps := redactEndpoints(endpoints)
	ctx, cancel := adapter.DialContext(ctx, adapter.DefaultDialTimeout)
	defer cancel()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   eps,
		TLS:         o.tlsConfig,
		DialTimeout: connectTimeout,
		// The client's own logging would repeat, per retry, what the
		// Store's errors already say.
		Logger: zap.NewNop(),
	})
	if err != nil {
		return nil, opError("dial", "", err)
	}
	s := newStore(cli, true, o)
	if err := s.reach(ctx, "dial", eps, tlsCheck(endpoints, eps, o.tlsConfig)); err != nil {
		cli.Close()
		return nil, err
	}
	return s, nil
}

// reach sends the store's first request (probeMinTTL) within ctx. If it has
// no answer after connectTimeout, or ctx ends first, reach checks whether
// any endpoint accepts a TCP connection: none does, the cluster is
// unreachable (and reach returns at once); one does, the cluster accepted
// but did not answer. clientv3 cannot tell these apart itself: it waits for
// a connection until ctx ends and then reports only the context's error.
// The check opens connections of its own only when the request is late, so
// a healthy server sees none. When an endpoint accepts, tlsProbe (if not
// nil) then looks for a TLS mismatch, which clientv3 also reports only as
// the context's end: it retries a failed handshake until then.
//
// A TLS probe that cannot tell within its bound (a handshake on a loaded
// machine takes longer than checkTimeout) is not an answer: reach probes
// again after another connectTimeout, bounded by connectTimeout, instead of
// waiting for ctx to end with the mismatch undiagnosed.
func (s *Store) reach(ctx context.Context, op string, endpoints []string, tlsProbe func(context.Context, time.Duration) error) error {
	start := time.Now()
	probeBound := firstProbeTimeout
	eps := redactEndpoints(endpoints)
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.probeMinTTL(pctx) }()
	timer := time.NewTimer(connectTimeout)
	defer timer.Stop()
	var refused error // why no endpoint accepted a connection, once known
	for {
		select {
		case <-timer.C:
			err := checkConnect(ctx, endpoints, eps)
			if err == nil && tlsProbe != nil {
				err = tlsProbe(ctx, probeBound)
				if err == nil {
					probeBound = connectTimeout
					timer.Reset(connectTimeout)
				}
			}
			if err != nil {
				refused = err
				cancel() // done follows at once
			}
			continue
		case err := <-done:
			switch {
			case err == nil:
				return nil
			case refused != nil:
				return opError(op, "", refused)
			case ctx.Err() == nil:
				// The cluster answered with an error (auth, no leader, …).
				return opError(op, "", via(err, strings.Join(eps, ",")))
			}
			// ctx ended before connectTimeout or after a check that
			// found an endpoint accepting: check (again) briefly, so a
			// short ctx still tells a refused port from a silent one.
			cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), checkTimeout)
			refused = checkConnect(cctx, endpoints, eps)
			if refused == nil && tlsProbe != nil {
				refused = tlsProbe(cctx, checkTimeout)
			}
			ccancel()
			if refused != nil {
				return opError(op, "", refused)
			}
			return opError(op, "", &driver.UnreachableError{
				Backend:   "etcd",
				Endpoints: eps,
				Reason:    fmt.Sprintf("it accepted the connection but did not answer within %v", time.Since(start).Round(10*time.Millisecond)),
				Err:       ctx.Err(),
			})
		}
	}
}

// tlsCheck returns reach's TLS probe of Dial's endpoints: the first TLS
// mismatch tlsdiag.Probe finds at any of them, with the client's
// configuration (nil: plain text), each within bound.
func tlsCheck(endpoints, shown []string, cfg *tls.Config) func(context.Context, time.Duration) error {
	return func(ctx context.Context, bound time.Duration) error {
		for i, ep := range endpoints {
			network, addr, ok := dialAddress(ep)
			if !ok || network != "tcp" {
				continue
			}
			pctx, cancel := context.WithTimeout(ctx, bound)
			te := tlsdiag.Probe(pctx, "etcd", shown[i], addr, cfg)
			cancel()
			if te != nil {
				return te
			}
		}
		return nil
	}
}

// checkConnect dials every endpoint's TCP (or unix) address at once, each
// within checkTimeout, and returns an *driver.UnreachableError if none accepts,
// nil if one does (or an endpoint's address cannot be told: the client's
// resolver may know better).
func checkConnect(ctx context.Context, endpoints, shown []string) error {
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	errs := make([]error, len(endpoints))
	var wg sync.WaitGroup
	for i, ep := range endpoints {
		network, addr, ok := dialAddress(ep)
		if !ok {
			return nil
		}
		wg.Go(func() {
			var d net.Dialer
			conn, err := d.DialContext(ctx, network, addr)
			if err == nil {
				conn.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	reasons := make([]string, len(errs))
	for i, err := range errs {
		if err == nil {
			return nil
		}
		reasons[i] = dialReason(err)
	}
	e := &driver.UnreachableError{Backend: "etcd", Endpoints: shown, Reason: reasons[0], Err: errors.Join(errs...)}
	for _, r := range reasons[1:] {
		if r != reasons[0] {
			parts := make([]string, len(reasons))
			for i := range reasons {
				parts[i] = shown[i] + ": " + reasons[i]
			}
			e.Reason = strings.Join(parts, "; ")
			break
		}
	}
	return e
}

// dialReason is a failed connection's cause as an operator reads it:
// adapter.DialReason's words, except for what only this check knows.
func dialReason(err error) string {
	var dns *net.DNSError
	var nerr net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		// adapter.DialReason's "connection refused", below.
	case errors.As(err, &dns):
		// The resolver's whole answer, as etcd's message has always shown
		// it (adapter.DialReason shortens a missing name to "no such host").
		return dns.Error()
	case errors.As(err, &nerr) && nerr.Timeout(), errors.Is(err, context.DeadlineExceeded):
		// checkConnect's own bound, not the caller's context.
		return "no connection within " + checkTimeout.String()
	}
	return adapter.DialReason(err)
}

// dialAddress is the network and address clientv3 connects to for an
// endpoint ("http://h:2379", "h:2379", "unix:///path", "unix:path"), and
// false when it has no explicit port.
func dialAddress(ep string) (network, addr string, ok bool) {
	scheme, rest, found := strings.Cut(ep, "://")
	if !found {
		scheme, rest = "", ep
		if p, isUnix := strings.CutPrefix(ep, "unix:"); isUnix {
			return "unix", p, true
		}
		if p, isUnix := strings.CutPrefix(ep, "unixs:"); isUnix {
			return "unix", p, true
		}
	}
	if scheme == "unix" || scheme == "unixs" {
		return "unix", rest, rest != ""
	}
	host, _, _ := strings.Cut(rest, "/")
	if i := strings.LastIndex(host, "@"); i >= 0 {
		host = host[i+1:]
	}
	if _, port, err := net.SplitHostPort(host); err != nil || port == "" {
		return "", "", false
	}
	return "tcp", host, true
}
