package mysql_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/kvbreaker/kvbreaker/backends/mysql"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/testservers/mariadbtest"
)

// TestDialMissingTable: Dial's store has the pool WithMaxConns asked for
// and names its server (Endpoint); its Ping says a missing table in an
// error matching ErrNoTable that names the table, the database and the
// server and that Explain keeps as it is; the store's Prepare creates the
// table, after which Ping passes (the negative control), and a closed
// store's Ping matches ErrClosed, not ErrNoTable.
func TestDialMissingTable(t *testing.T) {
	ctx := t.Context()
	name := fmt.Sprintf("dial_%d", prefixSeq.Add(1))
	s, err := mysql.Dial(ctx, server.DSN(), name, mysql.WithMaxConns(2))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	t.Cleanup(func() { _, _ = newDB(t, server.DSN()).ExecContext(ctx, "DROP TABLE IF EXISTS "+name) })
	if n := s.DB().Stats().MaxOpenConnections; n != 2 || !strings.HasSuffix(s.String(), " at "+server.Addr()) {
		t.Errorf("Dial's pool allows %d connections, %s; want 2, at %s", n, s, server.Addr())
	}
	err = s.Ping(ctx)
	want := "mysql: table " + name + " does not exist in database " + mariadbtest.Database + " at " + server.Addr() + " (error 1146)"
	if me, _ := errors.AsType[*gomysql.MySQLError](err); !errors.Is(err, mysql.ErrNoTable) || err.Error() != want || me == nil || me.Number != 1146 {
		t.Fatalf("Ping on a missing table: %v; want %q, matching ErrNoTable and unwrapping to the server's 1146", err, want)
	}
	if got := s.Explain(err); got != err {
		t.Errorf("Explain of the missing table: %v; want it as it is", got)
	}
	if p, err := s.Prepare(ctx); err != nil || p.Existed {
		t.Fatalf("Prepare = %+v, %v; want the table created", p, err)
	}
	if err := s.Ping(ctx); err != nil {
		t.Errorf("Ping once the table exists: %v", err)
	}
	s.Close()
	if err := s.Ping(ctx); !errors.Is(err, mysql.ErrClosed) || errors.Is(err, mysql.ErrNoTable) {
		t.Errorf("Ping after Close: %v; want ErrClosed alone", err)
	}
}

// TestDialRefusesWhatItCannotUse: a data source name that does not parse
// is Dial's *driver.OptionError, without the name; a negative WithMaxConns
// is refused.
func TestDialRefusesWhatItCannotUse(t *testing.T) {
	_, err := mysql.Dial(t.Context(), "app:s3cret@tcp(db:3306", "kvbreaker")
	if _, ok := errors.AsType[*driver.OptionError](err); !ok || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("Dial of a bad name: %v; want an *driver.OptionError without the password", err)
	}
	if _, err := mysql.New(newDB(t, server.DSN()), table, mysql.WithMaxConns(-1)); !strings.Contains(fmt.Sprint(err), "WithMaxConns") {
		t.Errorf("WithMaxConns(-1): %v; want it refused", err)
	}
}

// TestExplainNamesTheSetting: a password the server refuses is explained
// naming WithSetting's setting, or the data source name without it.
func TestExplainNamesTheSetting(t *testing.T) {
	cfg, err := gomysql.ParseDSN(server.DSN())
	if err != nil {
		t.Fatal(err)
	}
	cfg.Passwd = "not-" + cfg.Passwd
	for setting, want := range map[string]string{"$DATABASE_DSN": "check the user and password in $DATABASE_DSN", "": "check the user and password in the data source name"} {
		s, err := mysql.Dial(t.Context(), cfg.FormatDSN(), table, mysql.WithSetting(setting))
		if err != nil {
			t.Fatal(err)
		}
		err = s.Explain(s.Ping(t.Context()))
		if me, _ := errors.AsType[*gomysql.MySQLError](err); me == nil || me.Number != 1045 || !strings.Contains(err.Error(), want) {
			t.Errorf("WithSetting(%q): Ping refused as %v; want the server's 1045, and %q", setting, err, want)
		}
		s.Close()
	}
}

// TestExplainLeavesCreateDenied: a *CreateDeniedError already says what to
// change, so Explain puts only the address in front of it; the same
// refusal bare (the negative control) is explained as a missing privilege.
func TestExplainLeavesCreateDenied(t *testing.T) {
	cfg, err := gomysql.ParseDSN(server.DSN())
	if err != nil {
		t.Fatal(err)
	}
	me := &gomysql.MySQLError{Number: 1142, Message: "CREATE command denied"}
	de := &mysql.CreateDeniedError{User: "app", Table: "t", Err: me}
	if got := mysql.Explain(de, cfg, ""); got.Error() != "mysql at "+cfg.Addr+": "+de.Error() || !errors.Is(got, de) {
		t.Errorf("Explain of a CreateDeniedError: %v", got)
	}
	if got := mysql.Explain(me, cfg, ""); !strings.Contains(got.Error(), "lacks a privilege") {
		t.Errorf("Explain of the bare refusal: %v", got)
	}
}

// TestOpenLeavesTheCallersConfig: Open bounds its first dial and its
// connections by 2 s on a copy; the configuration the caller passed keeps
// its Timeout of zero.
func TestOpenLeavesTheCallersConfig(t *testing.T) {
	cfg, err := gomysql.ParseDSN(server.DSN())
	if err != nil {
		t.Fatal(err)
	}
	cfg.Timeout = 0
	s, err := mysql.Open(t.Context(), cfg, table)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if cfg.Timeout != 0 {
		t.Errorf("the caller's configuration became Timeout %v; want 0 as given", cfg.Timeout)
	}
}
