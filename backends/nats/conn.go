package nats

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"

	natsgo "github.com/nats-io/nats.go"

	"github.com/kvbreaker/kvbreaker/adapter"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/tlsdiag"
)

// connWatch turns the connection's status changes into contexts: each
// disconnection cancels the current epoch's context (with
// ErrConnectionLost) and starts a new one. A request in flight is bound to
// the epoch it was sent in, so a broken connection ends it at once: nats.go
// would otherwise wait for an answer that can no longer come until the
// caller's context ends. up is closed while the connection is up, so a
// call made while it reconnects waits for it.
type connWatch struct {
	nc     *natsgo.Conn
	ch     chan natsgo.Status
	done   chan struct{}
	mu     sync.Mutex
	epoch  context.Context
	cancel context.CancelCauseFunc
	up     chan struct{}
	isUp   bool
}

func watchConn(nc *natsgo.Conn) *connWatch {
	w := &connWatch{
		nc:   nc,
		ch:   nc.StatusChanged(natsgo.CONNECTED, natsgo.DISCONNECTED, natsgo.RECONNECTING, natsgo.CLOSED),
		done: make(chan struct{}),
		up:   make(chan struct{}),
	}
	w.epoch, w.cancel = context.WithCancelCause(context.Background())
	if nc.Status() == natsgo.CONNECTED {
		close(w.up)
		w.isUp = true
	}
	go func() {
		defer close(w.done)
		for st := range w.ch {
			w.mu.Lock()
			if st == natsgo.CONNECTED {
				if !w.isUp {
					close(w.up)
					w.isUp = true
				}
			} else {
				w.cancel(ErrConnectionLost)
				w.epoch, w.cancel = context.WithCancelCause(context.Background())
				if w.isUp {
					w.up = make(chan struct{})
					w.isUp = false
				}
			}
			w.mu.Unlock()
		}
	}()
	return w
}

// connected waits until the connection is up and returns the epoch's
// context; it fails when ctx ends first or the connection is closed for
// good.
func (w *connWatch) connected(ctx context.Context) (context.Context, error) {
	for {
		w.mu.Lock()
		epoch, up := w.epoch, w.up
		w.mu.Unlock()
		switch w.nc.Status() {
		case natsgo.CONNECTED:
			return epoch, nil
		case natsgo.CLOSED:
			return nil, natsgo.ErrConnectionClosed
		}
		// The status event may trail the status: look again shortly.
		t := time.NewTimer(20 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("%w: %w", ErrNotConnected, context.Cause(ctx))
		case <-up:
		case <-t.C:
		}
		t.Stop()
	}
}

// stop ends the watch and waits for its goroutine.
func (w *connWatch) stop() {
	w.nc.RemoveStatusListener(w.ch)
	<-w.done
	w.mu.Lock()
	w.cancel(ErrClosed)
	w.mu.Unlock()
}

// request sends msg and waits for its answer within ctx. An ended ctx
// sends nothing. A request that met no responders reached no one, so it is
// sent again, for up to NoRespondersWait within ctx: a member learns of a
// stream's subjects a moment after the stream exists (or changes leader),
// and nats.go's JetStream publish retries the same way. While the
// connection is down the request waits for it within ctx, unsent (ErrNotConnected when ctx ends first): a request
// nats.go buffered until it reconnects could be applied long after the
// caller gave up. A connection that breaks before the answer returns
// ErrConnectionLost.
func (s *Store) request(ctx context.Context, msg *natsgo.Msg) (*natsgo.Msg, error) {
	var waited time.Duration
	wait := 25 * time.Millisecond
	for {
		resp, err := s.requestOnce(ctx, msg)
		if !errors.Is(err, natsgo.ErrNoResponders) || waited >= NoRespondersWait {
			return resp, err
		}
		wait = min(wait, NoRespondersWait-waited)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, err
		case <-t.C:
		}
		waited += wait
		wait = min(2*wait, 250*time.Millisecond)
	}
}

// NoRespondersWait bounds how long a request that meets no responders is
// sent again (see request).
const NoRespondersWait = 2 * time.Second

// requestOnce sends msg once and waits for its answer within ctx.
func (s *Store) requestOnce(ctx context.Context, msg *natsgo.Msg) (*natsgo.Msg, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if s.closed.Load() {
		return nil, ErrClosed
	}
	epoch, err := s.conn.connected(ctx)
	if err != nil {
		return nil, err
	}
	rctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(epoch, func() { cancel(context.Cause(epoch)) })
	defer stop()
	resp, err := s.nc.RequestMsgWithContext(rctx, msg)
	if err != nil {
		if cause := context.Cause(rctx); ctx.Err() == nil && cause != nil && !errors.Is(cause, context.Canceled) {
			return nil, cause
		}
		return nil, err
	}
	return resp, nil
}

// Connection settings of Dial.
const (
	// connectTimeout bounds Dial's TCP connection and NATS handshake.
	connectTimeout = 2 * time.Second
	// ReconnectWait is how long Dial's connection waits between
	// reconnection attempts; it retries for ever until Close.
	ReconnectWait = 250 * time.Millisecond
)

