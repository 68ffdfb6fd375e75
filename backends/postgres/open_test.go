package postgres_test

import (
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/kvbreaker/kvbreaker/backends/postgres"
	"github.com/kvbreaker/kvbreaker/driver"
)

// TestOpenOwnsItsPool: Open's store answers on a pool of its own, named by
// Endpoint and String, and its Close closes that pool (an acquire fails after it),
// while New's Close leaves the caller's pool open. A closed port is an
// *driver.UnreachableError before any pool is made.
func TestOpenOwnsItsPool(t *testing.T) {
	ctx := t.Context()
	cfg, err := postgres.ParseConfig(server.URL())
	if err != nil {
		t.Fatal(err)
	}
	s, err := postgres.Open(ctx, cfg, table)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := s.String(), "postgres table "+table+" at "+net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port))); got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	s.Close()
	if c, err := s.Pool().Acquire(ctx); err == nil {
		c.Release()
		t.Error("Open's pool still hands out connections after Close")
	}

	// The negative control: New's pool stays the caller's.
	pool := newPool(t, server.URL())
	n, err := postgres.New(pool, table)
	if err != nil {
		t.Fatal(err)
	}
	n.Close()
	if err := pool.Ping(ctx); err != nil {
		t.Errorf("New's Close closed the caller's pool: %v", err)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	shut, err := postgres.ParseConfig("postgres://u@" + ln.Addr().String() + "/db")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := postgres.Open(ctx, shut, table); !errors.Is(err, driver.ErrUnreachable) || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("Open at a closed port: %v, want an driver.UnreachableError saying connection refused", err)
	}
}
