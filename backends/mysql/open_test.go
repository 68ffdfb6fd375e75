package mysql_test

import (
	"errors"
	"net"
	"strings"
	"testing"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/kvbreaker/kvbreaker/backends/mysql"
	"github.com/kvbreaker/kvbreaker/driver"
)

// TestOpenOwnsItsPool: Open's store answers on a pool of its own, of at
// most WithMaxConns connections, names its table, database and server
// (String), and its Close closes that pool (a ping fails
// after it), while New's Close leaves the caller's pool open. A closed port
// is an *driver.UnreachableError naming the address, before any pool is made.
func TestOpenOwnsItsPool(t *testing.T) {
	ctx := t.Context()
	cfg, err := gomysql.ParseDSN(server.DSN())
	if err != nil {
		t.Fatal(err)
	}
	s, err := mysql.Open(ctx, cfg, table, mysql.WithMaxConns(2))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	if n := s.DB().Stats().MaxOpenConnections; n != 2 {
		t.Errorf("Open's pool allows %d connections, want 2", n)
	}
	if got, want := s.String(), "mysql table "+table+" in database "+cfg.DBName+" at "+cfg.Addr; got != want || cfg.DBName == "" {
		t.Errorf("String() = %q, want %q", got, want)
	}
	s.Close()
	if err := s.DB().PingContext(ctx); err == nil {
		t.Error("Open's pool still answers after Close")
	}

	// The negative control: New's pool stays the caller's.
	db := newDB(t, server.DSN())
	n, err := mysql.New(db, table)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := n.String(), "mysql table "+table; got != want {
		t.Errorf("New's String() = %q, want %q: a *sql.DB says neither its database nor its server", got, want)
	}
	n.Close()
	if err := db.PingContext(ctx); err != nil {
		t.Errorf("New's Close closed the caller's pool: %v", err)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	shut, err := gomysql.ParseDSN("u@tcp(" + ln.Addr().String() + ")/db")
	if err != nil {
		t.Fatal(err)
	}
	_, err = mysql.Open(ctx, shut, table, mysql.WithMaxConns(2))
	if !errors.Is(err, driver.ErrUnreachable) || !strings.Contains(err.Error(), ln.Addr().String()+": connection refused") {
		t.Errorf("Open at a closed port: %v, want an driver.UnreachableError saying connection refused", err)
	}
}
