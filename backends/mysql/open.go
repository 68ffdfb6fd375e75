package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/kvbreaker/kvbreaker/adapter"
	"github.com/kvbreaker/kvbreaker/driver"
)

// dialTimeout is cfg.Timeout's default in Open.
const dialTimeout = 2 * time.Second

// Dial makes a pool of the data source name dsn (gomysql.ParseDSN's,
// user[:password]@tcp(host:port)/database[?options]) and returns a Store
// over table on it, as Open does. Its error for a name that does not parse
// never shows the name, which may carry the password.
func Dial(ctx context.Context, dsn, table string, opts ...Option) (*Store, error) {
	cfg, err := gomysql.ParseDSN(dsn)
	if err != nil {
		return nil, &driver.OptionError{Backend: "mysql", Option: "data source name", Value: "(not shown)", Fix: err.Error()}
	}
	return Open(ctx, cfg, table, opts...)
}

// Open makes a pool of the data source name cfg (gomysql.ParseDSN's; its
// Timeout 2 s if unset) of at most WithMaxConns connections and returns a
// Store over table on it, naming cfg.Addr in errors (WithEndpoint), which
// the Store's Close closes. Before making the pool it dials cfg.Addr once,
// within that timeout, so that a refused port or an unknown host is an
// *driver.UnreachableError at once. It sends no statement: Ping checks that
// the server answers and the table exists.
func Open(ctx context.Context, cfg *gomysql.Config, table string, opts ...Option) (*Store, error) {
	// The bound goes on a copy: the caller's configuration stays as given.
	cfg = cfg.Clone()
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
	db.SetMaxOpenConns(apply(opts).maxConns)
	s, err := New(db, table, append([]Option{WithEndpoint(cfg.Addr)}, opts...)...)
	if err != nil {
		db.Close()
		return nil, err
	}
	s.ownDB, s.cfg = true, cfg
	return s, nil
}

// String names the table, its database (a Store Open made) and the server
// (WithEndpoint's), for a tool's output or a log: "mysql table kvbreaker
// in database app at db:3306", without credentials.
func (s *Store) String() string { return "mysql table " + s.table + s.where() }

// where is " in database D at ADDR" with what the store knows of them.
func (s *Store) where() string {
	where := ""
	if s.cfg.DBName != "" {
		where += " in database " + s.cfg.DBName
	}
	if s.endpoint != "" {
		where += " at " + s.endpoint
	}
	return where
}
