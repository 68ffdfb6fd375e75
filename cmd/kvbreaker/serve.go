package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/cmd/kvbreaker/internal/serve"
)

var serveLong = `Runs one Breaker in this process behind an HTTP/JSON API, so that workers
in any language share the fleet's circuits with the Go workers that use the
library: ask before each delivery (POST /v1/decide: send, hold until
retry_at, probe, or drop), then report what it said about its host (POST
/v1/outcomes: success, reachable-failure, failure, or ignore, which with a
probe_id gives the probe up). GET /v1/circuits lists circuits, GET
/v1/circuits/HOST inspects one, DELETE /v1/circuits/HOST resets one.
GET /metrics is the Breaker's metrics in the Prometheus text format. The
API is described by the OpenAPI document at /openapi.json.

Every /v1 route and /metrics needs "Authorization: Bearer TOKEN" with a
token that carries its permission (decide, report, read, reset, metrics),
or a client certificate verified against --client-ca that carries it
(--client-cert-permissions). Tokens come from --tokens-file or
$KVBREAKER_SERVE_TOKENS, one a line: NAME PERMISSIONS TOKEN, e.g.
  node-workers decide,report 3f0c9a...   (openssl rand -hex 32)
  oncall       read,reset    b81d44...
  prometheus   metrics       5e27d1...
A request without a valid token is refused before its body is read.

When the store fails, a decision is the Breaker's without it: send, or hold
for --release-interval with --fail-closed; the verdict carries the error.
An outcome the store failed to record says so (report it again).

SIGINT or SIGTERM stops taking requests, lets those in flight finish
(within --shutdown-timeout), then sends the store's queued writes and
closes it.

It listens on 127.0.0.1:8420 unless --listen says otherwise.

` + backendFlagsHelp

const serveExample = `  KVBREAKER_SERVE_TOKENS="workers decide,report $(openssl rand -hex 32)" \
    kvbreaker serve --backend redis --redis-url redis://127.0.0.1:6379/0 --prefix prod/
  kvbreaker serve --backend postgres --postgres-url postgres://app@db/app \
    --tokens-file /etc/kvbreaker/tokens --listen 0.0.0.0:8443 \
    --tls-cert server.pem --tls-key server-key.pem --client-ca clients-ca.pem`

// tokensEnv holds tokens inline (the tokens file's format).
const tokensEnv = "KVBREAKER_SERVE_TOKENS"

// listenFlags are where and how serve and dashboard listen, and whom they
// let in.
type listenFlags struct {
	envFlags
	listen, tokensFile       string
	tlsCert, tlsKey          string
	clientCA, clientCertPerm string
	shutdownTimeout          time.Duration
}

// register adds the listener's flags to fs, each with a variable: the
// listen address's, listenEnv, is the command's own, so that serve and
// dashboard can run from one environment. The tokens themselves can come
// from the environment but never from a flag: a flag's value shows in ps.
func (l *listenFlags) register(fs *pflag.FlagSet, defaultListen, listenEnv string) {
	l.fs = fs
	fs.StringVar(&l.listen, "listen", defaultListen, l.withEnv("listen", listenEnv, "address to listen on"))
	fs.StringVar(&l.tokensFile, "tokens-file", "", l.withEnv("tokens-file", "KVBREAKER_SERVE_TOKENS_FILE", "`file` of bearer tokens, one a line: NAME PERMISSIONS TOKEN (or the lines themselves in $"+tokensEnv+")"))
	fs.StringVar(&l.tlsCert, "tls-cert", "", l.withEnv("tls-cert", "KVBREAKER_SERVE_TLS_CERT", "PEM server certificate `file` (turns TLS on; with --tls-key)"))
	fs.StringVar(&l.tlsKey, "tls-key", "", l.withEnv("tls-key", "KVBREAKER_SERVE_TLS_KEY", "PEM server key `file`"))
	fs.StringVar(&l.clientCA, "client-ca", "", l.withEnv("client-ca", "KVBREAKER_SERVE_CLIENT_CA", "PEM `file` of the CA that signs client certificates: every connection must present one (mutual TLS)"))
	fs.StringVar(&l.clientCertPerm, "client-cert-permissions", "", l.withEnv("client-cert-permissions", "KVBREAKER_SERVE_CLIENT_CERT_PERMISSIONS", "permissions a verified client certificate carries without a token, e.g. decide,report"))
	fs.DurationVar(&l.shutdownTimeout, "shutdown-timeout", 30*time.Second, "on SIGTERM, how long requests in flight and the store's queued writes may take")
}

// validate applies the environment to the flags not given and checks
// them.
func (l *listenFlags) validate() error {
	if err := l.applyEnv(); err != nil {
		return err
	}
	if l.shutdownTimeout <= 0 {
		return usagef("--shutdown-timeout must be positive")
	}
	if (l.tlsCert == "") != (l.tlsKey == "") {
		return usagef("--tls-cert and --tls-key go together: give both, or neither for plain HTTP")
	}
	if l.clientCA != "" && l.tlsCert == "" {
		return usagef("--client-ca needs TLS: give --tls-cert and --tls-key too")
	}
	if l.clientCertPerm != "" && l.clientCA == "" {
		return usagef("--client-cert-permissions needs --client-ca (which client certificates to trust)")
	}
	if _, _, err := net.SplitHostPort(l.listen); err != nil {
		return usagef("%s is %q: want host:port, e.g. %s", l.name("listen"), l.listen, "127.0.0.1:8420")
	}
	return nil
}

