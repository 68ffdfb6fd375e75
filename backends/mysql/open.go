package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/kvbreaker/kvbreaker/adapter"
)

// dialTimeout is cfg.Timeout's default in Open.
const dialTimeout = 2 * time.Second

// Open makes a pool of at most maxConns connections (0: no bound) of the
// data source name cfg (gomysql.ParseDSN's; its Timeout 2 s if unset) and
// returns a Store over table on it, naming cfg.Addr in errors
// (WithEndpoint), which the Store's Close closes. Before making the pool it
// dials cfg.Addr once, within that timeout, so that a refused port or an
// unknown host is an *driver.UnreachableError at once. It sends no statement: Ping
// checks that the server answers and the table exists.
func Open(ctx context.Context, cfg *gomysql.Config, table string, maxConns int, opts ...Option) (*Store, error) {
	if cfg.Timeout == 0 {
		cfg.Timeout = dialTimeout
	}
	network := cfg.Net
	if network == "" {
		network = "tcp"
	}
	if err := adapter.CheckDial(ctx, "mysql", network, cfg.Addr, cfg.Timeout); err != nil {
		return nil, err
	}
	connector, err := gomysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("mysql at %s: %w", cfg.Addr, err)
	}
	db := sql.OpenDB(connector)
	db.SetMaxOpenConns(maxConns)
	s, err := New(db, table, append([]Option{WithEndpoint(cfg.Addr)}, opts...)...)
	if err != nil {
		db.Close()
		return nil, err
	}
	s.ownDB, s.database = true, cfg.DBName
	return s, nil
}

// String names the table, its database (a Store Open made) and the server
// (WithEndpoint's), for a tool's output or a log: "mysql table kvbreaker
// in database app at db:3306", without credentials.
func (s *Store) String() string {
	where := "mysql table " + s.table
	if s.database != "" {
		where += " in database " + s.database
	}
	if s.endpoint != "" {
		where += " at " + s.endpoint
	}
	return where
}
