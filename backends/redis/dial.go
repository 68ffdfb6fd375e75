package redis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/kvbreaker/kvbreaker/driver"
)

const (
	// ConnectTimeout is the dial timeout Dial gives a client whose URL sets
	// none: a refused or unroutable address fails within it.
	ConnectTimeout = 2 * time.Second
	// DefaultDialTimeout bounds Dial when its context has no deadline.
	DefaultDialTimeout = 5 * time.Second
)

// ErrUnreachable matches (errors.Is) the error of Dial when the server did
// not answer: it refused the connection, or accepted it but did not answer
// before the context ended. The error is then a *driver.OpError whose cause
// is an *UnreachableError. It is an alias of driver.ErrUnreachable, so
// matching either matches every backend's.
var ErrUnreachable = driver.ErrUnreachable

// UnreachableError says why Dial could not reach the server: "cannot reach
// redis at 127.0.0.1:6379: connection refused", or "…: it accepted the
// connection but did not answer within 5s". It matches ErrUnreachable and
// unwraps to the cause. It is an alias of driver.UnreachableError;
// Endpoints holds the one host:port, without credentials.
type UnreachableError = driver.UnreachableError

// Dial connects to the server at url ("redis://[:password@]host:port/db",
// "rediss://…" for TLS; see redis.ParseURL; the password is neither shown in
// errors nor logged) and returns a Store that owns the client: Close closes
// it. Dial confirms the server answers a PING: against a port where nothing
// listens it fails within ConnectTimeout with "cannot reach redis at
// <addr>: connection refused"; against a server that accepts but does not
// answer it fails when ctx ends (DefaultDialTimeout when ctx has no
// deadline), saying so. Both match ErrUnreachable. ctx does not bound the
// Store's later life. An invalid URL or option is a *driver.OptionError.
func Dial(ctx context.Context, url string, opts ...Option) (*Store, error) {
	o, err := goredis.ParseURL(url)
	if err != nil {
		return nil, errors.Join(optionError("URL", redactURL(url), "give redis://host:port/db or rediss://host:port/db ("+err.Error()+")"))
	}
	if o.DialTimeout == 0 {
		o.DialTimeout = ConnectTimeout
	}
	o.ContextTimeoutEnabled = true
	c := goredis.NewClient(o)
	s, err := New(c, opts...)
	if err != nil {
		c.Close()
		return nil, err
	}
	s.owns = true
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultDialTimeout)
		defer cancel()
	}
	start := time.Now()
	if err := c.Ping(ctx).Err(); err != nil {
		c.Close()
		return nil, opError("dial", "", unreachable(o.Addr, err, time.Since(start)))
	}
	return s, nil
}

// unreachable explains a failed first request.
func unreachable(addr string, err error, waited time.Duration) error {
	ue := &UnreachableError{Backend: "redis", Endpoints: []string{addr}, Err: err}
	var dns *net.DNSError
	var op *net.OpError
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		ue.Reason = driver.DialReason(err)
	case errors.As(err, &dns):
		// The resolver's whole answer, as this message has always shown it
		// (driver.DialReason shortens a missing name to "no such host").
		ue.Reason = dns.Error()
	case errors.As(err, &op) && op.Op == "dial":
		ue.Reason = driver.DialReason(err)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled), isTimeout(err):
		ue.Reason = fmt.Sprintf("it accepted the connection but did not answer within %v", waited.Round(10*time.Millisecond))
	default:
		return err // the server answered with an error (auth, …)
	}
	return ue
}

// redactURL drops the password from a Redis URL for messages.
func redactURL(u string) string {
	scheme, rest, ok := cutScheme(u)
	if !ok {
		return u
	}
	if i := lastAt(rest); i >= 0 {
		rest = rest[i+1:]
	}
	return scheme + "://" + rest
}

func cutScheme(u string) (string, string, bool) {
	for i := 0; i+2 < len(u); i++ {
		if u[i:i+3] == "://" {
			return u[:i], u[i+3:], true
		}
	}
	return "", "", false
}

// lastAt is the index of the last '@' before the first '/', or -1.
func lastAt(s string) int {
	at := -1
	for i := 0; i < len(s) && s[i] != '/'; i++ {
		if s[i] == '@' {
			at = i
		}
	}
	return at
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