type serveFlags struct {
	bf      backendFlags
	lf      listenFlags
	timeout time.Duration
	s       kvbreaker.Settings

	maxBody  int64
	maxBatch int
}

func newServeCmd() *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use:     "serve --backend NAME [connection flags] [flags]",
		Short:   "serve one Breaker over HTTP/JSON, for workers in any language",
		Long:    serveLong,
		Example: serveExample,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runServe(cmd.Context(), &f, cmd.ErrOrStderr(), commandSecrets(cmd.Flags()))
		},
	}
	fs := cmd.Flags()
	f.bf.register(fs)
	fs.DurationVar(&f.timeout, "timeout", 30*time.Second, "give up connecting to the store after this long")
	f.lf.register(fs, "127.0.0.1:8420", "KVBREAKER_SERVE_LISTEN")
	fs.Int64Var(&f.maxBody, "max-body", serve.DefaultMaxBody, "largest request body, in bytes")
	fs.IntVar(&f.maxBatch, "max-batch", serve.DefaultMaxBatch, "most deliveries or outcomes in one request")
	def := kvbreaker.Settings{}.WithDefaults()
	fs.IntVar(&f.s.FailureThreshold, "failure-threshold", def.FailureThreshold, "Settings.FailureThreshold: failures within --failure-window that open a circuit")
	fs.DurationVar(&f.s.FailureWindow, "failure-window", def.FailureWindow, "Settings.FailureWindow")
	fs.DurationVar(&f.s.RecoveryDelay, "recovery-delay", def.RecoveryDelay, "Settings.RecoveryDelay: an open circuit holds this long, then lets one probe through")
	fs.DurationVar(&f.s.HoldLimit, "hold-limit", def.HoldLimit, "Settings.HoldLimit: a message held this long is dropped")
	fs.DurationVar(&f.s.ReleaseInterval, "release-interval", def.ReleaseInterval, "Settings.ReleaseInterval")
	fs.BoolVar(&f.s.FailClosed, "fail-closed", false, "Settings.FailClosed: hold, not send, when the store fails")
	fs.IntVar(&f.s.CacheSize, "cache-size", 0, "Settings.CacheSize (0: no cache)")
	fs.DurationVar(&f.s.CacheStaleness, "cache-staleness", def.CacheStaleness, "Settings.CacheStaleness")
	fs.BoolVar(&f.s.Mirror, "mirror", false, "Settings.Mirror: follow the store's feed and decide locally")
	fs.DurationVar(&f.s.CallTimeout, "call-timeout", def.CallTimeout, "Settings.CallTimeout: bounds each store call")
	completeFlags(cmd)
	return cmd
}

func (f *serveFlags) validate() error {
	if err := f.bf.applyEnv(); err != nil {
		return err
	}
	if err := f.lf.validate(); err != nil {
		return err
	}
	if f.timeout <= 0 {
		return usagef("--timeout must be positive")
	}
	if f.maxBody <= 0 || f.maxBatch <= 0 {
		return usagef("--max-body and --max-batch must be positive")
	}
	return f.bf.validate()
}

// tokens reads the tokens from --tokens-file and $KVBREAKER_SERVE_TOKENS.
func (f *listenFlags) tokens() ([]serve.Token, error) {
	var toks []serve.Token
	if f.tokensFile != "" {
		b, err := os.ReadFile(f.tokensFile)
		if err != nil {
			return nil, usagef("--tokens-file: %v", err)
		}
		t, err := serve.ParseTokens(string(b), "--tokens-file "+f.tokensFile)
		if err != nil {
			return nil, usagef("%v", err)
		}
		toks = append(toks, t...)
	}
	if v := os.Getenv(tokensEnv); v != "" {
		t, err := serve.ParseTokens(strings.ReplaceAll(v, ";", "\n"), "$"+tokensEnv)
		if err != nil {
			return nil, usagef("%v", err)
		}
		toks = append(toks, t...)
	}
	return toks, nil
}

