package redis

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"regexp"
	"strings"
	"syscall"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/kvbreaker/kvbreaker/adapter"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/tlsdiag"
)

const (
	// connectTimeout is the dial timeout Dial gives a client whose URL sets
	// none: a refused or unroutable address fails within it.
	connectTimeout = 2 * time.Second
	// probeTimeout bounds the check whether a server that dropped a
	// plain-text connection speaks TLS.
	probeTimeout = 500 * time.Millisecond
)

// Dial connects to the server at rawURL ("redis://[:password@]host:port/db",
// "rediss://…" for TLS, with go-redis's TLS configuration or WithTLSConfig's; see redis.ParseURL)
// and returns a Store that owns the client: Close closes it. Dial confirms the server answers a PING: against a port where nothing
// listens it fails within 2 s with "cannot reach redis at
// <addr>: connection refused"; against a server that accepts but does not
// answer it fails when ctx ends (adapter.DefaultDialTimeout, 5 s, when
// ctx has no deadline), saying so. Both match driver.ErrUnreachable. A TLS mismatch (an
// untrusted certificate, a client certificate the server requires, a
// redis:// URL to a server that speaks TLS) is a *tlsdiag.Error. A server's
// refusal (a wrong password, a database it lacks) names the server as
// Store.String does ("redis at host:port db N: WRONGPASS …"), and Explain
// says what to change. ctx does not bound the
// Store's later life. An invalid URL or option is a *driver.OptionError.
// No error shows rawURL's userinfo, the value of a query option other than
// go-redis's (password=… is none), or any of a string that is not a URL (a
// keyword/value string), also when rawURL is malformed. WithClusterCheck
// makes it refuse a node of a Redis Cluster.
func Dial(ctx context.Context, rawURL string, opts ...Option) (*Store, error) {
	o, err := goredis.ParseURL(rawURL)
	if err != nil {
		return nil, urlError(rawURL, err)
	}
	s, err := dial(ctx, opts, dialTarget{
		tls: &o.TLSConfig, dialTimeout: &o.DialTimeout, contextTimeout: &o.ContextTimeoutEnabled,
		tlsURL: "rediss://host:port/db", addrs: []string{o.Addr},
	}, func() goredis.UniversalClient { return goredis.NewClient(o) },
		func(ctx context.Context, where string, err error, waited time.Duration) error {
			if o.TLSConfig == nil && (errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)) {
				// A TLS server drops a plain-text client's first command.
				pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), probeTimeout)
				te := tlsdiag.Probe(pctx, "redis", o.Addr, o.Addr, nil)
				cancel()
				if te != nil {
					te.Fix = "use a rediss:// URL"
					return te
				}
			}
			return unreachable(ctx, where, o.Addr, err, waited)
		})
	if err == nil && resolve(opts).clusterCheck {
		if err = checkClusterMode(ctx, s.Client(), o.Addr); err != nil {
			_ = s.Close()
			return nil, err
		}
	}
	return s, err
}

// dialTarget is what dial sets in go-redis's Options or ClusterOptions,
// whichever the URL was parsed into, and what it says of them.
type dialTarget struct {
	tls            **tls.Config
	dialTimeout    *time.Duration
	contextTimeout *bool
	tlsURL         string   // the URL's form that asks for TLS, for WithTLSConfig's fix
	addrs          []string // the addresses a client-certificate refusal names
}

// dial is Dial's and DialCluster's one way from parsed options to a Store
// that owns its client: WithTLSConfig merged into the URL's TLS (a
// redis:// URL has none to merge into: an option error), connectTimeout
// where the URL sets no dial timeout, the client-certificate watch, the
// client connect makes, and the PING bounded by ctx or
// adapter.DefaultDialTimeout.
// failed explains a PING's error that is not a refused client certificate
// (ctx is the PING's, where the client's deployment, waited how long it
// took).
func dial(ctx context.Context, opts []Option, t dialTarget, connect func() goredis.UniversalClient,
	failed func(ctx context.Context, where string, err error, waited time.Duration) error) (*Store, error) {
	so := resolve(opts)
	var problems []error
	if so.tlsConfig != nil {
		if *t.tls == nil {
			problems = append(problems, optionError("WithTLSConfig", "with a redis:// URL", "use "+t.tlsURL+", which asks for TLS"))
		} else {
			cfg := so.tlsConfig.Clone()
			if cfg.ServerName == "" {
				// rediss:// made the URL's TLS configuration, naming its
				// (first) host.
				cfg.ServerName = (*t.tls).ServerName
			}
			*t.tls = cfg
		}
		so.tlsConfig = nil
	}
	if *t.dialTimeout == 0 {
		*t.dialTimeout = connectTimeout
	}
	*t.contextTimeout = true
	// A server's refusal of a missing client certificate may reach the
	// first PING as a reset rather than its alert: the watch names it.
	var certs *tlsdiag.CertWatch
	if *t.tls != nil {
		*t.tls, certs = tlsdiag.WatchClientCert(*t.tls)
	}
	c := connect()
	s, err := newStore(c, so, problems)
	if err != nil {
		c.Close()
		return nil, err
	}
	s.owns = true
	ctx, cancel := adapter.DialContext(ctx, adapter.DefaultDialTimeout)
	defer cancel()
	start := time.Now()
	if err := c.Ping(ctx).Err(); err != nil {
		c.Close()
		if te := certs.Refused("redis", strings.Join(t.addrs, ", "), err); te != nil {
			return nil, opError("dial", "", te)
		}
		return nil, opError("dial", "", failed(ctx, deployment(c), err, time.Since(start)))
	}
	return s, nil
}

