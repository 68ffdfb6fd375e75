package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/cmd/kvbreaker/internal/serve"
)

var dashboardLong = `Serves the status page of kvbreaker serve straight over a store, read-only:
the open and half-open circuits under --prefix (listed as kvbreaker list
lists them, so the store must be able to list its keys), their failures in
the window, retry-at and probes in flight, with the store's latency and
clock offset, updated four times a second. Nothing in it writes to the
store: it takes no decision (asking would claim probes), records no outcome
and resets nothing; the API's routes that would answer 405, and the store
below it refuses any write. Reset a circuit with kvbreaker reset, or from
the page of kvbreaker serve.

The page asks for a token with the read permission (GET /v1/status,
/v1/circuits and /v1/circuits/HOST need it), from --tokens-file or
$KVBREAKER_SERVE_TOKENS, one a line: NAME PERMISSIONS TOKEN, e.g.
  oncall read 3f0c9a...   (openssl rand -hex 32)
or a client certificate verified against --client-ca
(--client-cert-permissions read). The tokens and TLS flags and their
environment variables are serve's, so one tokens file can serve both.

It listens on 127.0.0.1:8421 unless --listen says otherwise.

` + backendFlagsHelp

const dashboardExample = `  KVBREAKER_SERVE_TOKENS="oncall read $(openssl rand -hex 32)" \
    kvbreaker dashboard --backend redis --redis-url redis://127.0.0.1:6379/0 --prefix prod/`

type dashboardFlags struct {
	bf          backendFlags
	lf          listenFlags
	timeout     time.Duration
	callTimeout time.Duration
}

func newDashboardCmd() *cobra.Command {
	var f dashboardFlags
	cmd := &cobra.Command{
		Use:     "dashboard --backend NAME [connection flags] [flags]",
		Short:   "serve the status page over a store, read-only",
		Long:    dashboardLong,
		Example: dashboardExample,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDashboard(cmd.Context(), &f, cmd.ErrOrStderr(), commandSecrets(cmd.Flags()))
		},
	}
	fs := cmd.Flags()
	f.bf.register(fs)
	f.lf.register(fs, "127.0.0.1:8421", "KVBREAKER_DASHBOARD_LISTEN")
	fs.DurationVar(&f.timeout, "timeout", 30*time.Second, "give up connecting to the store after this long")
	fs.DurationVar(&f.callTimeout, "call-timeout", kvbreaker.Settings{}.WithDefaults().CallTimeout, "Settings.CallTimeout: bounds each store call")
	completeFlags(cmd)
	return cmd
}

func (f *dashboardFlags) validate() error {
	if err := f.bf.applyEnv(); err != nil {
		return err
	}
	if err := f.lf.validate(); err != nil {
		return err
	}
	if f.timeout <= 0 || f.callTimeout <= 0 {
		return usagef("--timeout and --call-timeout must be positive")
	}
	return f.bf.validate()
}

func runDashboard(ctx context.Context, f *dashboardFlags, stderr io.Writer, secrets []string) error {
	if err := f.validate(); err != nil {
		return err
	}
	toks, certPerms, err := f.lf.credentials(serve.PermRead, "oncall read")
	if err != nil {
		return err
	}
	if _, err := f.lf.tlsConfig(); err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cctx, cancel := context.WithTimeout(ctx, f.timeout)
	c, err := f.bf.open(cctx, f.timeout)
	cancel()
	if err != nil {
		return err
	}
	defer c.close()
	// The store refuses writes below the prefix, so that whatever the
	// Breaker is asked, the dashboard cannot change a circuit.
	store, err := kvbreaker.Prefixed(serve.ReadOnly(c.store), f.bf.prefix)
	if err != nil {
		return err
	}
	stats := serve.NewStats(false)
	b, err := kvbreaker.New(store, kvbreaker.Settings{
		ClockSkew: f.bf.clockSkew, CallTimeout: f.callTimeout, Logger: logger, Observer: stats.Observer(),
	})
	if err != nil {
		return usagef("%v", err)
	}
	srv, err := serve.New(serve.Config{
		Breaker: b, ReadOnly: true, Tokens: toks, ClientCertPerms: certPerms,
		Redact: func(s string) string { return scrub(s, secrets) }, Logger: logger, Stats: stats,
	})
	if err == nil {
		about := fmt.Sprintf("%s, prefix %q, read-only, %d token(s)", c.describe, f.bf.prefix, len(toks))
		err = f.lf.serveHTTP(ctx, "dashboard", about, srv.Handler(), logger, stderr)
	}
	cctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), f.lf.shutdownTimeout)
	defer cancel()
	if err = errors.Join(err, b.Close(cctx)); err != nil {
		return fmt.Errorf("dashboard: %w", err)
	}
	fmt.Fprintln(stderr, "kvbreaker dashboard: stopped")
	return nil
}