// tlsConfig is the listener's TLS, nil for plain HTTP.
func (f *listenFlags) tlsConfig() (*tls.Config, error) {
	if f.tlsCert == "" {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(f.tlsCert, f.tlsKey)
	if err != nil {
		return nil, usagef("--tls-cert/--tls-key: %v", err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if f.clientCA != "" {
		pem, err := os.ReadFile(f.clientCA)
		if err != nil {
			return nil, usagef("--client-ca: %v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, usagef("--client-ca %s holds no PEM certificate", f.clientCA)
		}
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// credentials reads the tokens and the client certificates' permissions,
// and refuses a setup in which no credential carries any of need; example
// is the line the message suggests, without its token.
func (f *listenFlags) credentials(need serve.Permission, example string) ([]serve.Token, serve.Permission, error) {
	toks, err := f.tokens()
	if err != nil {
		return nil, 0, err
	}
	var certPerms serve.Permission
	if f.clientCertPerm != "" {
		if certPerms, err = serve.ParsePermissions(f.clientCertPerm); err != nil {
			return nil, 0, usagef("--client-cert-permissions: %v", err)
		}
	}
	some := certPerms&need != 0
	for _, t := range toks {
		some = some || t.Perms&need != 0
	}
	if !some {
		what := "no tokens"
		if len(toks) > 0 || certPerms != 0 {
			what = fmt.Sprintf("no token carries %s", need)
		}
		return nil, 0, usagef("%s: every request would be refused; give --tokens-file FILE or $%s, lines of NAME PERMISSIONS TOKEN (e.g. \"%s $(openssl rand -hex 32)\"), or mutual TLS with --client-ca and --client-cert-permissions", what, tokensEnv, example)
	}
	return toks, certPerms, nil
}

// serveHTTP serves h on --listen until ctx ends, then stops taking
// requests and lets those in flight finish within --shutdown-timeout.
// name is the command, for what it prints; about says what it serves.
func (f *listenFlags) serveHTTP(ctx context.Context, name, about string, h http.Handler, logger *slog.Logger, stderr io.Writer) error {
	tlsCfg, err := f.tlsConfig()
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return fmt.Errorf("--listen %s: %w", f.listen, err)
	}
	hs := &http.Server{
		Handler:           h,
		TLSConfig:         tlsCfg,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	scheme := "http"
	if tlsCfg != nil {
		scheme = "https"
	}
	fmt.Fprintf(stderr, "kvbreaker %s: listening on %s://%s (%s); the API: %s://%s/openapi.json\n",
		name, scheme, ln.Addr(), about, scheme, ln.Addr())
	done := make(chan error, 1)
	go func() {
		if tlsCfg != nil {
			done <- hs.ServeTLS(ln, "", "")
		} else {
			done <- hs.Serve(ln)
		}
	}()
	var serveErr error
	select {
	case serveErr = <-done:
	case <-ctx.Done():
		fmt.Fprintf(stderr, "kvbreaker %s: shutting down: finishing requests in flight\n", name)
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), f.shutdownTimeout)
		serveErr = hs.Shutdown(sctx)
		cancel()
		<-done
	}
	if errors.Is(serveErr, http.ErrServerClosed) {
		serveErr = nil
	}
	return serveErr
}

func runServe(ctx context.Context, f *serveFlags, stderr io.Writer, secrets []string) error {
	if err := f.validate(); err != nil {
		return err
	}
	toks, certPerms, err := f.lf.credentials(serve.PermDecide|serve.PermReport|serve.PermRead|serve.PermReset|serve.PermMetrics, "workers decide,report")
	if err != nil {
		return err
	}
	if _, err := f.lf.tlsConfig(); err != nil {
		return err
	}
	redact := func(s string) string { return scrub(s, secrets) }
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

	cctx, cancel := context.WithTimeout(ctx, f.timeout)
	c, err := f.bf.open(cctx, f.timeout)
	cancel()
	if err != nil {
		return err
	}
	defer c.close()
	store, err := kvbreaker.Prefixed(c.store, f.bf.prefix)
	if err != nil {
		return err
	}
	settings := f.s
	settings.ClockSkew = f.bf.clockSkew
	settings.Logger = logger
	stats := serve.NewStats(settings.Mirror)
	metrics, err := serve.NewMetrics()
	if err != nil {
		return err
	}
	settings.Observer = kvbreaker.ComposeObservers(stats.Observer(), metrics.Observer())
	b, err := kvbreaker.New(store, settings)
	if err != nil {
		_ = metrics.Shutdown(context.WithoutCancel(ctx))
		return usagef("%v", err)
	}
	closeBreaker := func() error {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), f.lf.shutdownTimeout)
		defer cancel()
		// The meter provider outlives the Breaker, so that its last
		// writes are still counted.
		return errors.Join(b.Close(cctx), metrics.Shutdown(cctx))
	}
	srv, err := serve.New(serve.Config{
		Breaker: b, Tokens: toks, ClientCertPerms: certPerms,
		RecoveryDelay: settings.RecoveryDelay, MaxBody: f.maxBody, MaxBatch: f.maxBatch,
		Redact: redact, Logger: logger, Stats: stats, Metrics: metrics,
	})
	if err != nil {
		_ = closeBreaker()
		return err
	}
	about := fmt.Sprintf("%s, prefix %q, %d token(s)", c.describe, f.bf.prefix, len(toks))
	serveErr := f.lf.serveHTTP(ctx, "serve", about, srv.Handler(), logger, stderr)
	if ctx.Err() != nil {
		fmt.Fprintln(stderr, "kvbreaker serve: sending queued writes")
	}
	if err := closeBreaker(); err != nil {
		serveErr = errors.Join(serveErr, err)
	}
	if serveErr != nil {
		return fmt.Errorf("serve: %w", serveErr)
	}
	fmt.Fprintln(stderr, "kvbreaker serve: stopped")
	return nil
}