// Dial connects to the NATS servers at urls (comma-separated
// "nats://host:4222" as nats.Connect takes them; user information in a URL
// is used to authenticate but never shown in errors) with natsOpts (TLS,
// credentials: nats.go's options, applied after Dial's own) and returns a
// Store in bucket that owns the connection: Close closes it. The
// connection reconnects for ever and buffers nothing while it does, so a
// call while the server is away fails at once. A server that refuses the
// connection fails Dial within 2 s, saying why (each server's "connection
// refused", "no such host"), one that does not answer when ctx ends
// (adapter.DefaultDialTimeout, 5 s, without a deadline); both match
// driver.ErrUnreachable. ctx does not bound the Store's later life.
func Dial(ctx context.Context, urls, bucket string, natsOpts []natsgo.Option, opts ...Option) (*Store, error) {
	problems := adapter.Problems{Backend: backend}
	if strings.TrimSpace(urls) == "" {
		problems.Add("server URL", `""`, "give nats://host:4222 (comma-separated for several)")
	}
	o, err := newOptions(bucket, opts, &problems)
	if err != nil {
		return nil, err
	}
	ctx, cancel := adapter.DialContext(ctx, adapter.DefaultDialTimeout)
	defer cancel()
	all := append([]natsgo.Option{
		natsgo.Name("kvbreaker"),
		natsgo.Timeout(connectTimeout),
		natsgo.MaxReconnects(-1),
		natsgo.ReconnectWait(ReconnectWait),
		natsgo.ReconnectBufSize(-1),
		natsgo.NoCallbacksAfterClientClose(),
		// nats.go prints asynchronous errors (a reset socket, a slow
		// consumer) by default; the calls report what matters.
		natsgo.ErrorHandler(func(*natsgo.Conn, *natsgo.Subscription, error) {}),
	}, natsOpts...)
	// A server's refusal of a missing client certificate may reach the
	// client as a broken pipe or a reset rather than its alert, by timing:
	// the watch names it either way.
	var certs *tlsdiag.CertWatch
	all = append(all, func(o *natsgo.Options) error {
		if o.TLSConfig != nil {
			o.TLSConfig, certs = tlsdiag.WatchClientCert(o.TLSConfig)
		}
		return nil
	})
	shown := redactURLs(urls)
	type result struct {
		nc  *natsgo.Conn
		err error
	}
	done := make(chan result, 1)
	go func() {
		nc, err := natsgo.Connect(urls, all...)
		done <- result{nc, err}
	}()
	var r result
	select {
	case r = <-done:
	case <-ctx.Done():
		go func() {
			if r := <-done; r.nc != nil {
				r.nc.Close()
			}
		}()
		return nil, opError("dial", "", &driver.UnreachableError{Backend: backend, Endpoints: shown, Reason: "no answer before " + ctx.Err().Error(), Err: ctx.Err()})
	}
	if r.err != nil {
		if te := certs.Refused(backend, strings.Join(shown, ","), r.err); te != nil {
			return nil, opError("dial", "", te)
		}
		return nil, opError("dial", "", whyUnreachable(ctx, urls, shown, r.err))
	}
	s, err := newStore(ctx, r.nc, true, bucket, o)
	if err != nil {
		r.nc.Close()
		return nil, err
	}
	return s, nil
}

// whyUnreachable is the error of a connection nats.go could not make
// (err), naming the servers as shown. nats.go's "no servers available for
// connection" does not say why: when no server accepts a TCP connection,
// each one's dial does ("cannot reach nats at host:4222: connection
// refused", "no such host"), host and port as nats.go names them.
func whyUnreachable(ctx context.Context, urls string, shown []string, err error) error {
	own := &driver.UnreachableError{Backend: backend, Endpoints: shown, Reason: adapter.DialReason(err), Err: err}
	if !errors.Is(err, natsgo.ErrNoServers) {
		return own
	}
	var errs []error
	for raw := range strings.SplitSeq(urls, ",") {
		if raw = strings.TrimSpace(raw); !strings.Contains(raw, "://") {
			raw = "nats://" + raw // as nats.go reads a bare host:port
		}
		u, perr := url.Parse(raw)
		if perr != nil || u.Host == "" {
			return own
		}
		addr := net.JoinHostPort(u.Hostname(), cmp.Or(u.Port(), "4222"))
		derr := adapter.CheckDial(ctx, backend, "tcp", addr, connectTimeout)
		if derr == nil { // it accepts now: nats.go's own words stand
			return own
		}
		errs = append(errs, derr)
	}
	return errors.Join(errs...)
}

// redactURLs is redactURL of each comma-separated URL.
func redactURLs(urls string) []string {
	var out []string
	for u := range strings.SplitSeq(urls, ",") {
		if u = strings.TrimSpace(u); u != "" {
			out = append(out, redactURL(u))
		}
	}
	return out
}

// redactURL drops user information (a token, user:password) from a URL.
func redactURL(raw string) string {
	if !strings.Contains(raw, "://") {
		if _, _, err := net.SplitHostPort(raw); err == nil {
			return raw
		}
	}
	u, err := url.Parse(raw)
	if err != nil {
		if i := strings.LastIndex(raw, "@"); i >= 0 {
			return raw[i+1:]
		}
		return raw
	}
	u.User = nil
	return u.String()
}
