//go:build !simulateonly

package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kvbreaker/kvbreaker/backends/postgres"
	"github.com/kvbreaker/kvbreaker/tlsdiag"
)

// defaultPostgresTable is --postgres-table's default.
const defaultPostgresTable = "kvbreaker"

// checkPostgresURL checks --postgres-url without connecting.
// It takes what pgx takes: a postgres:// URL or a keyword/value string
// (host=db user=app dbname=app); messages show it redacted (redactDSN).
func (f *backendFlags) checkPostgresURL() error {
	if isURL(f.pgURL) && !strings.HasPrefix(f.pgURL, "postgres://") && !strings.HasPrefix(f.pgURL, "postgresql://") {
		return usagef("%s is %q: want a postgres:// URL, e.g. postgres://user@db:5432/app, or keyword/value settings (host=db user=app dbname=app)",
			f.name("postgres-url"), redactDSN(f.pgURL))
	}
	if _, err := pgxpool.ParseConfig(f.pgURL); err != nil {
		return usagef("%s is %q: %s", f.name("postgres-url"), redactDSN(f.pgURL), pgParseReason(err))
	}
	if _, err := postgres.Schema(f.pgTable); err != nil {
		return usagef("%s: %v", f.name("postgres-table"), err)
	}
	return nil
}

// openPostgres connects a small pool (a command makes a few calls) and
// checks that the server answers and the table exists.
func openPostgres(ctx context.Context, f *backendFlags) (*conn, error) {
	pool, cfg, addr, err := connectPostgres(ctx, f)
	if err != nil {
		return nil, err
	}
	s, err := postgres.New(pool, f.pgTable)
	if err != nil {
		pool.Close()
		return nil, err
	}
	if err := s.Ping(ctx); err != nil {
		pool.Close()
		if te, ok := errors.AsType[*tlsdiag.Error](err); ok {
			return nil, tlsFlagError(f, te)
		}
		if pe, ok := errors.AsType[*pgconn.PgError](err); ok && pe.Code == "42P01" {
			return nil, fmt.Errorf("postgres: table %s does not exist at %s: %s", f.pgTable, addr, createHint)
		}
		return nil, noAnswer(ctx, "postgres", addr, f.bound, pgServerError(addr, f, cfg, err))
	}
	return &conn{describe: "postgres table " + f.pgTable + " at " + addr, store: &pgStore{Store: s, pool: pool}, purge: pgPurge(pool, f.pgTable)}, nil
}

// createHint is how an error about a missing table says to create it.
const createHint = `create it with "kvbreaker init" and the same flags, or run what "kvbreaker init --print" shows`

// connectPostgres checks that the server's port accepts a connection and
// returns a small pool and the address it connects to (host:port, or a unix
// socket's path), for messages.
func connectPostgres(ctx context.Context, f *backendFlags) (*pgxpool.Pool, *pgxpool.Config, string, error) {
	cfg, err := pgxpool.ParseConfig(f.pgURL)
	if err != nil {
		return nil, nil, "", usagef("%s is %q: %s", f.name("postgres-url"), redactDSN(f.pgURL), pgParseReason(err))
	}
	cfg.MaxConns = 2
	cfg.ConnConfig.ConnectTimeout = dialTimeout
	cc := cfg.ConnConfig
	addr := net.JoinHostPort(cc.Host, strconv.Itoa(int(cc.Port)))
	network := "tcp"
	if strings.HasPrefix(cc.Host, "/") {
		addr, network = cc.Host+"/.s.PGSQL."+strconv.Itoa(int(cc.Port)), "unix"
	}
	dctx, cancel := context.WithTimeout(ctx, dialTimeout)
	c, err := (&net.Dialer{}).DialContext(dctx, network, addr)
	cancel()
	if err != nil {
		return nil, nil, "", &reachError{backend: "postgres", endpoint: addr, why: dialCause(err), err: err}
	}
	c.Close()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, nil, "", fmt.Errorf("postgres at %s: %w", addr, err)
	}
	return pool, cfg, addr, nil
}

// pgPurge deletes a row whatever it holds: check's cleanup removes the
// tombstones and expired rows its writes left, which the store keeps until
// its purge (postgres.WithPurgeDelay after expiry).
func pgPurge(pool *pgxpool.Pool, table string) func(ctx context.Context, fullKey string) (int, error) {
	sql := `DELETE FROM "` + table + `" WHERE key = $1` // table passed postgres.Schema's check
	return func(ctx context.Context, fullKey string) (int, error) {
		tag, err := pool.Exec(ctx, sql, fullKey)
		if err != nil {
			return 0, fmt.Errorf("postgres: purge %q: %w", fullKey, err)
		}
		return int(tag.RowsAffected()), nil
	}
}

// pgStore is the command's store: closing it closes the pool too.
type pgStore struct {
	*postgres.Store
	pool *pgxpool.Pool
}

func (s *pgStore) Close() error {
	err := s.Store.Close()
	s.pool.Close()
	return err
}
