package mysql_test

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"go.uber.org/goleak"

	"github.com/kvbreaker/kvbreaker/backends/mysql"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/backendtest"
	"github.com/kvbreaker/kvbreaker/internal/testservers/mariadbtest"
)

// server is the MariaDB shared by the package's tests (the fault tests
// start their own); table is the table they share, isolated by prefixes.
var server *mariadbtest.Server

const table = "kvbreaker"

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	// The driver logs broken connections ("[mysql] … unexpected EOF") on
	// its own; the fault tests break many, and their errors are checked.
	_ = gomysql.SetLogger(log.New(io.Discard, "", 0))
	// Generous: on a fresh machine whose cores are busy, making the data
	// directory alone has taken over 2 minutes.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	s, err := mariadbtest.Start(ctx)
	if err != nil {
		fmt.Fprintf(os.Stderr, "backends/mysql: cannot start the MariaDB the tests need: %v\n", err)
		return 1
	}
	defer s.Close()
	server = s
	db, err := sql.Open("mysql", s.DSN())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	err = mysql.CreateTable(ctx, db, table)
	db.Close()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	s.Close()
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

// newDB returns a pool on dsn, closed when t ends.
func newDB(t testing.TB, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// newRaw returns a Store over the shared server's table, with a pool of its
// own, closed when t ends.
func newRaw(t testing.TB, opts ...mysql.Option) *mysql.Store {
	t.Helper()
	return mustNew(t, server.DSN(), append([]mysql.Option{mysql.WithEndpoint(server.Addr())}, opts...)...)
}

func mustNew(t testing.TB, dsn string, opts ...mysql.Option) *mysql.Store {
	t.Helper()
	s, err := mysql.New(newDB(t, dsn), table, opts...)
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
func newStore(t testing.TB, opts ...mysql.Option) prefixedStore {
	t.Helper()
	return isolate(t, newRaw(t, opts...), uniquePrefix(t))
}

func mustGet(t *testing.T, s driver.Store, key string) driver.Version {
	t.Helper()
	_, v, err := s.Get(t.Context(), key)
	if err != nil {
		t.Fatalf("Get(%q) = %v", key, err)
	}
	return v
}
