//go:build !simulateonly

package main

import (
	"context"
	"errors"
	"net"
	"net/url"
	"strings"

	kvnats "github.com/kvbreaker/kvbreaker/backends/nats"
)

// defaultNATSBucket is --nats-bucket's default.
const defaultNATSBucket = "kvbreaker"

// natsURLs are --nats-url's comma-separated server URLs.
func (f *backendFlags) natsURLs() []string {
	var urls []string
	for u := range strings.SplitSeq(f.natsURL, ",") {
		if u = strings.TrimSpace(u); u != "" {
			urls = append(urls, u)
		}
	}
	return urls
}

// checkNATSURL checks one of --nats-url's URLs without connecting.
func (f *backendFlags) checkNATSURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "nats" && u.Scheme != "tls") || u.Hostname() == "" {
		return usagef("%s is %q: want nats://host:4222 or tls://host:4222 (comma-separated for several)", f.name("nats-url"), redactURL(raw))
	}
	return nil
}

// natsPreflight checks that one of the servers accepts a TCP connection
// (at NATS's default port 4222 when a URL names none, as nats.go
// connects), naming each host:port that refused.
func natsPreflight(ctx context.Context, urls []string) error {
	var errs []error
	for _, raw := range urls {
		u, err := url.Parse(raw)
		if err != nil {
			return err
		}
		addr := u.Host
		if u.Port() == "" {
			addr = net.JoinHostPort(u.Hostname(), "4222")
		}
		dctx, cancel := context.WithTimeout(ctx, dialTimeout)
		c, err := (&net.Dialer{}).DialContext(dctx, "tcp", addr)
		cancel()
		if err == nil {
			c.Close()
			return nil
		}
		errs = append(errs, &reachError{backend: "nats", endpoint: addr, why: dialCause(err), err: err})
	}
	return errors.Join(errs...)
}

// openNATS checks that a server accepts a connection, then dials the
// servers (nats.Dial) and opens the bucket, creating it if it does not
// exist.
func openNATS(ctx context.Context, f *backendFlags) (*conn, error) {
	urls := f.natsURLs()
	shown := make([]string, len(urls))
	for i, u := range urls {
		shown[i] = redactURL(u)
	}
	where := strings.Join(shown, ",")
	if err := natsPreflight(ctx, urls); err != nil {
		return nil, err
	}
	s, err := kvnats.Dial(ctx, strings.Join(urls, ","), f.natsBucket, nil)
	if err != nil {
		return nil, noAnswer(ctx, "nats", where, f.bound, err)
	}
	return &conn{describe: "nats bucket " + f.natsBucket + " at " + where, store: s}, nil
}