// unreachable explains a failed first request to addr, of the deployment
// where (Store.String's name), made within ctx: a server that could not be
// reached is a *driver.UnreachableError naming addr, any other error (the
// server's answer: a wrong password, an ACL user without PING) is named by
// where, which Explain takes from it.
func unreachable(ctx context.Context, where, addr string, err error, waited time.Duration) error {
	ue := &driver.UnreachableError{Backend: "redis", Endpoints: []string{addr}, Err: err}
	var dns *net.DNSError
	var op *net.OpError
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		ue.Reason = adapter.DialReason(err)
	case errors.As(err, &dns):
		// The resolver's whole answer, as this message has always shown it
		// (adapter.DialReason shortens a missing name to "no such host").
		ue.Reason = dns.Error()
	case errors.As(err, &op) && op.Op == "dial":
		ue.Reason = adapter.DialReason(err)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled), isTimeout(err):
		ue.Reason = fmt.Sprintf("it accepted the connection but did not answer within %v", waited.Round(10*time.Millisecond))
		if end := adapter.Ended(ctx); end != nil && !errors.Is(err, end) {
			// A ClusterClient reports the socket deadline it took from
			// ctx as its own i/o timeout: the error matches ctx's, as a
			// Client's does.
			ue.Err = fmt.Errorf("%w (%w)", err, end)
		}
	default:
		return &refusal{where: where, err: err}
	}
	return ue
}

// urlError explains why ParseURL refused raw without quoting any part of it
// that may be a secret. A string that is not a URL (a keyword/value string,
// an address) is not shown at all. A URL that url.Parse refuses is shown
// only by its scheme, with url.Parse's reason less what it quotes (the whole
// URL, the port or escape it refused: in a malformed URL, parts of the
// password). Any other URL is shown without its userinfo and fragment and
// with every query value but those of go-redis's options masked, and
// go-redis's reason only when it contains none of what was left out.
func urlError(raw string, err error) error {
	const fix = "give redis://[[user]:password@]host:port/db or rediss://…, with reserved characters in the password %-escaped"
	scheme, _, ok := strings.Cut(raw, "://")
	if !ok {
		return optionError("URL", "(not shown: not a redis:// URL)", fix)
	}
	u, perr := url.Parse(raw)
	if perr != nil {
		reason := perr.Error()
		if ue, ok := errors.AsType[*url.Error](perr); ok {
			reason = ue.Err.Error()
		}
		reason = quoted.ReplaceAllString(reason, "…")
		return optionError("URL", scheme+"://… (malformed, not shown)", fix+" (url.Parse: "+reason+")")
	}
	shown, secrets := redactURL(u)
	reason := err.Error()
	for _, sec := range secrets {
		if sec != "" && strings.Contains(reason, sec) {
			reason = "the parser's reason quotes part of the credentials; not shown"
			break
		}
	}
	return optionError("URL", shown, fix+" ("+reason+")")
}

// quoted matches a string as %q writes it.
var quoted = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)

// shownOptions are the query options of go-redis's URLs whose values
// redactURL shows.
var shownOptions = map[string]bool{
	"db": true, "protocol": true, "client_name": true, "addr": true,
	"max_retries": true, "min_retry_backoff": true, "max_retry_backoff": true,
	"dial_timeout": true, "read_timeout": true, "write_timeout": true,
	"pool_fifo": true, "pool_size": true, "pool_timeout": true,
	"min_idle_conns": true, "max_idle_conns": true, "max_active_conns": true,
	"conn_max_idle_time": true, "conn_max_lifetime": true, "skip_verify": true,
}

// redactURL returns u for messages: without its userinfo and fragment, and
// with the value of every query option not in shownOptions masked. secrets
// are what it left out.
func redactURL(u *url.URL) (shown string, secrets []string) {
	c := *u
	if c.User != nil {
		pw, _ := c.User.Password()
		secrets = append(secrets, c.User.Username(), pw, c.User.String())
		c.User = nil
	}
	if c.Fragment != "" {
		secrets = append(secrets, c.Fragment, c.RawFragment)
		c.Fragment, c.RawFragment = "", ""
	}
	if c.RawQuery != "" {
		q := c.Query()
		for k, vs := range q {
			if shownOptions[k] {
				continue
			}
			for i, v := range vs {
				secrets = append(secrets, v, url.QueryEscape(v))
				vs[i] = "xxxxx"
			}
		}
		c.RawQuery = q.Encode()
	}
	return c.String(), secrets
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
