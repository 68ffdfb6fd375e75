package postgres_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/kvbreaker/kvbreaker/backends/postgres"
	"github.com/kvbreaker/kvbreaker/internal/backendtest"
	"github.com/kvbreaker/kvbreaker/internal/testservers/pgtest"
)

// server is the PostgreSQL shared by the package's tests (the fault tests
// start their own); table is the table they share, isolated by prefixes.
var server *pgtest.Server

const table = "kvbreaker"

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	// Generous: on a machine whose cores are busy, MariaDB's data
	// directory alone has taken over 2 minutes to make; initdb is the
	// same kind of work.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	s, err := pgtest.Start(ctx)
	if err != nil {
		fmt.Fprintf(os.Stderr, "backends/postgres: cannot start the PostgreSQL the tests need: %v\n", err)
		return 1
	}
	defer s.Close()
	server = s
	pool, err := pgxpool.New(ctx, s.URL())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	err = postgres.CreateTable(ctx, pool, table)
	pool.Close()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	s.Close() // its watcher goroutines end with it
	closeCountingServer()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goroutines left behind: %v\n", err)
			return 1
		}
	}
	return code
}

var prefixSeq atomic.Int64

// uniquePrefix returns a key prefix no other test uses.
func uniquePrefix(t testing.TB) string {
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	return fmt.Sprintf("test/%s/%d/", name, prefixSeq.Add(1))
}

// newPool returns a pool on url, closed when t ends.
func newPool(t testing.TB, url string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// newRaw returns a Store over the shared server's table, with a pool of its
// own, closed when t ends.
func newRaw(t testing.TB, opts ...postgres.Option) *postgres.Store {
	t.Helper()
	s, err := postgres.New(newPool(t, server.URL()), table, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// prefixedStore is a Store under a prefix, forwarding List; isolate
// makes one.
type prefixedStore = backendtest.ListStore

var isolate = backendtest.Isolate

// newStore returns a Store over the shared server under a fresh prefix.
func newStore(t testing.TB, opts ...postgres.Option) prefixedStore {
	t.Helper()
	return isolate(t, newRaw(t, opts...), uniquePrefix(t))
}
